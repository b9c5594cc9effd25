//! PodDefault compatibility tables. Each row names the Kubeflow behaviour it pins: `U*` are
//! Kubeflow's own unit tests (`main_test.go`, with their intended expectations), `I*` its
//! integration tests, `D*` behaviours derived from its `main.go` (reference `poddefault.md` §3.3),
//! and `X*` outfit's documented deviations (docs/poddefault.md).

mod derived;
mod deviations;
mod idempotence;
mod json_input;
mod upstream;
mod validation;

use serde_json::{Value, json, value::RawValue};

use crate::{
    decision::{Object, Outcome, Request},
    document::Document,
    policy_set::{LoadReport, PolicySet},
    view::ObjectView,
    vocab::Origin,
};

pub(super) const NS: &str = "team-a";
pub(super) const MARKER: &str = "poddefault.admission.kubeflow.org/poddefault-";

/// A PodDefault document in [`NS`] with resourceVersion `7`.
pub(super) fn pd(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "PodDefault",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "7"},
        "spec": spec,
    })
}

/// A pod in [`NS`] named `p`, with the given metadata fields merged in and the given spec.
pub(super) fn pod(metadata: Value, spec: Value) -> Value {
    let mut meta = json!({"name": "p", "namespace": NS});
    if let (Value::Object(meta), Value::Object(extra)) = (&mut meta, metadata) {
        meta.extend(extra);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

pub(super) fn load(policies: &[Value]) -> (PolicySet, LoadReport) {
    let mut builder = PolicySet::builder();
    for (index, value) in policies.iter().enumerate() {
        let document = Document {
            origin: Origin {
                document: Some(index),
                ..Origin::named("test")
            },
            value: value.clone(),
        };
        let _ = builder.add(&document);
    }
    builder.build()
}

/// Applies `policies` to `pod` given every way a caller can: as a parsed `Value` (the CLI), as JSON
/// text, and as a view read with its text (the webhook; pretty-printed, so that raw values carry
/// whitespace). Every row of every table thereby checks that the three agree.
pub(super) fn apply(pod: &Value, policies: &[Value]) -> Outcome<'static> {
    let (set, report) = load(policies);
    assert!(
        report.errors.is_empty(),
        "unexpected load errors: {:?}",
        report.errors
    );
    let request = |object| Request::create(object, NS);
    let from_value = set.apply(&request(pod.into()));
    let text = serde_json::to_string_pretty(pod).expect("JSON");
    let raw: Box<RawValue> = serde_json::from_str(&text).expect("JSON");
    let from_json = set.apply(&request((&*raw).into()));
    assert_eq!(from_json, from_value, "JSON text and Value disagree on {pod}");
    let view: ObjectView<'_> = serde_json::from_str(&text).expect("a view");
    let json = || Some(&*raw);
    let from_view = set.apply(&request(Object::Read {
        view: &view,
        json: &json,
    }));
    assert_eq!(
        from_view, from_value,
        "the webhook's view and Value disagree on {pod}"
    );
    from_value.into_owned()
}

/// The admitted object (the input when nothing changed); panics on a denial.
pub(super) fn admitted(pod: &Value, policies: &[Value]) -> Value {
    match apply(pod, policies) {
        Outcome::Admitted(admission) => admission.object(pod).expect("patch applies").into_owned(),
        Outcome::Denied(denial) => panic!("expected admission, got denial: {}", denial.message),
    }
}

/// The denial message; panics when admitted.
pub(super) fn denied(pod: &Value, policies: &[Value]) -> String {
    match apply(pod, policies) {
        Outcome::Admitted(admission) => panic!("expected denial, got admission: {:?}", admission.patch()),
        Outcome::Denied(denial) => denial.message,
    }
}

/// Whether the pod went through untouched, with no policy recorded as applied.
pub(super) fn untouched(pod: &Value, policies: &[Value]) -> bool {
    matches!(apply(pod, policies), Outcome::Admitted(a) if a.is_unchanged() && a.applied.is_empty())
}
