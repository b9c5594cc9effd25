//! End to end against the real API server, without the webhook: the CRDs `outfit manifests`
//! prints install and validate policies, and outfit's cluster source sees policies come and go.

use std::time::Duration;

use kube::api::DeleteParams;
use outfit_k8s::cluster::{ClusterSource, Snapshot};
use serde_json::json;

use crate::{
    control_plane::{ControlPlane, api, create, pod_namespace, resource},
    support::{install_crds, install_crds_where},
};

async fn wait_for(source: &ClusterSource, what: &str, condition: impl Fn(&Snapshot) -> bool) {
    let mut snapshots = source.subscribe();
    let found = tokio::time::timeout(Duration::from_secs(20), snapshots.wait_for(|s| condition(s))).await;
    assert!(matches!(found, Ok(Ok(_))), "timed out waiting for {what}");
}

fn has_policy(snapshot: &Snapshot, name: &str) -> bool {
    snapshot
        .documents
        .iter()
        .any(|d| d.kind() == "PodDefault" && d.value["metadata"]["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_validate_policies_and_the_cluster_source_follows_them() {
    let client = ControlPlane::get().admin_client().await;
    install_crds(&client).await;
    let namespace = "e2e-cluster-source";
    pod_namespace(&client, namespace, json!({"team": "a"})).await;

    let source = ClusterSource::start(client.clone(), Default::default());
    wait_for(&source, "the first sync", |s| s.synced).await;

    let pod_defaults = resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults");
    // The generated schema makes the API server reject what Kubeflow's own CRD lets through.
    let invalid = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "no-selector"},
                         "spec": {"env": [{"name": "A", "value": "1"}]}});
    let error = create(&client, Some(namespace), &pod_defaults, invalid)
        .await
        .expect_err("no selector is invalid");
    assert!(
        error.to_string().contains("spec.selector: Required value"),
        "{error}"
    );
    let wrong_type = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "bad-env"},
                            "spec": {"selector": {}, "env": "A=1"}});
    let error = create(&client, Some(namespace), &pod_defaults, wrong_type)
        .await
        .expect_err("env must be a list");
    assert!(error.to_string().contains("spec.env: Invalid value"), "{error}");

    let valid = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "proxy"},
                       "spec": {"selector": {"matchLabels": {"proxy": "true"}}, "env": [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]}});
    create(&client, Some(namespace), &pod_defaults, valid)
        .await
        .expect("a valid PodDefault");
    wait_for(&source, "the new PodDefault", |s| has_policy(s, "proxy")).await;
    wait_for(&source, "the namespace's labels", |s| {
        s.documents
            .iter()
            .any(|d| d.kind() == "Namespace" && d.value["metadata"]["labels"]["team"] == "a")
    })
    .await;

    api(&client, Some(namespace), &pod_defaults)
        .delete("proxy", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(&source, "the PodDefault's removal", |s| !has_policy(s, "proxy")).await;
}

/// The value of the metric line that starts with `prefix`.
pub(crate) fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The way most users meet outfit: a cluster with Kubeflow's PodDefault CRD and no Gatekeeper.
/// `outfit serve --from-cluster` turns ready (a kind whose CRD is absent does not hold readiness:
/// with failurePolicy Fail an unready webhook refuses every pod), says which kinds are absent in
/// a metric, and follows Gatekeeper's kinds once their CRDs are installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_is_ready_without_gatekeeper_and_follows_its_crds_when_they_come() {
    let plane = ControlPlane::start("poddefault-only");
    let client = plane.admin_client().await;
    let installed = install_crds_where(&client, |name| name == "poddefaults.kubeflow.org").await;
    assert_eq!(installed, 1);
    // `start_with` waits (30 s at most) for /readyz to answer 200.
    let webhook = crate::e2e::Webhook::start_with(&["--from-cluster"], &[("KUBECONFIG", plane.kubeconfig())]);
    // The API server may serve a CRD made a moment ago only a moment later (its discovery and
    // the CRD's own readiness are caches too): outfit follows it when it comes.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = webhook.metrics();
        if metric(&text, "outfit_policy_kind_installed{kind=\"PodDefault\"}") == Some(1.0) {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the PodDefault CRD was never seen: {text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for kind in ["Assign", "AssignImage", "AssignMetadata", "ModifySet"] {
        let line = format!("outfit_policy_kind_installed{{kind=\"{kind}\"}}");
        assert_eq!(metric(&text, &line), Some(0.0), "{text}");
    }

    // Gatekeeper arrives: its kinds are watched from then on, without a restart.
    install_crds(&client).await;
    let assign = resource("mutations.gatekeeper.sh", "v1", "Assign", "assign");
    let policy = json!({
        "apiVersion": "mutations.gatekeeper.sh/v1", "kind": "Assign", "metadata": {"name": "late"},
        "spec": {"applyTo": [{"groups": [""], "kinds": ["Pod"], "versions": ["v1"]}],
                 "location": "spec.priority", "parameters": {"assign": {"value": 1}}}
    });
    create(&client, None, &assign, policy)
        .await
        .expect("create the Assign");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let text = webhook.metrics();
        if metric(&text, "outfit_policies{kind=\"Assign\"}") == Some(1.0) {
            assert_eq!(
                metric(&text, "outfit_policy_kind_installed{kind=\"Assign\"}"),
                Some(1.0),
                "{text}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the Assign was never picked up: {text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
