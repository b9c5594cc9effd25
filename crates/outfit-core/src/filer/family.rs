//! The filer injector as a family of the kinds table: its inputs (ConfigMaps and Secrets of the
//! names it reads; the others are declined, not refused), the plan of each namespace built once,
//! the engine's step on pod CREATE, and its explanation.

use std::{any::Any, borrow::Cow};

use serde_json::{Map, Value, json};

use super::{
    inputs::{self, Input, Inputs, Namespaces},
    kinds::{CONFIG_MAP, SECRET},
    plan::{NamespacePlan, plan},
    upstream::{INJECT_ANNOTATION, NOTEBOOK_ENV, NOTEBOOK_LABEL},
};
use crate::{
    decision::{Admission, Denial, Object, Request, internal_denial, object_namespace},
    document::Document,
    error::{LoadWarning, PolicyError},
    explain::{
        changes::changes_between,
        report::{Clause, Decision, Verdict},
    },
    family::{Context, ExplainState, Family, FamilyBuilder, FamilySet, LoadOptions, Targets},
    vocab::{FastMap, Operation, PolicyKind, PolicyRef},
};

/// The filer injector's family.
#[derive(Debug)]
pub struct Filers;

/// Its entry in the kinds table.
pub static FAMILY: Filers = Filers;

impl Family for Filers {
    fn kinds(&self) -> &'static [PolicyKind] {
        &[CONFIG_MAP, SECRET]
    }

    /// StatCan's injector marks the pod `injected` (its inject annotation); outfit does the same,
    /// and that mark, not `outfit.dev/mutated-by`, is what keeps a reinvocation from adding the
    /// sidecars twice.
    fn records_itself(&self) -> bool {
        true
    }

    fn builder(&self, options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder> {
        Box::new(Builder {
            namespaces: Namespaces {
                injector: options.filer_namespace.to_owned(),
                default: options.default_namespace.to_owned(),
            },
            plain_secrets: options.filer_plain_secrets,
            inputs: Inputs {
                unreadable_secrets: options
                    .unreadable
                    .iter()
                    .filter(|(kind, _)| kind == SECRET.as_str())
                    .map(|(_, name)| name.clone())
                    .collect(),
                ..Inputs::default()
            },
        })
    }
}

struct Builder {
    namespaces: Namespaces,
    plain_secrets: bool,
    inputs: Inputs,
}

impl FamilyBuilder for Builder {
    /// ConfigMaps and Secrets of other names. A `-conn-secret` is read, as StatCan reads it, to
    /// skip an SVM whose S3 keys are missing or empty; with `secretKeyRef`s only whether each key
    /// is set is kept, as the cluster's watch keeps it.
    fn declines(&self, document: &Document) -> Option<String> {
        Input::of(document, &self.namespaces).err()
    }

    fn add(
        &mut self,
        document: &Document,
        warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError> {
        let namespace = self.namespaces.of(document);
        let input = Input::of(document, &self.namespaces);
        let kind = if matches!(input, Ok(Input::Secret)) {
            SECRET
        } else {
            CONFIG_MAP
        };
        let reference = PolicyRef::new(kind, Some(namespace), document.name());
        admit(&reference)?;
        let mut warn = |message: String| {
            warnings.push(LoadWarning {
                origin: document.origin.clone(),
                message: format!("{reference}: {message}; the filer injector skips what it concerns"),
            });
        };
        let inputs = &mut self.inputs;
        match input {
            Ok(Input::FilersList) => {
                let filers = inputs::filers(document);
                if let Err(why) = &filers {
                    warn(why.clone());
                }
                inputs.filers = Some(filers);
            }
            Ok(Input::Template) => {
                let template = inputs::template(document);
                if let Err(why) = &template {
                    warn(why.clone());
                }
                inputs.template = Some(template);
            }
            Ok(Input::ExistingShares) => {
                let shares = inputs::existing_shares(document);
                for (svm, listed) in &shares {
                    if let Err(why) = listed {
                        warn(format!("data.{svm}: {why}"));
                    }
                }
                inputs
                    .shares
                    .insert(namespace.to_owned(), (reference.clone(), shares));
            }
            Ok(Input::Secret) => {
                let key = (namespace.to_owned(), document.name().to_owned());
                let keys = inputs::secret_keys(document, self.plain_secrets);
                inputs.secrets.insert(key, keys);
                inputs.secret_count += 1;
                return Ok(reference);
            }
            // Declined before `add` is called.
            Err(_) => return Ok(reference),
        }
        inputs.config_map_count += 1;
        Ok(reference)
    }

    fn build(self: Box<Self>, _errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet> {
        let inputs = &self.inputs;
        let namespaces = inputs
            .shares
            .iter()
            .map(|(namespace, (reference, shares))| {
                let plan = plan(
                    namespace,
                    reference,
                    shares,
                    inputs,
                    &self.namespaces.injector,
                    self.plain_secrets,
                );
                (namespace.clone(), plan)
            })
            .collect();
        Box::new(FilerSet {
            namespaces,
            config_maps: inputs.config_map_count,
            secrets: inputs.secret_count,
        })
    }
}

/// What the filer injector adds, by namespace.
#[derive(Debug, Default)]
pub struct FilerSet {
    namespaces: FastMap<String, NamespacePlan>,
    config_maps: usize,
    secrets: usize,
}

impl FilerSet {
    /// The plan of the namespace the request's object is in, if it has `existing-shares`. Read
    /// without parsing the object: the webhook's request names the pod's namespace.
    fn plan_for(&self, request: &Request<'_>) -> Option<&NamespacePlan> {
        if self.namespaces.is_empty() {
            return None;
        }
        let namespace = match request.object {
            Object::Value(value) => object_namespace(value).unwrap_or(request.namespace),
            Object::Json(_) | Object::Read { .. } => request.namespace,
        };
        self.namespaces.get(namespace)
    }

    /// Every plan, by namespace.
    fn sorted(&self) -> Vec<(&String, &NamespacePlan)> {
        let mut plans: Vec<_> = self.namespaces.iter().collect();
        plans.sort_unstable_by_key(|(namespace, _)| *namespace);
        plans
    }
}

impl FamilySet for FilerSet {
    fn count(&self, kind: PolicyKind) -> usize {
        if kind == CONFIG_MAP {
            self.config_maps
        } else if kind == SECRET {
            self.secrets
        } else {
            0
        }
    }

    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if request.operation != Operation::Create {
            return Ok(());
        }
        let Some(plan) = self.plan_for(request) else {
            return Ok(());
        };
        if not_a_notebook_by_its_view(request, admission) {
            return Ok(());
        }
        let original = request.object_value()?;
        let original = original.as_ref();
        let current = admission.object(original).map_err(|e| internal_denial(&e))?;
        if trigger(&current).is_err() {
            return Ok(());
        }
        // The earlier families' result, copied only when there is something to add.
        let object = (!plan.is_empty()).then(|| current.into_owned());
        if context.warns() {
            admission.warnings.extend(plan.warnings.iter().cloned());
        }
        let Some(mut object) = object else {
            return Ok(());
        };
        if let Err(why) = inject(&mut object, plan) {
            admission.warnings.push(why);
            return Ok(());
        }
        let applied = plan.reference.iter().map(Cow::Borrowed);
        admission.record(original, object, applied);
        Ok(())
    }

    fn explain(&self, request: &Request<'_>, _context: &Context<'_>, state: &mut ExplainState<'_>) {
        let namespace = object_namespace(&state.current)
            .unwrap_or(request.namespace)
            .to_owned();
        for (plan_namespace, plan) in self.sorted() {
            let Some(reference) = &plan.reference else {
                continue;
            };
            let verdict = if *plan_namespace != namespace {
                Verdict::NotMatched {
                    clause: Clause::new(
                        "metadata.namespace",
                        format!(
                            "lists the shares of namespace {plan_namespace:?}; the pod is in {namespace:?}"
                        ),
                    ),
                }
            } else if state.denied_before {
                Verdict::Unchanged {
                    reason: "an earlier policy refused the object".to_owned(),
                }
            } else if request.operation != Operation::Create {
                Verdict::NotMatched {
                    clause: Clause::new(
                        "operation",
                        format!("{}; sidecars are added on CREATE", request.operation.as_str()),
                    ),
                }
            } else {
                explain_here(plan, state)
            };
            state.decisions.push(Decision {
                policy: reference.clone(),
                verdict,
            });
        }
    }

    fn targets(&self) -> Targets {
        Targets::pods_if(!self.namespaces.is_empty())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The verdict of the plan of the pod's own namespace, leaving `state.current` as the step does.
fn explain_here(plan: &NamespacePlan, state: &mut ExplainState<'_>) -> Verdict {
    if let Err(clause) = trigger(&state.current) {
        return Verdict::NotMatched { clause };
    }
    if plan.is_empty() {
        return Verdict::Unchanged {
            reason: format!("no share can be mounted: {}", plan.warnings.join("; ")),
        };
    }
    let mut after = state.current.clone();
    if let Err(why) = inject(&mut after, plan) {
        return Verdict::Unchanged { reason: why };
    }
    let changes = changes_between(&state.current, &after);
    state.current = after;
    Verdict::Changed { changes }
}

/// Whether the webhook's view of the object, read with the review, already shows it is no notebook
/// pod (no `notebook-name` label), so that the object is not parsed whole for nothing. Only when
/// the earlier families changed nothing: a PodDefault may add the label.
fn not_a_notebook_by_its_view(request: &Request<'_>, admission: &Admission<'_>) -> bool {
    let Object::Read { view, .. } = request.object else {
        return false;
    };
    let labels = view.0.metadata().and_then(|m| m.labels.get());
    admission.is_unchanged() && labels.is_none_or(|labels| labels.get(NOTEBOOK_LABEL).is_none())
}

/// Whether StatCan's injector acts on the object (webhook.go `mutationRequired`): a Pod with the
/// `notebook-name` label whose inject annotation is not, in any case, `n`, `not`, `false`,
/// `off` or `injected`. Else the clause that rules it out.
fn trigger(object: &Value) -> Result<(), Clause> {
    if object.get("kind").and_then(Value::as_str) != Some("Pod") {
        return Err(Clause::new("kind", "the filer injector acts on Pods"));
    }
    let labels = object.pointer("/metadata/labels").and_then(Value::as_object);
    if !labels.is_some_and(|l| l.contains_key(NOTEBOOK_LABEL)) {
        return Err(Clause::new(
            format!("metadata.labels[{NOTEBOOK_LABEL}]"),
            "absent: the filer injector acts on notebook pods only",
        ));
    }
    let annotation = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(INJECT_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if ["n", "not", "false", "off", "injected"].contains(&annotation.to_lowercase().as_str()) {
        return Err(Clause::new(
            format!("metadata.annotations[{INJECT_ANNOTATION}]"),
            format!("{annotation:?}: the pod opts out, or its sidecars were added already"),
        ));
    }
    Ok(())
}

/// Adds the plan to a pod: every sidecar and volume appended after those already there (StatCan
/// kept only the last share's when the pod had none), the mounts and env vars on the container
/// with `NB_PREFIX` (StatCan patched container 0 whichever it was), and the inject annotation set
/// to `injected`. Fails, changing nothing, on a pod whose lists are not lists.
fn inject(pod: &mut Value, plan: &NamespacePlan) -> Result<(), String> {
    let notebook = notebook_container(pod)?;
    if let Some(taken) = name_taken(pod, plan) {
        return Err(format!("the pod already has {taken}; no sidecar added"));
    }
    let spec = object_at(pod, "spec")?;
    list_at(spec, "initContainers")?;
    list_at(spec, "volumes")?;
    if let Some(index) = notebook {
        let container = &mut spec["containers"][index];
        let container = container
            .as_object_mut()
            .ok_or("spec.containers[]: not an object")?;
        list_at(container, "volumeMounts")?.extend(plan.mounts.iter().cloned());
        list_at(container, "env")?.extend(plan.env.iter().cloned());
    }
    list_at(spec, "initContainers")?.extend(plan.sidecars.iter().cloned());
    list_at(spec, "volumes")?.extend(plan.volumes.iter().cloned());
    let metadata = object_at(pod, "metadata")?;
    object_at_map(metadata, "annotations")?.insert(INJECT_ANNOTATION.to_owned(), json!("injected"));
    Ok(())
}

/// A container or volume of the pod named as one the plan adds (a pod whose sidecars were added
/// before the inject annotation was removed): adding it again would get the pod refused.
fn name_taken(pod: &Value, plan: &NamespacePlan) -> Option<String> {
    let names = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|item| item.get("name").and_then(Value::as_str))
    };
    let added = |list: &[Value], name: &str| list.iter().any(|item| item["name"] == name);
    let containers = names("/spec/containers").chain(names("/spec/initContainers"));
    if let Some(name) = containers.into_iter().find(|name| added(&plan.sidecars, name)) {
        return Some(format!("a container named {name:?}"));
    }
    names("/spec/volumes")
        .find(|name| added(&plan.volumes, name))
        .map(|name| format!("a volume named {name:?}"))
}

/// The index of the notebook container: the first with an env var `NB_PREFIX`.
fn notebook_container(pod: &Value) -> Result<Option<usize>, String> {
    let Some(containers) = pod.pointer("/spec/containers").and_then(Value::as_array) else {
        return Err("spec.containers: not a list; no sidecar added".to_owned());
    };
    Ok(containers.iter().position(|container| {
        container.get("env").and_then(Value::as_array).is_some_and(|env| {
            env.iter()
                .any(|var| var.get("name").and_then(Value::as_str) == Some(NOTEBOOK_ENV))
        })
    }))
}

fn object_at<'v>(value: &'v mut Value, key: &str) -> Result<&'v mut Map<String, Value>, String> {
    let map = value.as_object_mut().ok_or("the object is not a mapping")?;
    object_at_map(map, key)
}

fn object_at_map<'v>(
    map: &'v mut Map<String, Value>,
    key: &str,
) -> Result<&'v mut Map<String, Value>, String> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if slot.is_null() {
        *slot = json!({});
    }
    slot.as_object_mut()
        .ok_or_else(|| format!("{key}: not a mapping; no sidecar added"))
}

fn list_at<'v>(map: &'v mut Map<String, Value>, key: &str) -> Result<&'v mut Vec<Value>, String> {
    let slot = map.entry(key).or_insert_with(|| json!([]));
    if slot.is_null() {
        *slot = json!([]);
    }
    slot.as_array_mut()
        .ok_or_else(|| format!("{key}: not a list; no sidecar added"))
}
