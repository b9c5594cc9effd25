//! Kubeflow's own tests (`main_test.go`, `integration/`), with the expectations they intend. Its
//! `TestApplyPodDefaultsOnPod` assertion is inverted upstream, so U5–U8 state what the code does.

use serde_json::json;

use super::*;

#[test]
fn u1_annotation_conflict_denies() {
    let pod = pod(json!({"annotations": {"foo": "bar"}}), json!({"containers": []}));
    let message = denied(
        &pod,
        &[pd("a", json!({"selector": {}, "annotations": {"foo": "buz"}}))],
    );
    assert!(message.contains("metadata.annotations[foo]"), "{message}");
}

#[test]
fn u2_u3_u4_annotation_merge_adds_and_keeps() {
    let base = pod(json!({"annotations": {"foo": "bar"}}), json!({"containers": []}));
    // U2: a new key is added after the existing ones, followed by the record annotation.
    let out = admitted(
        &base,
        &[pd("a", json!({"selector": {}, "annotations": {"baz": "bux"}}))],
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"foo": "bar", "baz": "bux", (MARKER.to_owned() + "a"): "7"})
    );
    // U3: an empty map adds nothing but the record.
    let out = admitted(&base, &[pd("a", json!({"selector": {}, "annotations": {}}))]);
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"foo": "bar", (MARKER.to_owned() + "a"): "7"})
    );
    // U4: the same key with the same value is no conflict.
    let out = admitted(
        &base,
        &[pd("a", json!({"selector": {}, "annotations": {"foo": "bar"}}))],
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"foo": "bar", (MARKER.to_owned() + "a"): "7"})
    );
}

#[test]
fn u5_annotations_and_service_account() {
    let base = pod(json!({"annotations": {"foo": "bar"}}), json!({"containers": []}));
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "annotations": {"baz": "bux"}, "serviceAccountName": "some-service-account",
                   "automountServiceAccountToken": true}),
        )],
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"foo": "bar", "baz": "bux", (MARKER.to_owned() + "a"): "7"})
    );
    assert_eq!(out["spec"]["serviceAccountName"], "some-service-account");
    assert_eq!(out["spec"]["automountServiceAccountToken"], true);
    // No labels were asked for, so none appear (Go omits the empty map).
    assert!(out["metadata"].get("labels").is_none());
}

#[test]
fn u6_same_annotation_is_no_conflict() {
    let base = pod(json!({"annotations": {"foo": "bar"}}), json!({"containers": []}));
    let out = admitted(
        &base,
        &[pd("a", json!({"selector": {}, "annotations": {"foo": "bar"}}))],
    );
    assert_eq!(out["metadata"]["annotations"]["foo"], "bar");
}

#[test]
fn u7_tolerations_append_after_the_pods() {
    let old = json!({"key": "oldToleration", "operator": "Exists", "effect": "NoSchedule"});
    let new = json!({"key": "newToleration", "operator": "Equal", "value": "foo", "effect": "NoSchedule"});
    let base = pod(json!({}), json!({"containers": [], "tolerations": [old.clone()]}));
    let out = admitted(
        &base,
        &[pd("a", json!({"selector": {}, "tolerations": [new.clone()]}))],
    );
    assert_eq!(out["spec"]["tolerations"], json!([old, new]));
    assert_eq!(
        out["metadata"]["annotations"],
        json!({(MARKER.to_owned() + "a"): "7"})
    );
}

#[test]
fn u8_init_container_is_added_verbatim() {
    let init = json!({"name": "test initcontainer and sidecar", "image": "nginx", "command": ["cmd1"], "args": ["arg1", "arg2"]});
    let base = pod(json!({}), json!({"containers": []}));
    let out = admitted(
        &base,
        &[pd("a", json!({"selector": {}, "initContainers": [init.clone()]}))],
    );
    assert_eq!(out["spec"]["initContainers"], json!([init]));
    assert_eq!(out["spec"]["containers"], json!([]));
}

#[test]
fn u9_u10_command_and_args_only_where_unset() {
    let policy = pd(
        "a",
        json!({"selector": {}, "command": ["cmd1"], "args": ["arg1", "arg2"]}),
    );
    // U9: a container with neither gets both.
    let out = admitted(
        &pod(json!({}), json!({"containers": [{"name": "c", "image": "i"}]})),
        std::slice::from_ref(&policy),
    );
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["cmd1"]));
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["arg1", "arg2"]));
    // U10: a container with its own keeps them.
    let own = json!({"name": "c", "image": "i", "command": ["cmd2"], "args": ["arg3", "arg4"]});
    let out = admitted(&pod(json!({}), json!({"containers": [own.clone()]})), &[policy]);
    assert_eq!(out["spec"]["containers"][0], own);
}

#[test]
fn i1_i2_env_and_volume_from_two_poddefaults() {
    let first = pd(
        "test-poddefault",
        json!({"selector": {"matchLabels": {"test-poddefault": "true"}},
               "env": [{"name": "TEST_ENV_VAR", "value": "test-value"}],
               "volumes": [{"name": "test-volume", "emptyDir": {}}],
               "volumeMounts": [{"name": "test-volume", "mountPath": "/test-mount"}]}),
    );
    let second = pd(
        "test-poddefault-2",
        json!({"selector": {"matchLabels": {"test-multi": "true"}},
               "env": [{"name": "SECOND_ENV_VAR", "value": "second-value"}]}),
    );
    let base = pod(
        json!({"labels": {"test-poddefault": "true", "test-multi": "true"}}),
        json!({"containers": [{"name": "busybox", "image": "busybox"}]}),
    );
    let out = admitted(&base, &[first.clone(), second.clone()]);
    let container = &out["spec"]["containers"][0];
    assert_eq!(
        container["env"],
        json!([{"name": "TEST_ENV_VAR", "value": "test-value"}, {"name": "SECOND_ENV_VAR", "value": "second-value"}])
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "test-volume", "mountPath": "/test-mount"}])
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "test-volume", "emptyDir": {}}])
    );
    // I1 alone: only the first matches without the second label.
    let only_first = pod(
        json!({"labels": {"test-poddefault": "true"}}),
        json!({"containers": [{"name": "b", "image": "b"}]}),
    );
    let out = admitted(&only_first, &[first, second]);
    assert_eq!(
        out["spec"]["containers"][0]["env"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn i3_mount_of_an_undefined_volume_loads() {
    // Kubeflow accepts it; the API server's pod validation rejects the pod later (D24).
    let (_, report) = load(&[pd(
        "invalid",
        json!({"selector": {"matchLabels": {"invalid": "true"}},
               "volumeMounts": [{"name": "non-existent-volume", "mountPath": "/invalid"}]}),
    )]);
    assert!(report.errors.is_empty());
}
