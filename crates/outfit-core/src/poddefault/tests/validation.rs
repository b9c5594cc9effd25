//! Load-time validation: a bad PodDefault is rejected with its name, document and field.

use serde_json::json;

use super::*;

fn load_error(spec: Value) -> String {
    let (_, report) = load(&[pd("bad", spec)]);
    assert_eq!(
        report.errors.len(),
        1,
        "expected one error, got {:?}",
        report.errors
    );
    report.errors[0].to_string()
}

#[test]
fn invalid_poddefaults_are_rejected_with_policy_and_field() {
    let prefix = "test (document 0): PodDefault team-a/bad: ";
    let cases = [
        (json!({}), "spec.selector: required field is missing"),
        (
            json!({"selector": {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}}),
            "spec.selector: invalid label selector: matchExpressions[0].operator: \"Gt\" is not one of In, NotIn, Exists, DoesNotExist",
        ),
        (
            json!({"selector": {}, "volumes": [{"name": "v"}]}),
            "spec.volumes[0]: volume \"v\" has no source (emptyDir, secret, persistentVolumeClaim, nfs, ...)",
        ),
        (
            json!({"selector": {}, "volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]}),
            "spec.volumes[0]: volume \"v\" has more than one source: emptyDir, secret",
        ),
        (
            json!({"selector": {}, "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}),
            "spec.volumes[1].name: duplicate entry with name \"v\"",
        ),
        (
            json!({"selector": {}, "env": [{"name": "A"}, {"name": "A", "value": "x"}]}),
            "spec.env[1].name: duplicate entry with name \"A\"",
        ),
        (
            json!({"selector": {}, "env": [{"value": "x"}]}),
            "spec.env[0].name: required field is missing",
        ),
        (json!({"selector": {}, "env": "A=1"}), "spec.env: must be a list"),
        (
            json!({"selector": {}, "env": [{"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}),
            "spec.env[0]: `value` and `valueFrom` are mutually exclusive",
        ),
        // D8: Kubeflow keys mounts by volume name, so this PodDefault would deny every pod it matches.
        (
            json!({"selector": {}, "volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b", "subPath": "s"}]}),
            "spec.volumeMounts[1].name: duplicate entry with volume name \"v\"",
        ),
        (
            json!({"selector": {}, "volumeMounts": [{"name": "v"}]}),
            "spec.volumeMounts[0].mountPath: required field is missing",
        ),
        (
            json!({"selector": {}, "sidecars": [{"name": "s"}]}),
            "spec.sidecars[0].image: required field is missing",
        ),
        (
            json!({"selector": {}, "initContainers": [{"name": "i", "image": "x"}, {"name": "i", "image": "y"}]}),
            "spec.initContainers[1].name: duplicate entry with name \"i\"",
        ),
        (
            json!({"selector": {}, "tolerations": [{"key": "k", "operator": "Maybe"}]}),
            "spec.tolerations[0].operator: \"Maybe\" is not Exists or Equal",
        ),
        (
            json!({"selector": {}, "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
            "spec.tolerations[0].value: must be empty when operator is Exists",
        ),
        (
            json!({"selector": {}, "labels": {"team": "not valid"}}),
            "spec.labels.team: invalid label value \"not valid\": must consist of alphanumerics, '-', '_' or '.', and start and end alphanumeric",
        ),
        (
            json!({"selector": {}, "annotations": {"a": 1}}),
            "spec.annotations.a: must be a string",
        ),
        (
            json!({"selector": {}, "automountServiceAccountToken": "yes"}),
            "spec.automountServiceAccountToken: must be a boolean",
        ),
        (
            json!({"selector": {}, "command": ["sh", 1]}),
            "spec.command[1]: must be a string",
        ),
        (
            json!({"selector": {}, "envFrom": [{"prefix": "X_"}]}),
            "spec.envFrom[0]: must have a configMapRef or a secretRef",
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(
            load_error(spec.clone()),
            format!("{prefix}{expected}"),
            "for spec {spec}"
        );
    }
}

#[test]
fn missing_name_and_duplicate_policies_are_rejected() {
    let mut nameless = pd("x", json!({"selector": {}}));
    nameless["metadata"]["name"] = json!("");
    let (_, report) = load(&[nameless]);
    assert_eq!(
        report.errors[0].to_string(),
        "test (document 0): PodDefault team-a/: metadata.name: required field is missing"
    );

    let (set, report) = load(&[
        pd("same", json!({"selector": {}})),
        pd("same", json!({"selector": {}})),
    ]);
    assert_eq!(
        report.errors[0].to_string(),
        "test (document 1): PodDefault team-a/same: metadata.name: defined again (first defined at test (document 0))"
    );
    assert_eq!(set.len(), 1);
}

#[test]
fn fields_kubeflow_lacks_are_warnings_not_errors() {
    let (set, report) = load(&[pd("a", json!({"selector": {}, "nodeSelector": {"gpu": "true"}}))]);
    assert!(report.errors.is_empty());
    assert_eq!(set.len(), 1);
    assert_eq!(
        report.warnings[0].to_string(),
        "test (document 0): PodDefault team-a/a: spec.nodeSelector: PodDefault has no such field; it is ignored (the API server would prune it)"
    );
}

#[test]
fn other_poddefault_versions_are_rejected_and_other_kinds_skipped() {
    let mut old = pd("a", json!({"selector": {}}));
    old["apiVersion"] = json!("kubeflow.org/v1beta1");
    let (_, report) = load(&[
        old,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
    ]);
    assert_eq!(
        report.errors[0].to_string(),
        "test (document 0): PodDefault a: apiVersion: not supported: kubeflow.org/v1beta1; PodDefault is served as kubeflow.org/v1alpha1"
    );
    assert_eq!(report.skipped[0].1, "Deployment (apps/v1)");
}
