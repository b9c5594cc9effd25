//! Behaviours derived from Kubeflow's `main.go` (reference `poddefault.md` §3.3, rows D1–D25).

use serde_json::json;

use super::*;

fn one_container(container: Value) -> Value {
    pod(json!({}), json!({"containers": [container]}))
}

#[test]
fn d1_env_conflict_with_pod_denies_with_kubeflows_prefix() {
    let base = one_container(json!({"name": "main", "image": "i", "env": [{"name": "FOO", "value": "1"}]}));
    let message = denied(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "FOO", "value": "2"}]}),
        )],
    );
    assert!(
        message.starts_with("conflict occurred while applying poddefaults: a on pod: p err: "),
        "{message}"
    );
    assert!(
        message.contains("poddefault a: spec.containers[name: main].env[name: FOO]"),
        "{message}"
    );
    assert!(
        message.contains(r#"{"name":"FOO","value":"2"} does not match existing {"name":"FOO","value":"1"}"#),
        "{message}"
    );
}

#[test]
fn d2_identical_env_is_skipped() {
    let container = json!({"name": "main", "image": "i", "env": [{"name": "FOO", "value": "1"}]});
    let out = admitted(
        &one_container(container.clone()),
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "FOO", "value": "1"}]}),
        )],
    );
    assert_eq!(out["spec"]["containers"][0], container);
    assert_eq!(
        out["metadata"]["annotations"],
        json!({(MARKER.to_owned() + "a"): "7"})
    );
}

#[test]
fn d3_d4_poddefaults_conflict_with_each_other_or_agree() {
    let base = one_container(json!({"name": "main", "image": "i"}));
    let a = pd("a", json!({"selector": {}, "env": [{"name": "X", "value": "1"}]}));
    let b_differs = pd("b", json!({"selector": {}, "env": [{"name": "X", "value": "2"}]}));
    let b_agrees = pd("b", json!({"selector": {}, "env": [{"name": "X", "value": "1"}]}));
    let message = denied(&base, &[a.clone(), b_differs]);
    assert!(
        message.contains("poddefault b: spec.containers[name: main].env[name: X]"),
        "{message}"
    );
    let out = admitted(&base, &[a, b_agrees]);
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "X", "value": "1"}])
    );
}

#[test]
fn d5_env_mounts_envfrom_go_to_every_regular_container_only() {
    let base = pod(
        json!({}),
        json!({"initContainers": [{"name": "init", "image": "i"}],
               "containers": [{"name": "main", "image": "i"}, {"name": "helper", "image": "i"}]}),
    );
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "A", "value": "1"}],
                   "volumeMounts": [{"name": "v", "mountPath": "/data"}],
                   "envFrom": [{"configMapRef": {"name": "cm"}}]}),
        )],
    );
    for index in 0..2 {
        let container = &out["spec"]["containers"][index];
        assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
        assert_eq!(
            container["volumeMounts"],
            json!([{"name": "v", "mountPath": "/data"}])
        );
        assert_eq!(container["envFrom"], json!([{"configMapRef": {"name": "cm"}}]));
    }
    assert_eq!(
        out["spec"]["initContainers"],
        json!([{"name": "init", "image": "i"}])
    );
}

#[test]
fn d6_volume_conflict_denies() {
    let base = pod(
        json!({}),
        json!({"containers": [], "volumes": [{"name": "data", "emptyDir": {}}]}),
    );
    let policy = pd(
        "a",
        json!({"selector": {}, "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]}),
    );
    assert!(denied(&base, &[policy]).contains("poddefault a: spec.volumes[name: data]"));
}

#[test]
fn d7_mount_path_clash_denies() {
    let base = one_container(
        json!({"name": "main", "image": "i", "volumeMounts": [{"name": "a", "mountPath": "/x"}]}),
    );
    let policy = pd(
        "p1",
        json!({"selector": {}, "volumeMounts": [{"name": "b", "mountPath": "/x"}]}),
    );
    assert!(denied(&base, &[policy]).contains("spec.containers[name: main].volumeMounts[mountPath: /x]"));
}

#[test]
fn d7b_mount_name_clash_across_poddefaults_denies() {
    let base = one_container(json!({"name": "main", "image": "i"}));
    let first = pd(
        "a",
        json!({"selector": {}, "volumeMounts": [{"name": "v", "mountPath": "/a"}]}),
    );
    let second = pd(
        "b",
        json!({"selector": {}, "volumeMounts": [{"name": "v", "mountPath": "/b"}]}),
    );
    assert!(
        denied(&base, &[first, second])
            .contains("poddefault b: spec.containers[name: main].volumeMounts[name: v]")
    );
}

#[test]
fn d10_label_conflict_denies_and_equal_label_passes() {
    let base = pod(
        json!({"labels": {"team": "a", "sel": "true"}}),
        json!({"containers": []}),
    );
    let conflicting = pd("a", json!({"selector": {}, "labels": {"team": "b"}}));
    assert!(denied(&base, &[conflicting]).contains("metadata.labels[team]"));
    let agreeing = pd(
        "a",
        json!({"selector": {}, "labels": {"sel": "true", "added": "yes"}}),
    );
    let out = admitted(&base, &[agreeing]);
    assert_eq!(
        out["metadata"]["labels"],
        json!({"team": "a", "sel": "true", "added": "yes"})
    );
}

#[test]
fn d11_service_account_last_poddefault_wins() {
    let base = pod(
        json!({}),
        json!({"containers": [], "serviceAccountName": "default-editor"}),
    );
    let out = admitted(
        &base,
        &[
            pd(
                "x",
                json!({"selector": {}, "serviceAccountName": "sa-x", "automountServiceAccountToken": true}),
            ),
            pd(
                "y",
                json!({"selector": {}, "serviceAccountName": "sa-y", "automountServiceAccountToken": false}),
            ),
        ],
    );
    assert_eq!(out["spec"]["serviceAccountName"], "sa-y");
    assert_eq!(out["spec"]["automountServiceAccountToken"], false);
}

#[test]
fn d12_command_args_first_wins_and_istio_proxy_is_skipped() {
    let base = pod(
        json!({}),
        json!({"containers": [{"name": "main", "image": "i"}, {"name": "side", "image": "i", "command": ["run"]},
                              {"name": "istio-proxy", "image": "i"}]}),
    );
    let out = admitted(
        &base,
        &[
            pd(
                "a",
                json!({"selector": {}, "command": ["a"], "env": [{"name": "E", "value": "1"}]}),
            ),
            pd("b", json!({"selector": {}, "command": ["b"], "args": ["x"]})),
        ],
    );
    let containers = &out["spec"]["containers"];
    assert_eq!(containers[0]["command"], json!(["a"]));
    assert_eq!(containers[0]["args"], json!(["x"]));
    assert_eq!(containers[1]["command"], json!(["run"]));
    assert_eq!(containers[1]["args"], json!(["x"]));
    assert!(containers[2].get("command").is_none() && containers[2].get("args").is_none());
    // istio-proxy still receives the env.
    assert_eq!(containers[2]["env"], json!([{"name": "E", "value": "1"}]));
}

#[test]
fn d14_sidecar_with_a_pod_containers_name_but_other_spec_denies() {
    let base = one_container(json!({"name": "kubectl", "image": "x"}));
    let policy = pd(
        "a",
        json!({"selector": {}, "sidecars": [{"name": "kubectl", "image": "y"}]}),
    );
    assert!(denied(&base, &[policy]).contains("poddefault a: spec.containers[name: kubectl]"));
}

#[test]
fn d15_sidecars_get_none_of_the_injected_env() {
    let base = one_container(json!({"name": "main", "image": "i"}));
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "A", "value": "1"}], "sidecars": [{"name": "s", "image": "s"}]}),
        )],
    );
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}])
    );
    assert_eq!(out["spec"]["containers"][1], json!({"name": "s", "image": "s"}));
}

#[test]
fn d16_exclude_annotation_must_be_exactly_true() {
    let policy = pd("a", json!({"selector": {}, "labels": {"x": "y"}}));
    let excluded = pod(
        json!({"annotations": {"poddefault.admission.kubeflow.org/exclude": "true"}}),
        json!({"containers": []}),
    );
    assert!(untouched(&excluded, std::slice::from_ref(&policy)));
    for value in ["True", "yes", ""] {
        let not_excluded = pod(
            json!({"annotations": {"poddefault.admission.kubeflow.org/exclude": value}}),
            json!({"containers": []}),
        );
        assert!(
            !untouched(&not_excluded, std::slice::from_ref(&policy)),
            "{value:?} must not exclude"
        );
    }
}

#[test]
fn d17_mirror_pods_are_left_alone() {
    let mirror = pod(
        json!({"annotations": {"kubernetes.io/config.mirror": "abc"}}),
        json!({"containers": []}),
    );
    assert!(untouched(
        &mirror,
        &[pd("a", json!({"selector": {}, "labels": {"x": "y"}}))]
    ));
}

#[test]
fn d18_empty_selector_matches_every_pod() {
    let base = pod(json!({"labels": {"anything": "1"}}), json!({"containers": []}));
    assert!(!untouched(&base, &[pd("a", json!({"selector": {}}))]));
    let unlabelled = pod(json!({}), json!({"containers": []}));
    assert!(!untouched(&unlabelled, &[pd("a", json!({"selector": {}}))]));
}

#[test]
fn d20_only_poddefaults_of_the_pods_namespace_apply() {
    let mut elsewhere = pd("a", json!({"selector": {}, "labels": {"x": "y"}}));
    elsewhere["metadata"]["namespace"] = json!("other");
    assert!(untouched(
        &pod(json!({}), json!({"containers": []})),
        &[elsewhere]
    ));
    // A pod without metadata.namespace (created by a controller) takes the request's namespace.
    let mut no_namespace = pod(json!({}), json!({"containers": []}));
    no_namespace["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let out = admitted(
        &no_namespace,
        &[pd("a", json!({"selector": {}, "labels": {"x": "y"}}))],
    );
    assert_eq!(out["metadata"]["labels"], json!({"x": "y"}));
}

#[test]
fn d21_no_match_means_no_patch() {
    let base = pod(json!({"labels": {"a": "1"}}), json!({"containers": []}));
    assert!(untouched(
        &base,
        &[pd(
            "a",
            json!({"selector": {"matchLabels": {"a": "2"}}, "labels": {"x": "y"}})
        )]
    ));
}

#[test]
fn d22_record_annotation_carries_the_resource_version_and_overwrites() {
    let mut policy = pd("add-gcp-secret", json!({"selector": {}}));
    policy["metadata"]["resourceVersion"] = json!("12345");
    let key = "poddefault.admission.kubeflow.org/poddefault-add-gcp-secret";
    let base = pod(json!({"annotations": {key: "1"}}), json!({"containers": []}));
    let out = admitted(&base, &[policy]);
    assert_eq!(out["metadata"]["annotations"][key], "12345");
}

#[test]
fn d23_image_pull_secrets_merge_by_name() {
    let base = pod(
        json!({}),
        json!({"containers": [], "imagePullSecrets": [{"name": "reg"}]}),
    );
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "imagePullSecrets": [{"name": "reg"}, {"name": "reg2"}]}),
        )],
    );
    assert_eq!(
        out["spec"]["imagePullSecrets"],
        json!([{"name": "reg"}, {"name": "reg2"}])
    );
}

#[test]
fn d24_dangling_mount_is_admitted() {
    let base = one_container(json!({"name": "main", "image": "i"}));
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "volumeMounts": [{"name": "missing", "mountPath": "/m"}]}),
        )],
    );
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "missing", "mountPath": "/m"}])
    );
}

#[test]
fn d25_poddefaults_apply_in_name_order() {
    let base = one_container(json!({"name": "main", "image": "i", "env": [{"name": "Z", "value": "0"}]}));
    let out = admitted(
        &base,
        &[
            pd("b", json!({"selector": {}, "env": [{"name": "B", "value": "1"}]})),
            pd("a", json!({"selector": {}, "env": [{"name": "A", "value": "1"}]})),
        ],
    );
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "Z", "value": "0"}, {"name": "A", "value": "1"}, {"name": "B", "value": "1"}])
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({(MARKER.to_owned() + "a"): "7", (MARKER.to_owned() + "b"): "7"})
    );
}

#[test]
fn conflicts_of_every_kind_are_all_reported_at_once() {
    // Kubeflow aggregates every conflict into one message; each kind names its field.
    let base = pod(
        json!({"labels": {"l": "1"}, "annotations": {"a": "1"}}),
        json!({
            "containers": [{"name": "main", "image": "i", "env": [{"name": "E", "value": "1"}],
                            "volumeMounts": [{"name": "m", "mountPath": "/m"}]}],
            "initContainers": [{"name": "init", "image": "i"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "imagePullSecrets": [{"name": "reg"}],
        }),
    );
    let policy = pd(
        "all",
        json!({
            "selector": {},
            "labels": {"l": "2"},
            "annotations": {"a": "2"},
            "env": [{"name": "E", "value": "2"}],
            "volumeMounts": [{"name": "m", "mountPath": "/other"}],
            "volumes": [{"name": "v", "hostPath": {"path": "/"}}],
            "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
            "imagePullSecrets": [{"name": "reg", "extra": "x"}],
            "initContainers": [{"name": "init", "image": "other"}],
            "sidecars": [{"name": "main", "image": "other"}],
        }),
    );
    let message = denied(&base, &[policy]);
    for field in [
        "metadata.labels[l]",
        "metadata.annotations[a]",
        "spec.containers[name: main].env[name: E]",
        "spec.containers[name: main].volumeMounts[name: m]",
        "spec.volumes[name: v]",
        "spec.tolerations[key:effect: k:NoSchedule]",
        "spec.imagePullSecrets[name: reg]",
        "spec.initContainers[name: init]",
        "spec.containers[name: main]:",
    ] {
        assert!(message.contains(field), "{field} missing from {message}");
    }
    assert!(
        message.contains(" err: ["),
        "several conflicts are bracketed like an aggregate: {message}"
    );
}
