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

/// Fails on kwok: nothing enforces a NetworkPolicy there (nor runs a command in a pod's network).
/// Here kube-router's firewall applies the policy the backend gives each workspace: the ingress
/// controller's namespace reaches a workspace, another user's workspace does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_reaches_no_other_workspace_while_the_ingress_namespace_reaches_it() {
    let (ns, ingress_ns) = ("rn-isolation", "rn-ingress");
    let web = deic_manifest("web", "");
    let extra = format!("ingressNamespaces: [{ingress_ns}]\n");
    let OnRealNode {
        client,
        backend,
        urls,
        ..
    } = on_real_node(ns, &[("web", &web)], &extra).await;
    let url = &urls[0];
    namespace(&client, ingress_ns).await;
    let mut ips = Vec::new();
    for user in ["alice", "bob"] {
        let (status, created) = backend
            .post("/create_pod", json!({"yaml_url": url, "user_id": user}))
            .await;
        assert_eq!(status, 200, "{created}");
        let pod_name = created["pod_name"].as_str().unwrap().to_owned();
        let (_, ready) = backend
            .post(
                "/watch_create_pod",
                json!({"user_id": user, "pod_name": pod_name}),
            )
            .await;
        assert_eq!(ready, json!({"ready": true}), "{user}");
        let (_, listed) = backend.post("/get_pods", json!({"user_id": user})).await;
        ips.push((pod_name, listed[0]["pod_ip"].as_str().unwrap().to_owned()));
    }
    let [(_, alice_ip), (bob_pod, _)] = &ips[..] else {
        unreachable!()
    };

    // A pod in the ingress controller's namespace, as its controller would run there.
    let doors: Api<Pod> = Api::namespaced(client.clone(), ingress_ns);
    let door: Pod = serde_json::from_value(json!({
        "metadata": {"name": "door"},
        "spec": {"containers": [{"name": "door", "image": "registry.outfit.test/outfit-test/web:1",
                                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 8888},
                                                    "periodSeconds": 1}}]}
    }))
    .unwrap();
    // The namespace's ServiceAccount comes a moment after the namespace.
    eventually("the door pod created", Duration::from_secs(30), || async {
        doors.create(&Default::default(), &door).await.is_ok()
    })
    .await;
    eventually("the door pod ready", Duration::from_secs(60), || async {
        let pod = doors.get("door").await.unwrap();
        pod.status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await;

    // Allowed in, and so reachable: the positive control that makes the refusal below the
    // policy's and not a broken network.
    let workspaces: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(
        "the ingress namespace reaching alice",
        Duration::from_secs(30),
        || async { fetch_from(&doors, "door", alice_ip).await.contains("200 OK") },
    )
    .await;
    // Bob's workspace is not let in, once kube-router has applied the policies (it follows them
    // by a watch, within a second or two of their creation).
    eventually(
        "bob's workspace refused at alice's",
        Duration::from_secs(30),
        || async { !fetch_from(&workspaces, bob_pod, alice_ip).await.contains("HTTP/") },
    )
    .await;
    // And stays refused, while the ingress namespace still gets in.
    let answered = fetch_from(&workspaces, bob_pod, alice_ip).await;
    assert!(
        !answered.contains("HTTP/"),
        "bob's workspace reached alice's: {answered}"
    );
    assert!(fetch_from(&doors, "door", alice_ip).await.contains("200 OK"));
}
