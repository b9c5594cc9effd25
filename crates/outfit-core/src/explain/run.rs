//! Builds an [`Explanation`]: PodDefaults first, then the Gatekeeper mutators on the object as the
//! PodDefaults left it, in the engine's order.

use serde_json::{Value, value::RawValue};

use super::report::{Change, Clause, Decision, Explanation, Outcome, Verdict};
use crate::{
    engine::{Admission, Denial, Object, Outcome as Decided, Request},
    gatekeeper::{Mutator, matching::Subject},
    patch::Changes,
    poddefault::{self, EXCLUDE_ANNOTATION, MIRROR_POD_ANNOTATION, MergeError, PodDefault, PodText},
    policy_set::PolicySet,
    view::{pod::PodView, raw_str},
    vocab::{Operation, PolicyKind},
};

impl PolicySet {
    /// Explains what [`PolicySet::apply`] decides for `request`, policy by policy.
    pub fn explain(&self, request: &Request<'_>) -> Explanation {
        let decided = self.apply(request);
        let (outcome, denial) = match &decided {
            Decided::Admitted(admission) if admission.is_unchanged() => (Outcome::Unchanged, None),
            Decided::Admitted(_) => (Outcome::Mutated, None),
            Decided::Denied(denial) => (Outcome::Denied, Some(denial)),
        };
        let mut explanation = Explanation {
            object: String::new(),
            outcome,
            message: denial.map(|d| d.message.clone()),
            policies: Vec::new(),
        };
        let original = match whole_object(request.object) {
            Ok(value) => value,
            Err(message) => {
                explanation.object = "object".to_owned();
                explanation.message = Some(message);
                return explanation;
            }
        };
        explanation.object = describe(&original, request.namespace);
        let after_pod_defaults =
            self.explain_pod_defaults(&original, request, denial, &mut explanation.policies);
        let pod_defaults_denied = denial.is_some() && after_pod_defaults.is_none();
        let start = after_pod_defaults.unwrap_or(original);
        self.explain_mutators(
            start,
            request,
            denial,
            pod_defaults_denied,
            &mut explanation.policies,
        );
        explanation
    }

    /// PodDefault verdicts; returns the object as the PodDefaults leave it (`None` if they deny it).
    fn explain_pod_defaults(
        &self,
        original: &Value,
        request: &Request<'_>,
        denial: Option<&Denial>,
        out: &mut Vec<Decision>,
    ) -> Option<Value> {
        let all = self.all_pod_defaults();
        if all.is_empty() {
            return Some(original.clone());
        }
        let mut admission = Admission::unchanged();
        let result = self.apply_pod_defaults(request, &mut admission);
        let raw = serde_json::value::to_raw_value(original).ok()?;
        let view = PodView::parse(raw.get()).ok();
        let text_of = || Some(&*raw);
        let text = PodText::new(&text_of);
        for pd in all {
            let verdict = match view.as_ref().map_or(
                Err(Clause::new("kind", "the object cannot be read as a pod")),
                |view| pod_default_clause(pd, view, request),
            ) {
                Err(clause) => Verdict::NotMatched { clause },
                Ok(()) if view.as_ref().is_some_and(|view| recorded(pd, view)) => Verdict::Unchanged {
                    reason: format!(
                        "the pod records this version as applied ({}): a PodDefault is applied once, as Kubeflow does",
                        pd.marker_annotation()
                    ),
                },
                Ok(()) => {
                    let alone = view.as_ref().map_or_else(unreachable_view, |view| {
                        pod_default_alone(pd, view, &text, original)
                    });
                    match (&result, alone) {
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
                    }
                }
            };
            out.push(Decision {
                policy: pd.reference().clone(),
                verdict,
            });
        }
        match result {
            Err(_) => {
                debug_assert!(denial.is_some());
                None
            }
            Ok(()) => admission.object(original).ok().map(std::borrow::Cow::into_owned),
        }
    }

    /// Gatekeeper verdicts, running the mutators one at a time on `object` as the loop does.
    fn explain_mutators(
        &self,
        mut object: Value,
        request: &Request<'_>,
        denial: Option<&Denial>,
        pod_defaults_denied: bool,
        out: &mut Vec<Decision>,
    ) {
        let mutators = self.gatekeeper_mutators().items();
        let ruled_out = whole_run_clause(&object, request);
        let mut verdicts =
            self.verdicts_before_running(&object, request, ruled_out.as_ref(), pod_defaults_denied);
        let mut changes: Vec<Option<Vec<Change>>> = vec![None; mutators.len()];
        if ruled_out.is_none() && !pod_defaults_denied {
            // Gatekeeper's loop: every matching mutator in order, until an iteration changes nothing.
            for _ in 0..=mutators.len() {
                let mut changed = false;
                for (position, mutator) in mutators.iter().enumerate() {
                    if matches!(verdicts[position], Some(Verdict::Denied { .. })) {
                        continue;
                    }
                    changed |= self.explain_step(
                        mutator,
                        &mut object,
                        request,
                        &mut changes[position],
                        &mut verdicts[position],
                    );
                }
                if !changed {
                    break;
                }
            }
        }
        for (position, mutator) in mutators.iter().enumerate() {
            let verdict = final_verdict(
                mutator,
                verdicts[position].take(),
                changes[position].take(),
                denial,
                || unchanged_reason(mutator, &object, request),
            );
            out.push(Decision {
                policy: mutator.reference().clone(),
                verdict,
            });
        }
        for (policy, reason) in self.disabled_mutators() {
            out.push(Decision {
                policy: policy.clone(),
                verdict: Verdict::Disabled {
                    reason: reason.clone(),
                },
            });
        }
    }

    /// What is known of each mutator before any runs: the clause that rules it out, or that it
    /// will not run because the PodDefaults denied the object.
    fn verdicts_before_running(
        &self,
        object: &Value,
        request: &Request<'_>,
        ruled_out: Option<&Clause>,
        pod_defaults_denied: bool,
    ) -> Vec<Option<Verdict>> {
        let namespace_labels = |namespace: &str| self.namespace_labels(namespace);
        self.gatekeeper_mutators()
            .items()
            .iter()
            .map(|mutator| {
                let clause = ruled_out.cloned().or_else(|| {
                    let subject = Subject::new(object, request.namespace, request.operation)?;
                    mutator.mismatch(&subject, &namespace_labels)
                });
                match clause {
                    Some(clause) => Some(Verdict::NotMatched { clause }),
                    None if pod_defaults_denied => Some(Verdict::Unchanged {
                        reason: "not run: the PodDefaults' denial ends the admission first".to_owned(),
                    }),
                    None => None,
                }
            })
            .collect()
    }

    /// One mutator, once, on the object as it stands; returns whether it changed it.
    fn explain_step(
        &self,
        mutator: &Mutator,
        object: &mut Value,
        request: &Request<'_>,
        changes: &mut Option<Vec<Change>>,
        verdict: &mut Option<Verdict>,
    ) -> bool {
        let namespace_labels = |namespace: &str| self.namespace_labels(namespace);
        let matches = Subject::new(object, request.namespace, request.operation)
            .is_some_and(|subject| mutator.matches(&subject, &namespace_labels));
        if !matches {
            return false;
        }
        let before = object.clone();
        match mutator.mutate_once(object, request.namespace, request.operation) {
            Ok(true) => {
                changes
                    .get_or_insert_with(Vec::new)
                    .extend(changes_between(&before, object));
                // Matched after another mutator changed the object, though not at first.
                if matches!(verdict, Some(Verdict::NotMatched { .. })) {
                    *verdict = None;
                }
                true
            }
            Ok(false) => false,
            Err(error) => {
                *object = before;
                *verdict = Some(Verdict::Denied {
                    reason: format!("at {}: {}", mutator.location(), error.0),
                });
                false
            }
        }
    }
}

/// A mutator's verdict once the loop has run: a failure stands; else what it changed (a denial if
/// the object was refused because of it); else why it matched and changed nothing.
fn final_verdict(
    mutator: &Mutator,
    verdict: Option<Verdict>,
    changes: Option<Vec<Change>>,
    denial: Option<&Denial>,
    unchanged: impl FnOnce() -> String,
) -> Verdict {
    match (verdict, changes) {
        (Some(failed @ Verdict::Denied { .. }), _) => failed,
        (_, Some(_)) if denial.is_some_and(|d| d.policies.contains(mutator.reference())) => Verdict::Denied {
            reason: denial.map(|d| d.message.clone()).unwrap_or_default(),
        },
        (_, Some(changes)) => Verdict::Changed { changes },
        (Some(verdict), None) => verdict,
        (None, None) => Verdict::Unchanged { reason: unchanged() },
    }
}

/// The clause that rules out every Gatekeeper mutator at once, if any.
fn whole_run_clause(object: &Value, request: &Request<'_>) -> Option<Clause> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Some(Clause::new(
            "operation",
            format!(
                "{}; Gatekeeper mutates on CREATE and UPDATE",
                request.operation.as_str()
            ),
        ));
    }
    let Some(subject) = Subject::new(object, request.namespace, request.operation) else {
        return Some(Clause::new("kind", "the object has no apiVersion or kind"));
    };
    subject.group.ends_with(".gatekeeper.sh").then(|| {
        Clause::new(
            "kind",
            format!("{}: Gatekeeper never mutates its own resources", subject.group),
        )
    })
}

fn unchanged_reason(mutator: &Mutator, object: &Value, request: &Request<'_>) -> String {
    if mutator.reference().kind == PolicyKind::AssignMetadata {
        return "the label or annotation is already set (AssignMetadata never changes one)".to_owned();
    }
    let stopped = Subject::new(object, request.namespace, request.operation)
        .is_some_and(|subject| mutator.stopped_by_path_tests(&subject));
    if stopped {
        "its spec.parameters.pathTests stopped it".to_owned()
    } else {
        "the object already has what it sets, or its location names list entries the object does not have"
            .to_owned()
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
    match poddefault::plan(pod, text, &[pd]) {
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
        Err(MergeError::Conflicts(conflicts)) => Verdict::Denied {
            reason: conflicts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}

fn unreachable_view() -> Verdict {
    Verdict::Denied {
        reason: "outfit internal error: the pod could not be read; please report this".to_owned(),
    }
}

/// The fields that differ between two objects, as pointers with both values. Changes inside a
/// list of plain values (`args`, `command`) are shown as the whole list before and after: the
/// element-by-element diff of a list that lost its first item reads as every item changing.
fn changes_between(before: &Value, after: &Value) -> Vec<Change> {
    let mut changes: Vec<Change> = Vec::new();
    for operation in &json_patch::diff(before, after).0 {
        let mut path = operation.path().to_string();
        if let Some((parent, _)) = path.rsplit_once('/') {
            let scalars = |root: &Value| {
                root.pointer(parent)
                    .and_then(Value::as_array)
                    .is_some_and(|items| items.iter().all(|item| !item.is_object() && !item.is_array()))
            };
            if scalars(before) && scalars(after) {
                path = parent.to_owned();
            }
        }
        if changes.last().is_some_and(|last| last.path == path) {
            continue;
        }
        changes.push(Change {
            before: before.pointer(&path).cloned(),
            after: after.pointer(&path).cloned(),
            path,
        });
    }
    changes
}

/// The object as a `Value`, however the caller has it.
fn whole_object(object: Object<'_>) -> Result<Value, String> {
    let text: &RawValue = match object {
        Object::Value(value) => return Ok(value.clone()),
        Object::Json(json) => json,
        Object::Read { json, .. } => json().ok_or("the object's text is not available")?,
    };
    serde_json::from_str(text.get()).map_err(|e| format!("outfit cannot read the object: {e}"))
}

/// `<kind> <namespace>/<name>`.
fn describe(object: &Value, default_namespace: &str) -> String {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let kind = field("/kind").unwrap_or("object");
    let namespace = field("/metadata/namespace").unwrap_or(default_namespace);
    let name = field("/metadata/name")
        .or_else(|| field("/metadata/generateName"))
        .unwrap_or("<unnamed>");
    format!("{kind} {namespace}/{name}")
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, path::Path};

    use crate::{
        engine::{Outcome as Decided, Request},
        explain::Verdict,
        policy_set::PolicySet,
        source,
        vocab::{Operation, PolicyRef},
    };

    /// The explanation never contradicts the engine: the policies it says changed the object are
    /// exactly those `apply` lists as applied, on the examples and the fixtures made for explain.
    #[test]
    fn changed_verdicts_are_exactly_the_applied_policies() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cases = [
            (
                "examples/workspace/policies",
                "examples/workspace/pod.yaml",
                "default",
            ),
            (
                "examples/gatekeeper-nfs/policies.yaml",
                "examples/gatekeeper-nfs/pod.yaml",
                "default",
            ),
            (
                "tests/fixtures/explain-clauses/policies.yaml",
                "tests/fixtures/explain-clauses/input.yaml",
                "default",
            ),
            (
                "tests/fixtures/gatekeeper-image-set-labels/policies.yaml",
                "tests/fixtures/gatekeeper-image-set-labels/input.yaml",
                "team-a",
            ),
        ];
        for (policies, input, namespace) in cases {
            let documents = source::read_paths(&[root.join(policies)]).expect("policies read");
            let mut builder = PolicySet::builder().default_namespace(namespace);
            builder.add_all(&documents);
            let (set, report) = builder.build();
            assert!(report.errors.is_empty(), "{policies}: {:?}", report.errors);
            for object in source::read_file(&root.join(input)).expect("input read") {
                let request = Request {
                    object: (&object.value).into(),
                    namespace,
                    operation: Operation::Create,
                    user: None,
                };
                let applied: BTreeSet<PolicyRef> = match set.apply(&request) {
                    Decided::Admitted(admission) => admission.applied.iter().map(|a| (**a).clone()).collect(),
                    Decided::Denied(_) => BTreeSet::new(),
                };
                let changed: BTreeSet<PolicyRef> = set
                    .explain(&request)
                    .policies
                    .into_iter()
                    .filter(|d| matches!(d.verdict, Verdict::Changed { .. }))
                    .map(|d| d.policy)
                    .collect();
                assert_eq!(changed, applied, "{input}: {}", object.name());
            }
        }
    }
}
