//! What the areas share: a policy set from YAML, and one object admitted by it.

use outfit_core::{Operation, Outcome, PolicySet, Request, document::parse_stream, policy_set::LoadReport};
use serde_json::Value;

/// The policy set of a YAML stream, and what loading it reported.
pub(crate) fn load(yaml: &str) -> (PolicySet, LoadReport) {
    let documents = parse_stream(yaml, "policies.yaml").unwrap();
    let mut builder = PolicySet::builder();
    builder.add_all(&documents);
    builder.build()
}

/// The policy set of a YAML stream that loads without errors.
pub(crate) fn load_ok(yaml: &str) -> PolicySet {
    let (set, report) = load(yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    set
}

/// `object` admitted by `set` (an `operation` in namespace `default`, no user): the admitted object
/// and the policies applied, or the denial's message.
pub(crate) fn admission(
    set: &PolicySet,
    object: &Value,
    operation: Operation,
) -> Result<(Value, Vec<String>), String> {
    let request = Request {
        operation,
        ..Request::create(object, "default")
    };
    match set.apply(&request) {
        Outcome::Admitted(admission) => Ok((
            admission.object(object).expect("patch applies").into_owned(),
            admission.applied.iter().map(ToString::to_string).collect(),
        )),
        Outcome::Denied(denial) => Err(denial.message),
    }
}
