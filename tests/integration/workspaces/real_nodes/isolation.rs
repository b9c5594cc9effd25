//! The NetworkPolicy each workspace gets, enforced on the real node by kube-router's firewall.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

use super::*;

/// What `GET /ready` from inside the pod `from` to `ip:8888` answers within 2 s: the HTTP
/// answer, or nothing when the connection is dropped.
async fn fetch_from(pods: &Api<Pod>, from: &str, ip: &str) -> String {
    let script = format!("printf 'GET /ready HTTP/1.0\\r\\n\\r\\n' | timeout 2 nc {ip} 8888; true");
    exec(pods, from, &["sh", "-c", &script]).await
}

/// A pod of the `web` image called `name` in `ns` with `labels`, Ready: it serves on 8888.
async fn web_pod(client: &kube::Client, ns: &str, name: &str, labels: serde_json::Value) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "web", "image": "registry.outfit.test/outfit-test/web:1",
                                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 8888},
                                                    "periodSeconds": 1}}]}
    }))
    .unwrap();
    // The namespace's ServiceAccount comes a moment after the namespace.
    eventually("the pod created", Duration::from_secs(30), || async {
        pods.create(&Default::default(), &pod).await.is_ok()
    })
    .await;
    eventually("the pod ready", Duration::from_secs(60), || async {
        let pod = pods.get(name).await.unwrap();
        pod.status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;
    pods
}

/// Whether the pod `from` of `pods` gets an HTTP answer from `ip`, within 30 s (kube-router
/// follows policies by a watch, within a second or two of their creation); then the same again,
/// to show it holds.
async fn settles(pods: &Api<Pod>, from: &str, ip: &str, answered: bool, what: &str) {
    let answers = || async { fetch_from(pods, from, ip).await.contains("HTTP/") };
    eventually(what, Duration::from_secs(30), || async {
        answers().await == answered
    })
    .await;
    assert_eq!(answers().await, answered, "{what}: not for long");
}

/// Fails on kwok: nothing enforces a NetworkPolicy there (nor runs a command in a pod's network).
/// Here kube-router's firewall applies the policy the backend gives each workspace: the ingress
/// controller's namespace and the backend's pods reach a workspace; another user's workspace and
/// another pod of the backend's namespace do not, and the workspace reaches neither the other
/// workspace nor the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_is_reached_by_the_ingress_and_the_backend_alone_and_reaches_neither() {
    let (ns, ingress_ns, backend_ns) = ("rn-isolation", "rn-ingress", "rn-backend");
    let web = deic_manifest("web", "");
    let extra = format!("ingressNamespaces: [{ingress_ns}]\nbackendNamespace: {backend_ns}\n");
    let OnRealNode {
        client,
        backend,
        urls,
        ..
    } = on_real_node(ns, &[("web", &web)], &extra).await;
    let url = &urls[0];
    let mut ips = Vec::new();
    for user in ["alice", "bob"] {
        let pod_name = deic_ready(&backend, url, user).await;
        let (_, listed) = backend.post("/get_pods", json!({"user_id": user})).await;
        ips.push((pod_name, listed[0]["pod_ip"].as_str().unwrap().to_owned()));
    }
    let [(alice_pod, alice_ip), (bob_pod, _)] = &ips[..] else {
        unreachable!()
    };

    // The ingress controller's pod, the backend's (a stand-in with its label: outfit itself runs
    // on this machine, outside the node), and another pod beside it.
    namespace(&client, ingress_ns).await;
    namespace(&client, backend_ns).await;
    let doors = web_pod(&client, ingress_ns, "door", json!({})).await;
    let backends = web_pod(
        &client,
        backend_ns,
        "backend",
        json!({"app.kubernetes.io/name": "outfit-workspaces"}),
    )
    .await;
    web_pod(&client, backend_ns, "neighbour", json!({})).await;
    let backend_ip = backends
        .get("backend")
        .await
        .unwrap()
        .status
        .and_then(|s| s.pod_ip)
        .unwrap();
    let workspaces: Api<Pod> = Api::namespaced(client.clone(), ns);

    // Let in: the positive controls, which make the refusals the policy's, not a broken network.
    settles(
        &doors,
        "door",
        alice_ip,
        true,
        "the ingress namespace reaching alice",
    )
    .await;
    settles(&backends, "backend", alice_ip, true, "the backend reaching alice").await;
    // Kept out, and kept in.
    settles(
        &workspaces,
        bob_pod,
        alice_ip,
        false,
        "bob's workspace refused at alice's",
    )
    .await;
    settles(
        &backends,
        "neighbour",
        alice_ip,
        false,
        "another pod of the backend's namespace refused",
    )
    .await;
    settles(
        &workspaces,
        alice_pod,
        &backend_ip,
        false,
        "alice's workspace kept from the backend",
    )
    .await;
}
