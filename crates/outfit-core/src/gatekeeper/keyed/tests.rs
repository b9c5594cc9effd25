//! The keyed-list index changes nothing but the time: for random objects and random sequences of
//! mutators applied to one object (sharing one index, as an admission does), every walk and probe
//! gives what a scanning walk gives. (Debug builds also check every indexed lookup against a scan.)

use proptest::prelude::*;
use serde_json::{Value, json};

use super::KeyedLists;
use crate::{
    gatekeeper::{
        Mutator, Mutators,
        setters::{self, Meta},
        system::RunInput,
        test_support::mutator,
        traverse,
    },
    vocab::Operation,
};

const FIELDS: &[&str] = &["a", "b", "env"];
const NAMES: &[&str] = &["x", "y", "z"];

fn scalar() -> impl Strategy<Value = Value> + Clone {
    prop_oneof![
        (-2i64..3).prop_map(Value::from),
        prop::sample::select(NAMES).prop_map(Value::from),
        Just(json!(1.0)),
    ]
}

/// A keyed element (sometimes keyed by an integer `port`), or now and then something else.
fn element(inner: impl Strategy<Value = Value> + Clone) -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (prop::sample::select(NAMES), inner.clone()).prop_map(|(name, a)| json!({"name": name, "a": a})),
        2 => (0i64..3, inner).prop_map(|(port, a)| json!({"port": port, "name": "x", "a": a})),
        1 => scalar(),
        1 => Just(json!({"a": 1})),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(element(inner.clone()), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..3).prop_map(|fields| {
                Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// A location under `spec`, its segments followed by `[name: x]`, `[port: 1]` or `[name: *]`.
fn location() -> impl Strategy<Value = String> {
    let selector = prop::option::of(prop::sample::select(vec![
        "[name: x]",
        "[name: y]",
        "[name: *]",
        "[port: 1]",
        "[port: \"1\"]",
    ]));
    prop::collection::vec((prop::sample::select(FIELDS), selector), 1..4).prop_map(|segments| {
        let mut out = String::from("spec");
        for (field, selector) in segments {
            out.push('.');
            out.push_str(field);
            out.push_str(selector.unwrap_or(""));
        }
        out
    })
}

fn one_mutator() -> impl Strategy<Value = Option<Mutator>> {
    let apply_to = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    let (a, b, c) = (apply_to.clone(), apply_to.clone(), apply_to);
    prop_oneof![
        (location(), value()).prop_map(move |(location, value)| {
            mutator("Assign", "m", json!({"applyTo": a, "location": location, "parameters": {"assign": {"value": value}}})).ok()
        }),
        (location(), prop::sample::select(NAMES), scalar()).prop_map(move |(location, name, extra)| {
            let location = format!("{location}.env[name: {name}]");
            let value = json!({"name": name, "b": extra});
            mutator("Assign", "m", json!({"applyTo": b, "location": location, "parameters": {"assign": {"value": value}}})).ok()
        }),
        (location(), any::<bool>(), prop::collection::vec(element(scalar()), 0..3)).prop_map(move |(location, prune, values)| {
            let operation = if prune { "prune" } else { "merge" };
            mutator("ModifySet", "m", json!({"applyTo": c, "location": location, "parameters": {"operation": operation, "values": {"fromList": values}}})).ok()
        }),
    ]
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn indexed_walks_equal_scanning_walks(
        spec in value(),
        mutators in prop::collection::vec(one_mutator(), 1..10),
        rounds in 1usize..3,
    ) {
        let (mut indexed, mut scanned) = (pod(spec.clone()), pod(spec));
        let mut lists = KeyedLists::default();
        for m in mutators.iter().flatten().cycle().take(mutators.len() * rounds) {
            let meta = Meta { name: "p", namespace: Some("ns") };
            let setter = setters::for_action(&m.action, meta);
            let nodes = m.location.nodes();
            let probe = traverse::would_change_indexed(nodes, &m.tester, &setter, &indexed, &mut lists);
            prop_assert_eq!(probe, traverse::would_change(nodes, &m.tester, &setter, &scanned), "{}", m.location);
            let with_index = traverse::apply_indexed(nodes, &m.tester, &setter, &mut indexed, &mut lists);
            let with_scan = traverse::apply(nodes, &m.tester, &setter, &mut scanned);
            prop_assert_eq!(&with_index, &with_scan, "{}", m.location);
            prop_assert_eq!(&indexed, &scanned, "{}", m.location);
            prop_assert!(probe || !with_scan.unwrap_or(true), "the probe foresees every change");
            if with_index.is_err() {
                break;
            }
        }
    }

    #[test]
    fn indexed_run_equals_scanning_run(spec in value(), mutators in prop::collection::vec(one_mutator(), 0..8)) {
        let items: Vec<Mutator> = mutators
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, mut m)| {
                m.reference.name = format!("m{i}");
                m
            })
            .collect();
        let loaded = items.len();
        let set = Mutators::new(items, loaded);
        let object = pod(spec);
        let input = RunInput { namespace: "ns", operation: Operation::Create, namespace_labels: &|_| None };
        let (mut a, mut b) = ((None, Vec::new(), Vec::new()), (None, Vec::new(), Vec::new()));
        let indexed = set.run(&object, &mut a.0, &input, &mut a.1, &mut a.2);
        let exhaustive = set.run_exhaustive(&object, &mut b.0, &input, &mut b.1, &mut b.2);
        prop_assert_eq!(indexed, exhaustive);
        prop_assert_eq!(a, b);
    }
}

/// Many mutators each adding one element to the same lists: the case the index is for.
#[test]
fn a_growing_list_stays_indexed() {
    let mut object = pod(json!({"containers": [{"name": "c0"}, {"name": "c1", "env": [7, {"name": "V3"}]}]}));
    let mut scanned = object.clone();
    let mut lists = KeyedLists::default();
    for i in (0..40).chain(0..40) {
        let m = mutator(
            "Assign",
            "m",
            json!({
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": format!("spec.containers[name: *].env[name: V{i}].value"),
                "parameters": {"assign": {"value": format!("{i}")}},
            }),
        )
        .unwrap();
        let setter = setters::for_action(
            &m.action,
            Meta {
                name: "p",
                namespace: None,
            },
        );
        let nodes = m.location.nodes();
        let changed = traverse::apply_indexed(nodes, &m.tester, &setter, &mut object, &mut lists).unwrap();
        assert_eq!(
            changed,
            traverse::apply(nodes, &m.tester, &setter, &mut scanned).unwrap()
        );
        assert_eq!(object, scanned);
    }
    // 7 and V3 were there; V0..V39 but V3 were added.
    assert_eq!(
        object["spec"]["containers"][1]["env"].as_array().unwrap().len(),
        41
    );
}

/// A list replaced wholesale (ModifySet, or an Assign of the list) is indexed again from scratch.
#[test]
fn a_replaced_list_is_indexed_again() {
    let apply_to = json!([{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}]);
    let specs = [
        (
            "Assign",
            json!({"location": "spec.env[name: x].value", "parameters": {"assign": {"value": 1}}}),
        ),
        (
            "ModifySet",
            json!({"location": "spec.env", "parameters": {"operation": "prune", "values": {"fromList": [{"name": "x", "value": 1}]}}}),
        ),
        (
            "Assign",
            json!({"location": "spec.env[name: x].value", "parameters": {"assign": {"value": 2}}}),
        ),
        (
            "Assign",
            json!({"location": "spec.env", "parameters": {"assign": {"value": [{"name": "y"}, {"name": "x"}]}}}),
        ),
        (
            "Assign",
            json!({"location": "spec.env[name: x]", "parameters": {"assign": {"value": {"name": "x", "value": 3}}}}),
        ),
        (
            "Assign",
            json!({"location": "spec.env[name: x].value", "parameters": {"assign": {"value": 4}}}),
        ),
    ];
    let mut object = pod(json!({"env": [{"name": "x"}]}));
    let mut scanned = object.clone();
    let mut lists = KeyedLists::default();
    for (kind, mut spec) in specs {
        spec["applyTo"] = apply_to.clone();
        let m = mutator(kind, "m", spec).unwrap();
        let setter = setters::for_action(
            &m.action,
            Meta {
                name: "p",
                namespace: None,
            },
        );
        let nodes = m.location.nodes();
        let indexed = traverse::apply_indexed(nodes, &m.tester, &setter, &mut object, &mut lists);
        assert_eq!(indexed, traverse::apply(nodes, &m.tester, &setter, &mut scanned));
        assert_eq!(object, scanned, "{}", m.location);
    }
    assert_eq!(
        object["spec"]["env"],
        json!([{"name": "y"}, {"name": "x", "value": 4}])
    );
}
