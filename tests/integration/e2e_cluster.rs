//! End to end against the real API server, without the webhook: the CRDs `outfit manifests`
//! prints install and validate policies, and outfit's cluster source sees policies come and go.

use std::time::Duration;

use kube::{Client, api::DeleteParams};
use outfit_k8s::cluster::{ClusterSource, Snapshot};
use serde_json::{Value, json};

use crate::control_plane::{ControlPlane, api, create, pod_namespace, resource};

/// Installs every CRD `outfit manifests` prints and waits until the API server serves them.
pub(crate) async fn install_crds(client: &Client) {
    assert_eq!(install_crds_where(client, |_| true).await, 7);
}

/// Installs the CRDs `outfit manifests` prints whose name `wanted` accepts, waits until the API
/// server serves them, and returns how many.
pub(crate) async fn install_crds_where(client: &Client, wanted: impl Fn(&str) -> bool) -> usize {
    let documents = crate::support::manifests(&["--webhook-url", "https://127.0.0.1:1/unused"]);
    let crds = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let mut names = Vec::new();
    for document in documents
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
    {
        let name = document.value["metadata"]["name"].as_str().unwrap().to_owned();
        if !wanted(&name) {
            continue;
        }
        match create(client, None, &crds, document.value.clone()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("CRD {name} did not install: {error}"),
        }
        names.push(name);
    }
    let installed = names.len();
    let crd_api = api(client, None, &crds);
    for name in names {
        let established = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let crd = serde_json::to_value(crd_api.get(&name).await.expect("get CRD")).unwrap();
                let conditions = crd
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(established.is_ok(), "CRD {name} never became Established");
    }
    installed
}

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
    let text = webhook.metrics();
    assert_eq!(
        metric(&text, "outfit_policy_kind_installed{kind=\"PodDefault\"}"),
        Some(1.0),
        "{text}"
    );
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
