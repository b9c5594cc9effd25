//! Property: the webhook may be invoked again on the pod it just mutated (`reinvocationPolicy:
//! IfNeeded`, or a later webhook's change), and that second pass must change nothing.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

/// Label keys pods carry and selectors read; PodDefaults add labels from another alphabet, so a
/// second pass matches the same PodDefaults as the first (Kubeflow would match more otherwise).
const POD_LABEL_KEYS: &[&str] = &["app", "tier", "gpu"];
const ADDED_LABEL_KEYS: &[&str] = &["injected", "team"];
const NAMES: &[&str] = &["a", "b", "c", "d"];

fn pick(pool: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(pool)
}

fn env_list() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((pick(NAMES), pick(&["1", "2"])), 0..3).prop_map(|vars| {
        dedup_by_name(
            vars.into_iter()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect(),
        )
    })
}

fn mounts() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(pick(NAMES), 0..3).prop_map(|names| {
        dedup_by_name(
            names
                .into_iter()
                .map(|n| json!({"name": format!("vol-{n}"), "mountPath": format!("/mnt/{n}")}))
                .collect(),
        )
    })
}

fn env_from() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(pick(NAMES), 0..2).prop_map(|names| {
        names
            .into_iter()
            .map(|n| json!({"configMapRef": {"name": n}}))
            .collect()
    })
}

fn dedup_by_name(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        if !out.iter().any(|o| o["name"] == item["name"]) {
            out.push(item);
        }
    }
    out
}

fn string_map(keys: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(pick(keys), pick(&["x", "y"]), 0..3)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k.to_owned(), json!(v))).collect())
}

fn container(name: &'static str) -> impl Strategy<Value = Value> {
    (
        env_list(),
        mounts(),
        env_from(),
        prop::option::of(Just(json!(["serve"]))),
    )
        .prop_map(move |(env, mounts, env_from, command)| {
            let mut c = json!({"name": name, "image": "img"});
            if !env.is_empty() {
                c["env"] = json!(env);
            }
            if !mounts.is_empty() {
                c["volumeMounts"] = json!(mounts);
            }
            if !env_from.is_empty() {
                c["envFrom"] = json!(env_from);
            }
            if let Some(command) = command {
                c["command"] = command;
            }
            c
        })
}

fn arbitrary_pod() -> impl Strategy<Value = Value> {
    (
        string_map(POD_LABEL_KEYS),
        container("main"),
        prop::option::of(container("helper")),
    )
        .prop_map(|(labels, main, helper)| {
            let containers: Vec<Value> = std::iter::once(main).chain(helper).collect();
            pod(json!({"labels": labels}), json!({"containers": containers}))
        })
}

fn selector() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        (pick(POD_LABEL_KEYS), pick(&["x", "y"])).prop_map(|(k, v)| json!({"matchLabels": {k: v}})),
        pick(POD_LABEL_KEYS).prop_map(|k| json!({"matchExpressions": [{"key": k, "operator": "Exists"}]})),
        pick(POD_LABEL_KEYS)
            .prop_map(|k| json!({"matchExpressions": [{"key": k, "operator": "NotIn", "values": ["x"]}]})),
    ]
}

fn arbitrary_pod_default(name: &'static str) -> impl Strategy<Value = Value> {
    (selector(), env_list(), mounts(), env_from(), string_map(ADDED_LABEL_KEYS), any::<bool>(), prop::option::of(pick(&["sa-1", "sa-2"])))
        .prop_map(move |(selector, env, mounts, env_from, labels, with_sidecar, service_account)| {
            let volumes: Vec<Value> = mounts.iter().map(|m| json!({"name": m["name"], "emptyDir": {}})).collect();
            let mut spec = json!({
                "selector": selector, "env": env, "volumeMounts": mounts, "volumes": volumes,
                "envFrom": env_from, "labels": labels, "annotations": {format!("note/{name}"): "1"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": name, "effect": "NoSchedule"}],
                "command": ["run", name], "args": ["--flag"],
            });
            if with_sidecar {
                spec["sidecars"] = json!([{"name": format!("sidecar-{name}"), "image": "side"}]);
            }
            if let Some(sa) = service_account {
                spec["serviceAccountName"] = json!(sa);
            }
            pd(name, spec)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn applying_twice_changes_nothing(
        pod in arbitrary_pod(),
        first in arbitrary_pod_default("first"),
        second in arbitrary_pod_default("second"),
    ) {
        let policies = [first, second];
        let mutated = match apply(&pod, &policies) {
            Outcome::Admitted(admission) => admission.object(&pod).expect("patch applies").into_owned(),
            // Random entries may conflict (two tolerations for `dedicated` do, for instance); the
            // property is about policies that were admitted.
            Outcome::Denied(_) => return Ok(()),
        };
        match apply(&mutated, &policies) {
            Outcome::Admitted(again) => prop_assert!(again.is_unchanged(), "second pass patched: {:?}", again.patch()),
            Outcome::Denied(denial) => prop_assert!(false, "second pass denied: {}", denial.message),
        }
    }
}
