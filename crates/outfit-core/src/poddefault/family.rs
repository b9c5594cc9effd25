//! PodDefault as a family of the kinds table: compiling PodDefault documents into a set indexed
//! by namespace and label key, the engine's first step (on pod CREATE, as Kubeflow registers its
//! webhook: it reads the raw request object and writes RFC 6902 operations against it without
//! copying it), and its explanation.

use std::{any::Any, borrow::Cow};

use serde_json::{Value, value::RawValue};

use super::{
    index::NamespaceDefaults,
    merge::{Conflict, MergeError, PodText, plan},
    parse::parse,
    policy::{API_VERSION, EXCLUDE_ANNOTATION, KIND, MIRROR_POD_ANNOTATION, POLICY_KIND, PodDefault},
};
use crate::{
    decision::{Admission, Denial, DenialReason, Object, Request, unreadable},
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    explain::{
        changes::changes_between,
        report::{Clause, Decision, Verdict},
    },
    family::{Context, ExplainState, Family, FamilyBuilder, FamilySet, LoadOptions, Targets},
    fieldpath::FieldPath,
    patch::Changes,
    selector::Labels,
    view::{pod::PodView, raw_str},
    vocab::{FastMap, Operation, PolicyKind, PolicyRef},
};

/// The PodDefault family.
#[derive(Debug)]
pub struct PodDefaults;

/// Its entry in the kinds table.
pub static FAMILY: PodDefaults = PodDefaults;

impl Family for PodDefaults {
    fn crds(&self) -> &'static str {
        include_str!("crd.yaml")
    }

    fn kinds(&self) -> &'static [PolicyKind] {
        &[POLICY_KIND]
    }

    fn builder(&self, options: &LoadOptions<'_>) -> Box<dyn FamilyBuilder> {
        Box::new(Builder {
            default_namespace: options.default_namespace.to_owned(),
            items: Vec::new(),
        })
    }

    /// Kubeflow's webhook annotates the pod with each PodDefault it applied; outfit does the same.
    fn records_itself(&self) -> bool {
        true
    }
}

struct Builder {
    default_namespace: String,
    items: Vec<PodDefault>,
}

impl FamilyBuilder for Builder {
    fn add(
        &mut self,
        document: &Document,
        warnings: &mut Vec<LoadWarning>,
        admit: &mut dyn FnMut(&PolicyRef) -> Result<(), PolicyError>,
    ) -> Result<PolicyRef, PolicyError> {
        let api_version = document.api_version();
        if api_version != API_VERSION {
            return Err(PolicyError {
                origin: document.origin.clone(),
                policy: PolicyRef::new(POLICY_KIND, None, document.name()),
                field: FieldPath::new("apiVersion"),
                problem: Problem::Unsupported(format!("{api_version}; {KIND} is served as {API_VERSION}")),
            });
        }
        let pd = parse(document, &self.default_namespace, warnings)?;
        let reference = pd.reference().clone();
        admit(&reference)?;
        self.items.push(pd);
        Ok(reference)
    }

    fn build(self: Box<Self>, _errors: &mut Vec<PolicyError>) -> Box<dyn FamilySet> {
        let len = self.items.len();
        let mut by_namespace: FastMap<String, Vec<PodDefault>> = FastMap::default();
        for pd in self.items {
            by_namespace
                .entry(pd.namespace().to_owned())
                .or_default()
                .push(pd);
        }
        Box::new(PodDefaultSet {
            by_namespace: by_namespace
                .into_iter()
                .map(|(namespace, items)| (namespace, NamespaceDefaults::new(items)))
                .collect(),
            len,
        })
    }
}

/// The compiled PodDefaults, by namespace.
#[derive(Debug, Default)]
pub struct PodDefaultSet {
    by_namespace: FastMap<String, NamespaceDefaults>,
    len: usize,
}

impl PodDefaultSet {
    /// The PodDefaults of `namespace` whose selector matches `labels`, in application order.
    pub fn matching<L: Labels + ?Sized>(&self, namespace: &str, labels: Option<&L>) -> Vec<&PodDefault> {
        self.by_namespace
            .get(namespace)
            .map(|index| index.matching(labels))
            .unwrap_or_default()
    }

    /// Every PodDefault, by namespace and then in application order.
    pub fn all(&self) -> Vec<&PodDefault> {
        let mut namespaces: Vec<(&String, &NamespaceDefaults)> = self.by_namespace.iter().collect();
        namespaces.sort_unstable_by_key(|(namespace, _)| *namespace);
        namespaces
            .into_iter()
            .flat_map(|(_, index)| &index.items)
            .collect()
    }

    fn plan_value<'p>(
        &'p self,
        value: &Value,
        namespace: &str,
        context: &Context<'_>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        let json = serde_json::value::to_raw_value(value).map_err(|e| unreadable(&e))?;
        let view = PodView::parse(json.get()).map_err(|e| unreadable(&e))?;
        self.plan(&view, &|| Some(&*json), namespace, context, admission)
    }

    /// Matches and merges the PodDefaults for one object read as a view.
    fn plan<'p, 't>(
        &'p self,
        pod: &PodView<'_>,
        json: &'t dyn Fn() -> Option<&'t RawValue>,
        request_namespace: &str,
        context: &Context<'_>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if !pod.is_pod() {
            return Ok(());
        }
        let metadata = pod.metadata();
        let annotations = metadata.and_then(|m| m.annotations.get());
        if let Some(annotations) = annotations {
            let excluded = annotations.get(EXCLUDE_ANNOTATION).and_then(raw_str).as_deref() == Some("true");
            if excluded || annotations.get(MIRROR_POD_ANNOTATION).is_some() {
                return Ok(());
            }
        }
        let namespace = metadata
            .and_then(|m| m.namespace.as_deref())
            .filter(|ns| !ns.is_empty())
            .unwrap_or(request_namespace);
        let labels = metadata.and_then(|m| m.labels.get());
        let mut matching = self.matching(namespace, labels);
        // Kubeflow registers its webhook without reinvocation: it applies a PodDefault to a pod
        // once. A pod that records this very version of a PodDefault as applied (its marker
        // annotation, valued with the PodDefault's resourceVersion) is one outfit sees again,
        // after another mutation changed it; applying the PodDefault again could only conflict
        // with what that mutation did to its entries (a Gatekeeper mutator rewriting its sidecar's
        // image) or add to containers it added.
        if let Some(annotations) = annotations {
            matching.retain(|pd| !pd.recorded_in(annotations));
        }
        if matching.is_empty() {
            return Ok(());
        }
        let text = PodText::new(json);
        match plan(pod, &text, &matching, context.max_patch_bytes()) {
            Ok(plan) => {
                admission.changes = Changes::Adds(plan.into_ops(pod));
                admission
                    .applied
                    .extend(matching.iter().map(|pd| Cow::Borrowed(pd.reference())));
                Ok(())
            }
            Err(error) => Err(pod_default_denial(namespace, pod.name(), &matching, error)),
        }
    }
}

impl FamilySet for PodDefaultSet {
    fn count(&self, kind: PolicyKind) -> usize {
        if kind == POLICY_KIND { self.len } else { 0 }
    }

    fn apply<'p>(
        &'p self,
        request: &Request<'_>,
        context: &Context<'p>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if request.operation != Operation::Create || self.len == 0 {
            return Ok(());
        }
        match request.object {
            Object::Json(json) => match PodView::parse(json.get()) {
                Ok(view) => self.plan(&view, &|| Some(json), request.namespace, context, admission),
                Err(_) => {
                    // A key repeated where the view reads: read the text as a `Value` does (the
                    // last one wins) and plan against that. The API server never sends such text.
                    let value: Value = serde_json::from_str(json.get()).map_err(|e| unreadable(&e))?;
                    self.plan_value(&value, request.namespace, context, admission)
                }
            },
            Object::Read { view, json } => self.plan(&view.0, json, request.namespace, context, admission),
            Object::Value(value) => self.plan_value(value, request.namespace, context, admission),
        }
    }

    fn explain(&self, request: &Request<'_>, context: &Context<'_>, state: &mut ExplainState<'_>) {
        let all = self.all();
        if all.is_empty() {
            return;
        }
        let original = state.original;
        let mut admission = Admission::unchanged();
        let result = self.apply(request, context, &mut admission);
        let Ok(raw) = serde_json::value::to_raw_value(original) else {
            return;
        };
        let view = PodView::parse(raw.get()).ok();
        let text_of = || Some(&*raw);
        let text = PodText::new(&text_of);
        for pd in all {
            let verdict = match &view {
                None => Verdict::NotMatched {
                    clause: Clause::new("kind", "the object cannot be read as a pod"),
                },
                Some(view) => match pod_default_clause(pd, view, request) {
                    Err(clause) => Verdict::NotMatched { clause },
                    Ok(()) if recorded(pd, view) => Verdict::Unchanged {
                        reason: format!(
                            "the pod records this version as applied ({}): a PodDefault is applied once, as Kubeflow does",
                            pd.marker_annotation()
                        ),
                    },
                    Ok(()) => match (&result, pod_default_alone(pd, view, &text, original)) {
                        // In conflict with another PodDefault, though fine alone.
                        (Err(denial), verdict)
                            if denial.policies.contains(pd.reference())
                                && !matches!(verdict, Verdict::Denied { .. }) =>
                        {
                            Verdict::Denied {
                                reason: denial.message.clone(),
                            }
                        }
                        (_, verdict) => verdict,
                    },
                },
            };
            state.decisions.push(Decision {
                policy: pd.reference().clone(),
                verdict,
            });
        }
        match result {
            Err(_) => state.denied_before = true,
            Ok(()) => {
                if let Ok(Cow::Owned(object)) = admission.object(original) {
                    state.current = object;
                }
            }
        }
    }

    fn targets(&self) -> Targets {
        Targets::pods_if(self.len > 0)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Why a PodDefault does not apply, in the engine's order of checks.
fn pod_default_clause(pd: &PodDefault, pod: &PodView<'_>, request: &Request<'_>) -> Result<(), Clause> {
    if request.operation != Operation::Create {
        return Err(Clause::new(
            "operation",
            format!(
                "{}; PodDefaults apply on CREATE, as Kubeflow registers its webhook",
                request.operation.as_str()
            ),
        ));
    }
    if !pod.is_pod() {
        return Err(Clause::new("kind", "PodDefaults apply to v1 Pods only"));
    }
    let metadata = pod.metadata();
    if let Some(annotations) = metadata.and_then(|m| m.annotations.get()) {
        if annotations.get(EXCLUDE_ANNOTATION).and_then(raw_str).as_deref() == Some("true") {
            return Err(Clause::new(
                format!("metadata.annotations[{EXCLUDE_ANNOTATION}]"),
                "the pod opts out of PodDefaults",
            ));
        }
        if annotations.get(MIRROR_POD_ANNOTATION).is_some() {
            return Err(Clause::new(
                format!("metadata.annotations[{MIRROR_POD_ANNOTATION}]"),
                "a static (mirror) pod is left alone",
            ));
        }
    }
    let namespace = metadata
        .and_then(|m| m.namespace.as_deref())
        .filter(|ns| !ns.is_empty())
        .unwrap_or(request.namespace);
    if pd.namespace() != namespace {
        return Err(Clause::new(
            "metadata.namespace",
            format!(
                "applies to pods of namespace {:?}; the pod is in {namespace:?}",
                pd.namespace()
            ),
        ));
    }
    let labels = metadata.and_then(|m| m.labels.get());
    match pd.selector().unmet(labels) {
        Some(unmet) => Err(Clause::new(
            "spec.selector",
            format!("requires {unmet}; the pod has {}", unmet.found(labels)),
        )),
        None => Ok(()),
    }
}

/// Whether the pod records `pd` (this version of it) as applied.
fn recorded(pd: &PodDefault, pod: &PodView<'_>) -> bool {
    pod.metadata()
        .and_then(|m| m.annotations.get())
        .is_some_and(|annotations| pd.recorded_in(annotations))
}

/// What one PodDefault alone does to the pod.
fn pod_default_alone(pd: &PodDefault, pod: &PodView<'_>, text: &PodText<'_>, original: &Value) -> Verdict {
    // Explained on its own, without the webhook's bound.
    match plan(pod, text, &[pd], usize::MAX) {
        Ok(plan) => {
            let patch = Changes::Adds(plan.into_ops(pod)).to_patch();
            let mut after = original.clone();
            if let Err(error) = json_patch::patch(&mut after, &patch) {
                return Verdict::Denied {
                    reason: format!("outfit internal error: its own patch does not apply ({error})"),
                };
            }
            let changes = changes_between(original, &after);
            if changes.is_empty() {
                Verdict::Unchanged {
                    reason: "the pod already has everything it adds".to_owned(),
                }
            } else {
                Verdict::Changed { changes }
            }
        }
        Err(MergeError::Malformed(what)) => Verdict::Denied { reason: what },
        Err(MergeError::TooLarge(_)) => Verdict::Denied {
            reason: "its patch would pass outfit's bound on a patch".to_owned(),
        },
        Err(MergeError::Conflicts(conflicts)) => Verdict::Denied {
            reason: conflicts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}

/// Kubeflow's message, kept word for word up to `err:` so that existing alerts and searches still
/// match; what follows names each policy and field in conflict.
fn pod_default_denial(
    namespace: &str,
    pod_name: &str,
    matching: &[&PodDefault],
    error: MergeError,
) -> Denial {
    let names: Vec<&str> = matching.iter().map(|pd| pd.name()).collect();
    match error {
        MergeError::TooLarge(too_large) => too_large.denial(
            &format!("Pod {namespace}/{pod_name}"),
            matching.iter().map(|pd| pd.reference().clone()).collect(),
        ),
        MergeError::Malformed(what) => Denial {
            message: format!(
                "cannot apply poddefaults: {} on pod: {pod_name}: {what}",
                names.join(",")
            ),
            policies: matching.iter().map(|pd| pd.reference().clone()).collect(),
            reason: DenialReason::Policy,
        },
        MergeError::Conflicts(conflicts) => {
            let mut policies: Vec<PolicyRef> = matching
                .iter()
                .filter(|pd| conflicts.iter().any(|c| c.policy == pd.name()))
                .map(|pd| pd.reference().clone())
                .collect();
            policies.dedup();
            Denial {
                message: format!(
                    "conflict occurred while applying poddefaults: {} on pod: {pod_name} err: {}",
                    names.join(","),
                    aggregate(&conflicts)
                ),
                policies,
                reason: DenialReason::Policy,
            }
        }
    }
}

/// Formats errors as apimachinery's `utilerrors.NewAggregate` does: one alone, several in brackets.
fn aggregate(conflicts: &[Conflict]) -> String {
    match conflicts {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
