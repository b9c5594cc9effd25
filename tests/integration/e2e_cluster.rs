//! End to end against the real API server, without the webhook: the CRDs `outfit manifests`
//! prints install and validate policies, and outfit's cluster source sees policies come and go.

use std::time::Duration;

use kube::{Client, api::DeleteParams};
use outfit_k8s::cluster::{ClusterSource, Snapshot};
use serde_json::{Value, json};

use crate::control_plane::{ControlPlane, api, create, pod_namespace, resource};

/// Installs every CRD `outfit manifests` prints and waits until the API server serves them.
pub(crate) async fn install_crds(client: &Client) {
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
        match create(client, None, &crds, document.value.clone()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("CRD {name} did not install: {error}"),
        }
        names.push(name);
    }
    assert_eq!(names.len(), 5);
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

    let source = ClusterSource::start(client.clone());
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
