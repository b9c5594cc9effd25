//! outfit's documented deviations from Kubeflow (docs/poddefault.md). Each row
//! says what Kubeflow does on the same input and why outfit differs.

use serde_json::json;

use super::*;
use crate::vocab::Operation;

#[test]
fn x1_api_defaulted_volume_equals_the_poddefaults() {
    // Kubeflow: DeepEqual sees defaultMode 420 on the pod's side only and denies (quirk 1), which
    // also denies every reinvocation. outfit compares with API defaults filled in.
    let base = pod(
        json!({}),
        json!({"containers": [], "volumes": [{"name": "s", "secret": {"secretName": "creds", "defaultMode": 420}}]}),
    );
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "volumes": [{"name": "s", "secret": {"secretName": "creds"}}]}),
        )],
    );
    assert_eq!(out["spec"]["volumes"].as_array().map(Vec::len), Some(1));
    // A real difference still conflicts.
    let other = pd(
        "a",
        json!({"selector": {}, "volumes": [{"name": "s", "secret": {"secretName": "other"}}]}),
    );
    assert!(denied(&base, &[other]).contains("spec.volumes[name: s]"));
}

#[test]
fn x2_envfrom_is_not_duplicated() {
    // D13 in Kubeflow gives [cm1, cm1] (it appends with no check; quirk 5), so every reinvocation
    // grows the list. outfit skips a source the container already has.
    let base = pod(
        json!({}),
        json!({"containers": [{"name": "main", "image": "i", "envFrom": [{"configMapRef": {"name": "cm1"}}]}]}),
    );
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "envFrom": [{"configMapRef": {"name": "cm1"}}, {"secretRef": {"name": "s"}}]}),
        )],
    );
    assert_eq!(
        out["spec"]["containers"][0]["envFrom"],
        json!([{"configMapRef": {"name": "cm1"}}, {"secretRef": {"name": "s"}}])
    );
}

#[test]
fn x3_tolerations_are_identified_by_key_and_effect() {
    // D9 in Kubeflow: same key, other effect, is a conflict (identity is the key alone), so a GPU
    // PodDefault cannot tolerate both NoSchedule and NoExecute. outfit keys by key and effect.
    let no_schedule = json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"});
    let no_execute = json!({"key": "k", "operator": "Exists", "effect": "NoExecute"});
    let base = pod(
        json!({}),
        json!({"containers": [], "tolerations": [no_schedule.clone()]}),
    );
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "tolerations": [no_execute.clone()]}),
        )],
    );
    assert_eq!(out["spec"]["tolerations"], json!([no_schedule, no_execute]));
    // Same key and effect with another operator still conflicts.
    let other = pd(
        "a",
        json!({"selector": {}, "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}),
    );
    assert!(denied(&base, &[other]).contains("spec.tolerations"));
}

#[test]
fn x4_unknown_fields_nulls_integers_and_key_order_survive() {
    // Kubeflow decodes into typed Go structs and diffs the re-encoded pod, dropping fields its
    // client library does not know. outfit works on the raw JSON.
    let base = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "namespace": NS, "creationTimestamp": null, "zeta": 1, "alpha": {"x-new": true}},
        "spec": {"futureField": {"nested": [1, 2.5, -3]}, "containers": [{"image": "i", "name": "main", "resources": {}}]},
        "status": {}
    });
    let out = admitted(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "A", "value": "1"}]}),
        )],
    );
    let text = serde_json::to_string(&out).unwrap();
    assert!(text.starts_with(r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"team-a","creationTimestamp":null,"zeta":1,"alpha":{"x-new":true},"annotations":"#), "{text}");
    assert!(text.contains(r#""spec":{"futureField":{"nested":[1,2.5,-3]},"containers":[{"image":"i","name":"main","resources":{},"env":[{"name":"A","value":"1"}]}]},"status":{}}"#), "{text}");
}

#[test]
fn x5_a_bad_poddefault_does_not_disable_the_others() {
    // D19 in Kubeflow: one PodDefault with an invalid selector denies every pod in its namespace.
    let bad = pd(
        "bad",
        json!({"selector": {"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}}),
    );
    let good = pd("good", json!({"selector": {}, "labels": {"x": "y"}}));
    let (set, report) = load(&[bad, good]);
    assert_eq!(report.errors.len(), 1);
    assert_eq!(
        report.errors[0].to_string(),
        "test (document 0): PodDefault team-a/bad: spec.selector: invalid label selector: matchExpressions[0].values: must be non-empty for operator In"
    );
    let base = pod(json!({}), json!({"containers": []}));
    let outcome = set.apply(&Request::create(&base, NS));
    let Outcome::Admitted(admission) = outcome else {
        panic!("denied")
    };
    assert_eq!(
        admission.object(&base).unwrap()["metadata"]["labels"],
        json!({"x": "y"})
    );
}

#[test]
fn x6_poddefaults_only_act_on_pod_create() {
    // As Kubeflow registers its webhook: CREATE of core v1 pods only.
    let policy = pd("a", json!({"selector": {}, "labels": {"x": "y"}}));
    let (set, _) = load(&[policy]);
    let base = pod(json!({}), json!({"containers": []}));
    for operation in [Operation::Update, Operation::Delete, Operation::Connect] {
        let outcome = set.apply(&Request {
            operation,
            ..Request::create(&base, NS)
        });
        assert!(
            matches!(outcome, Outcome::Admitted(a) if a.is_unchanged()),
            "{operation:?}"
        );
    }
    let mut deployment = base.clone();
    deployment["kind"] = json!("Deployment");
    deployment["apiVersion"] = json!("apps/v1");
    let outcome = set.apply(&Request::create(&deployment, NS));
    assert!(matches!(outcome, Outcome::Admitted(a) if a.is_unchanged()));
}

#[test]
fn malformed_pod_fields_deny_with_the_field_named() {
    let base = pod(
        json!({}),
        json!({"containers": [{"name": "main", "image": "i", "env": "oops"}]}),
    );
    let message = denied(
        &base,
        &[pd(
            "a",
            json!({"selector": {}, "env": [{"name": "A", "value": "1"}]}),
        )],
    );
    assert_eq!(
        message,
        "cannot apply poddefaults: a on pod: p: spec.containers[0].env is not a list"
    );
}

#[test]
fn x7_injected_sidecars_get_nothing_on_reinvocation_either() {
    // Kubeflow gives a PodDefault's sidecar none of its env (D15), but on a second pass the sidecar
    // is a regular container and receives env, mounts and command. outfit recognises it.
    let policy = pd(
        "a",
        json!({"selector": {}, "env": [{"name": "A", "value": "1"}], "command": ["run"],
               "sidecars": [{"name": "s", "image": "s"}]}),
    );
    let base = pod(json!({}), json!({"containers": [{"name": "main", "image": "i"}]}));
    let once = admitted(&base, std::slice::from_ref(&policy));
    let twice = admitted(&once, &[policy]);
    assert_eq!(twice, once);
    assert_eq!(twice["spec"]["containers"][1], json!({"name": "s", "image": "s"}));
}

#[test]
fn x8_a_poddefault_the_pod_records_as_applied_is_not_applied_again() {
    // Kubeflow's webhook is registered without reinvocation, so it applies a PodDefault once. With
    // outfit's `reinvocationPolicy: IfNeeded`, the pod comes back after later mutations: here a
    // rewrite of the PodDefault's sidecar image (a Gatekeeper AssignImage does that) and a
    // container added by another webhook. Applied again, Kubeflow's merge would deny the pod (the
    // sidecar no longer equals the PodDefault's) and give the new container the env.
    let policy = pd(
        "a",
        json!({"selector": {}, "env": [{"name": "A", "value": "1"}],
               "sidecars": [{"name": "s", "image": "s:1"}]}),
    );
    let base = pod(json!({}), json!({"containers": [{"name": "main", "image": "i"}]}));
    let mut once = admitted(&base, std::slice::from_ref(&policy));
    // The record carries the PodDefault's resourceVersion.
    assert_eq!(
        once["metadata"]["annotations"]["poddefault.admission.kubeflow.org/poddefault-a"],
        policy["metadata"]["resourceVersion"]
    );
    once["spec"]["containers"][1]["image"] = json!("registry.internal/s:1");
    once["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "istio-proxy", "image": "proxy"}));
    assert!(untouched(&once, std::slice::from_ref(&policy)));
    // A record of another version (the PodDefault changed since) applies it again, as Kubeflow
    // does (d22): here the rewritten sidecar is then a conflict.
    once["metadata"]["annotations"]["poddefault.admission.kubeflow.org/poddefault-a"] = json!("older");
    assert!(denied(&once, &[policy]).contains("spec.containers[name: s]"));
}

#[test]
fn x9_a_patch_past_the_bound_is_refused_not_built() {
    // Kubeflow answers with whatever patch the merge makes: a pod of 100,000 containers, each
    // given the PodDefault's env, got a 54 MB patch that no API server could take (issue 33).
    // outfit stops planning once the containers' operations pass the set's bound and refuses the
    // pod, naming it and the bound.
    let containers: Vec<Value> = (0..2000)
        .map(|i| json!({"name": format!("c{i}"), "image": "i"}))
        .collect();
    let base = pod(json!({}), json!({"containers": containers}));
    let policy = pd(
        "env",
        json!({"selector": {}, "env": [{"name": "A_LONG_ENOUGH_NAME", "value": "and a value"}]}),
    );
    let bounded = |limit: usize| {
        let mut builder = PolicySet::builder().max_patch_bytes(limit);
        let _ = builder.add(&Document {
            origin: Origin::named("test"),
            value: policy.clone(),
        });
        builder.build().0
    };
    let set = bounded(10_000);
    let Outcome::Denied(denial) = set.apply(&Request::create(&base, NS)) else {
        panic!("a patch past the bound must be refused");
    };
    assert_eq!(denial.reason, crate::DenialReason::PatchTooLarge);
    assert!(
        denial.message.contains("Pod team-a/p") && denial.message.contains("exceed 10000 bytes"),
        "{}",
        denial.message
    );
    assert_eq!(denial.policies.len(), 1);
    // Under the bound, the same patch as with none.
    let unbounded = apply(&base, std::slice::from_ref(&policy));
    let Outcome::Admitted(admission) = &unbounded else {
        panic!("admitted without a bound");
    };
    let size = admission.patch_json().len();
    let exact = bounded(size);
    let Outcome::Admitted(within) = exact.apply(&Request::create(&base, NS)) else {
        panic!("a patch of exactly the bound is sent");
    };
    assert_eq!(within.patch_json_within(size), Ok(admission.patch_json()));
}
