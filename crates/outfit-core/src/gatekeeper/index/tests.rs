//! The mutator index only narrows: for random mutators and random objects, every mutator that
//! matches is a candidate, and a run gives what a run visiting every mutator gives.

use std::borrow::Cow;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::MutatorIndex;
use crate::{
    gatekeeper::{
        Mutator, Mutators,
        matching::Subject,
        system::{MutationError, RunInput},
        test_support::mutator,
    },
    vocab::Operation,
    vocab::PolicyRef,
};

const GROUPS: &[&str] = &["", "apps", "*"];
const VERSIONS: &[&str] = &["v1", "v1beta1"];
const KINDS: &[&str] = &["Pod", "Deployment", "Namespace", "Node", "ConfigMap", "*"];
const PATTERNS: &[&str] = &[
    "team-a",
    "team-b",
    "team-*",
    "*-a",
    "*ea*",
    "*",
    "kube-system",
    "kube-*",
    "",
    "a",
    "*a",
    "te*",
];
const NAMESPACES: &[&str] = &["team-a", "team-b", "kube-system", "area", "a", "x"];

fn some_of(pool: &'static [&'static str], max: usize) -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(pool), 0..=max)
}

fn apply_to() -> impl Strategy<Value = Value> {
    let operations = prop::sample::select(vec![
        json!(null),
        json!(["CREATE"]),
        json!(["UPDATE"]),
        json!(["*"]),
    ]);
    let entry = (
        prop::collection::vec(prop::sample::select(GROUPS), 1..=2),
        prop::collection::vec(prop::sample::select(VERSIONS), 1..=2),
        prop::collection::vec(prop::sample::select(KINDS), 1..=2),
        operations,
    )
        .prop_map(|(groups, versions, kinds, operations)| {
            let mut entry = json!({"groups": groups, "versions": versions, "kinds": kinds});
            if !operations.is_null() {
                entry["operations"] = operations;
            }
            entry
        });
    prop::collection::vec(entry, 1..=2).prop_map(Value::from)
}

fn match_block() -> impl Strategy<Value = Value> {
    let kinds = prop::collection::vec((some_of(GROUPS, 2), some_of(KINDS, 2)), 0..=2).prop_map(|entries| {
        entries
            .into_iter()
            .map(|(groups, kinds)| json!({"apiGroups": groups, "kinds": kinds}))
            .collect::<Vec<_>>()
    });
    let scope = prop::sample::select(vec!["", "*", "Cluster", "Namespaced"]);
    let source = prop::sample::select(vec!["", "All", "Original", "Generated"]);
    let selector = prop::sample::select(vec![json!(null), json!({"matchLabels": {"team": "a"}})]);
    let name = prop::sample::select(vec![json!(null), json!("web-*"), json!("team-a")]);
    (
        kinds,
        scope,
        some_of(PATTERNS, 3),
        some_of(PATTERNS, 2),
        source,
        selector.clone(),
        selector,
        name,
    )
        .prop_map(
            |(kinds, scope, namespaces, excluded, source, labels, namespace_labels, name)| {
                let mut block =
                    json!({"kinds": kinds, "namespaces": namespaces, "excludedNamespaces": excluded});
                for (field, value) in [
                    ("scope", json!(scope)),
                    ("source", json!(source)),
                    ("labelSelector", labels),
                    ("namespaceSelector", namespace_labels),
                    ("name", name),
                ] {
                    if value != json!("") && !value.is_null() {
                        block[field] = value;
                    }
                }
                block
            },
        )
}

/// Valid mutators, each with its own name and field, so that they never conflict.
fn mutators() -> impl Strategy<Value = Vec<Mutator>> {
    let one = (any::<bool>(), apply_to(), match_block());
    prop::collection::vec(one, 0..12).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .filter_map(|(i, (metadata, apply_to, block))| {
                let (kind, spec) = if metadata {
                    (
                        "AssignMetadata",
                        json!({"match": block, "location": format!("metadata.labels.l{i}"), "parameters": {"assign": {"value": "v"}}}),
                    )
                } else {
                    (
                        "Assign",
                        json!({"applyTo": apply_to, "match": block, "location": format!("spec.f{i}"), "parameters": {"assign": {"value": i}}}),
                    )
                };
                mutator(kind, &format!("m{i:02}"), spec).ok()
            })
            .collect()
    })
}

fn object() -> impl Strategy<Value = (Value, &'static str, Operation)> {
    let api_version = prop::sample::select(vec!["v1", "apps/v1", "apps/v1beta1", "v1beta1"]);
    let kind = prop::sample::select(&KINDS[..5]);
    let namespace = prop::option::of(prop::sample::select(NAMESPACES));
    let name = prop::sample::select(vec![
        json!("web-1"),
        json!("team-a"),
        json!("kube-system"),
        json!(null),
    ]);
    let labels = prop::sample::select(vec![json!(null), json!({"team": "a"}), json!({"team": "b"})]);
    let request_namespace = prop::sample::select(vec!["", "team-a", "kube-system"]);
    let operation = prop::sample::select(vec![Operation::Create, Operation::Update, Operation::Delete]);
    (
        api_version,
        kind,
        namespace,
        name,
        labels,
        request_namespace,
        operation,
    )
        .prop_map(
            |(api_version, kind, namespace, name, labels, request_namespace, operation)| {
                let mut metadata = Map::new();
                metadata.insert("generateName".into(), json!("web-"));
                for (field, value) in [
                    ("namespace", json!(namespace)),
                    ("name", name),
                    ("labels", labels),
                ] {
                    if !value.is_null() {
                        metadata.insert(field.into(), value);
                    }
                }
                let object =
                    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": {}});
                (object, request_namespace, operation)
            },
        )
}

fn namespace_labels(namespace: &str) -> Option<&'static Map<String, Value>> {
    static TEAM_A: std::sync::LazyLock<Map<String, Value>> =
        std::sync::LazyLock::new(|| json!({"team": "a"}).as_object().cloned().unwrap_or_default());
    (namespace == "team-a").then(|| &*TEAM_A)
}

type RunResult<'s> = (Result<(), MutationError>, Option<Value>, Vec<Cow<'s, PolicyRef>>);

fn run<'s>(set: &'s Mutators, object: &Value, input: &RunInput<'_, '_>, exhaustive: bool) -> RunResult<'s> {
    let (mut working, mut applied) = (None, Vec::new());
    let result = if exhaustive {
        set.run_exhaustive(object, &mut working, input, &mut applied, &mut Vec::new())
    } else {
        set.run(object, &mut working, input, &mut applied, &mut Vec::new())
    };
    (result, working, applied)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn candidates_include_every_matching_mutator(items in mutators(), (object, namespace, operation) in object()) {
        let index = MutatorIndex::new(&items);
        if let Some(subject) = Subject::new(&object, namespace, operation) {
            let candidates = index.candidates(&items, &subject);
            prop_assert!(candidates.windows(2).all(|w| w[0] < w[1]), "ascending, no repeats");
            for (position, m) in items.iter().enumerate() {
                if m.matches(&subject, &namespace_labels) {
                    prop_assert!(
                        candidates.contains(&(position as u32)),
                        "{} matches {} but is not a candidate",
                        m.reference(),
                        object
                    );
                }
            }
        }
    }

    #[test]
    fn indexed_run_equals_exhaustive_run(items in mutators(), (object, namespace, operation) in object()) {
        let loaded = items.len();
        let set = Mutators::new(items, loaded);
        let input = RunInput { namespace, operation, namespace_labels: &namespace_labels };
        prop_assert_eq!(run(&set, &object, &input, false), run(&set, &object, &input, true));
    }
}

#[test]
fn one_check_rules_out_mutators_sharing_their_criteria() {
    let items: Vec<Mutator> = (0..50)
        .map(|i| {
            mutator(
                "Assign",
                &format!("m{i:02}"),
                json!({
                    "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                    "match": {"excludedNamespaces": ["kube-*"]},
                    "location": format!("spec.f{i}"),
                    "parameters": {"assign": {"value": i}},
                }),
            )
            .unwrap()
        })
        .collect();
    let index = MutatorIndex::new(&items);
    assert_eq!(index.classes.len(), 1, "one class");
    let pod =
        |ns: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}});
    let (excluded, included) = (pod("kube-system"), pod("team-a"));
    let subject = |object| Subject::new(object, "", Operation::Create).unwrap();
    assert!(index.candidates(&items, &subject(&excluded)).is_empty());
    assert_eq!(index.candidates(&items, &subject(&included)).len(), 50);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "a"}});
    assert!(index.candidates(&items, &subject(&deployment)).is_empty());
}

#[test]
fn namespaces_are_looked_up_by_name_prefix_and_suffix() {
    let by_namespaces = |i: usize, namespaces: Value| {
        mutator(
            "Assign",
            &format!("m{i}"),
            json!({
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "match": {"namespaces": namespaces},
                "location": format!("spec.f{i}"),
                "parameters": {"assign": {"value": i}},
            }),
        )
        .unwrap()
    };
    let items = vec![
        by_namespaces(0, json!(["team-a"])),
        by_namespaces(1, json!(["team-*"])),
        by_namespaces(2, json!(["*-a"])),
        by_namespaces(3, json!(["*ea*"])),
        by_namespaces(4, json!(["other", "team-a"])),
    ];
    let index = MutatorIndex::new(&items);
    let candidates = |ns: &str| {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}});
        let subject = Subject::new(&pod, "", Operation::Create).unwrap();
        index.candidates(&items, &subject).into_owned()
    };
    assert_eq!(candidates("team-a"), [0, 1, 2, 3, 4]);
    assert_eq!(candidates("team-b"), [1, 3]);
    assert_eq!(candidates("x-a"), [2]);
    assert_eq!(candidates("other"), [4]);
    assert_eq!(candidates("zzz"), Vec::<u32>::new());
    // A cluster-scoped object is never filtered by `namespaces`.
    let node = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let subject = Subject::new(&node, "", Operation::Create).unwrap();
    assert_eq!(index.candidates(&items, &subject).len(), 5);
}
