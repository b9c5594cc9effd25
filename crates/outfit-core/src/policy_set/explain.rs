//! `outfit explain`: for one object, every policy's verdict, with the clause that decided it and
//! what it changed ([`Explanation`], whose vocabulary is `crate::explain`). A slow path beside
//! `apply`, never on the admission path: each family of the kinds table in turn, on the object as
//! the earlier ones left it, in the engine's order, says what each of its policies did; the
//! outcome is taken from [`PolicySet::apply`] itself, so the explanation cannot disagree with the
//! webhook's answer.

use super::set::PolicySet;
use crate::{
    decision::{Outcome as Decided, Request, describe},
    explain::{Explanation, Outcome},
    family::ExplainState,
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
            object: "object".to_owned(),
            outcome,
            message: denial.map(|d| d.message.clone()),
            policies: Vec::new(),
            warnings: match &decided {
                Decided::Admitted(admission) => admission.warnings.clone(),
                Decided::Denied(_) => Vec::new(),
            },
        };
        let original = match request.object_value() {
            Ok(value) => value,
            Err(unreadable) => {
                explanation.message = Some(unreadable.message);
                return explanation;
            }
        };
        let original = original.as_ref();
        explanation.object = describe(original, request.namespace);
        let mut state = ExplainState {
            original,
            current: original.clone(),
            denial,
            denied_before: false,
            decisions: Vec::new(),
        };
        let context = self.context();
        for family in self.families() {
            family.explain(request, &context, &mut state);
        }
        explanation.policies = state.decisions;
        explanation
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, path::Path};

    use crate::{
        decision::{Outcome as Decided, Request},
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
            ("examples/filer/policies", "examples/filer/pod.yaml", "default"),
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
                    .filter(|d| matches!(d.verdict, Verdict::Changed { .. } | Verdict::ChangedFor { .. }))
                    .map(|d| d.policy)
                    .collect();
                assert_eq!(changed, applied, "{input}: {}", object.name());
            }
        }
    }
}
