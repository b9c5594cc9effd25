//! Property: for random objects and random mutators (the builder leaves out conflicting ones, as
//! Gatekeeper disables them), mutating the already-mutated object changes nothing. This is
//! Gatekeeper's "global idempotence" (reference §3.1), which its loop relies on.

use outfit_core::{Document, Operation, Origin, PolicySet};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::support::admission;

const FIELDS: &[&str] = &["a", "b", "image", "args"];
const KEYS: &[&str] = &["x", "y"];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        prop::sample::select(vec!["x", "y", "nginx:1", "reg.io/app:v1"]).prop_map(Value::from),
    ]
}

/// Values whose objects use the path vocabulary, so random locations hit existing structure.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner.clone()), 0..3).prop_map(|fields| {
                Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..3).prop_map(|items| {
                Value::Array(
                    items
                        .into_iter()
                        .map(|(name, v)| json!({"name": name, "a": v}))
                        .collect(),
                )
            }),
        ]
    })
}

/// A location under `spec`: fields, some followed by `[name: x|y|*]`.
fn location(end_in_list: bool) -> impl Strategy<Value = String> {
    let segment = (
        prop::sample::select(FIELDS),
        prop::option::of(prop::sample::select(vec!["x", "y", "*"])),
    );
    (prop::collection::vec(segment, 1..4), prop::sample::select(KEYS)).prop_map(
        move |(segments, last_key)| {
            let mut out = String::from("spec");
            for (field, selector) in segments {
                out.push('.');
                out.push_str(field);
                if let Some(value) = selector {
                    out.push_str(&format!("[name: {value}]"));
                }
            }
            if end_in_list {
                out.push_str(&format!(".a[name: {last_key}]"));
            }
            out
        },
    )
}

fn mutator() -> impl Strategy<Value = (String, Value)> {
    let apply_to = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    let a = apply_to.clone();
    let assign = (location(false), value()).prop_map(move |(location, value)| {
        (
            "Assign".to_owned(),
            json!({"applyTo": a, "location": location, "parameters": {"assign": {"value": value}}}),
        )
    });
    let a = apply_to.clone();
    let upsert = (location(true), scalar()).prop_map(move |(location, extra)| {
        let key = location.rsplit_once("[name: ").unwrap().1.trim_end_matches(']').to_owned();
        ("Assign".to_owned(), json!({"applyTo": a, "location": location, "parameters": {"assign": {"value": {"name": key, "b": extra}}}}))
    });
    let a = apply_to.clone();
    let set = (location(false), any::<bool>(), prop::collection::vec(scalar(), 0..3)).prop_map(move |(location, prune, list)| {
        let operation = if prune { "prune" } else { "merge" };
        ("ModifySet".to_owned(), json!({"applyTo": a, "location": location, "parameters": {"operation": operation, "values": {"fromList": list}}}))
    });
    let a = apply_to;
    let image = (location(false), prop::sample::select(vec![":v2", "@sha256:0123456789abcdef0123456789abcdef"])).prop_map(move |(location, tag)| {
        ("AssignImage".to_owned(), json!({"applyTo": a, "location": location, "parameters": {"assignDomain": "my.reg", "assignTag": tag}}))
    });
    let label = (prop::sample::select(vec!["l1", "l2"]), prop::sample::select(vec!["v1", "v2"])).prop_map(|(key, value)| {
        ("AssignMetadata".to_owned(), json!({"location": format!("metadata.labels.{key}"), "parameters": {"assign": {"value": value}}}))
    });
    prop_oneof![assign, upsert, set, image, label]
}

fn build(mutators: &[(String, Value)]) -> PolicySet {
    let documents: Vec<Document> = mutators
        .iter()
        .enumerate()
        .map(|(index, (kind, spec))| {
            let version = if kind == "AssignImage" { "v1alpha1" } else { "v1" };
            Document {
                origin: Origin::named("generated"),
                value: json!({
                    "apiVersion": format!("mutations.gatekeeper.sh/{version}"),
                    "kind": kind,
                    "metadata": {"name": format!("m{index}")},
                    "spec": spec,
                }),
            }
        })
        .collect();
    // With outfit's annotation, as `outfit serve` runs: the annotation must not break idempotence.
    let mut builder = PolicySet::builder().annotate(true);
    builder.add_all(&documents);
    builder.build().0
}

fn apply(set: &PolicySet, object: &Value) -> Option<Value> {
    admission(set, object, Operation::Create)
        .ok()
        .map(|(admitted, _)| admitted)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutating_twice_changes_nothing(
        spec in prop::collection::vec((prop::sample::select(FIELDS), value()), 0..4),
        mutators in prop::collection::vec(mutator(), 1..6),
    ) {
        let set = build(&mutators);
        let spec: Map<String, Value> = spec.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
        // Objects whose shape a mutator's path contradicts are denied (Gatekeeper errors too).
        let Some(once) = apply(&set, &object) else { return Ok(()); };
        let twice = apply(&set, &once);
        prop_assert_eq!(twice.as_ref(), Some(&once), "mutators: {:?}", mutators);
    }
}
