//! Pods given as JSON text, as the webhook passes `request.object`: the cases where reading a few
//! fields in place differs from parsing the whole object into a `Value`. (Every table row already
//! checks that both inputs agree on ordinary pods; see `apply` in `mod.rs`.)

use serde_json::{Value, json, value::RawValue};

use super::{NS, load, pd};
use crate::decision::{DenialReason, Outcome, Request};

fn apply_text(text: &str, policies: &[Value]) -> Outcome<'static> {
    let (set, report) = load(policies);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let raw: Box<RawValue> = serde_json::from_str(text).expect("valid JSON");
    set.apply(&Request::create(&*raw, NS)).into_owned()
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

fn env_policy() -> Value {
    pd(
        "env",
        json!({"selector": {"matchLabels": {"env": "yes"}}, "env": [{"name": "A", "value": "1"}]}),
    )
}

#[test]
fn a_repeated_key_is_read_as_a_value_reads_it() {
    // serde_json's `Value` keeps the last of repeated keys; the API server never sends them, but a
    // hand-written review may. The container's first `name` would make it a sidecar-less `x`.
    let text = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"env":"yes"}},
        "spec":{"containers":[{"name":"x","name":"main","env":[]}]}}"#;
    let via_text = apply_text(text, &[env_policy()]);
    let value: Value = serde_json::from_str(text).expect("JSON");
    let (set, _) = load(&[env_policy()]);
    let via_value = set.apply(&Request::create(&value, NS));
    assert_eq!(via_text, via_value.into_owned());
    let Outcome::Admitted(admission) = via_text else {
        panic!("denied")
    };
    assert_eq!(
        admission.object(&value).expect("applies")["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
}

#[test]
fn nesting_too_deep_for_a_value_is_fine_where_poddefaults_do_not_read() {
    let text = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","labels":{{"env":"yes"}}}},
            "spec":{{"containers":[{{"name":"main"}}]}},"status":{}}}"#,
        nested(1000)
    );
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "deeper than serde_json's limit"
    );
    let Outcome::Admitted(admission) = apply_text(&text, &[env_policy()]) else {
        panic!("denied")
    };
    assert_eq!(
        serde_json::to_value(admission.patch()).expect("JSON"),
        json!([
            {"op": "add", "path": "/metadata/annotations", "value": {
                "poddefault.admission.kubeflow.org/poddefault-env": "7"}},
            {"op": "add", "path": "/spec/containers/0/env", "value": [{"name": "A", "value": "1"}]}
        ])
    );
}

#[test]
fn nesting_too_deep_for_a_gatekeeper_mutator_is_denied_as_unreadable() {
    let mutator = json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "AssignMetadata",
        "metadata": {"name": "team"},
        "spec": {"location": "metadata.labels.team", "parameters": {"assign": {"value": "a"}}}
    });
    let text = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"status":{}}}"#,
        nested(1000)
    );
    let Outcome::Denied(denial) = apply_text(&text, &[mutator]) else {
        panic!("admitted")
    };
    assert_eq!(denial.reason, DenialReason::UnreadableObject);
    assert!(denial.message.contains("recursion limit"), "{}", denial.message);
}
