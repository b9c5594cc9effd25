//! Starts on the real node: what is pulled, probed and read there.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{Api, api::ListParams};
use serde_json::{Value, json};

use super::{super::storage::launched_ready, *};

/// Fails on kwok: there the token would be read from this machine's `/tmp/key` (kwok runs
/// `exec` here), no image is pulled and nothing listens at the pod's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deic_dk_tokens_are_read_from_the_running_container_of_a_pulled_image() {
    let ns = "rn-deic";
    let tokens = deic_manifest("tokens", ", sciencedata.dk/copy-token: key");
    let OnRealNode {
        client,
        backend,
        urls,
        ..
    } = on_real_node(ns, &[("tokens", &tokens)], "").await;
    let url = &urls[0];

    let pod_name = deic_ready(&backend, url, "alice@dtu.dk").await;

    // The image came from the cluster's registry under deic-dk's rewritten name, pulled by the
    // kubelet.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get(&pod_name).await.unwrap();
    let status = pod.status.as_ref().unwrap();
    let container = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(container.image, "registry.outfit.test/outfit-test/tokens:1");
    assert!(
        container
            .image_id
            .starts_with("registry.outfit.test/outfit-test/tokens@sha256:"),
        "{container:?}"
    );
    let events = kubelet_events(&client, ns, &pod_name).await;
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Pulled: Successfully pulled image")),
        "{events:?}"
    );

    // get_pods hands out the token the container wrote, which exec shows in the container.
    let (_, listed) = backend
        .post("/get_pods", json!({"user_id": "alice@dtu.dk"}))
        .await;
    let token = listed[0]["tokens"]["key"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {listed}"))
        .to_owned();
    assert_eq!(token.len(), 32, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    assert_eq!(exec(&pods, &pod_name, &["cat", "/tmp/key"]).await.trim(), token);
    // The process serves at the pod's address, as the user the image names, with its home
    // mounted where the manifest asks.
    let pod_ip = listed[0]["pod_ip"].as_str().unwrap().to_owned();
    assert_eq!(get(&pod_ip, 8888, "/ready").await.trim(), "ok");
    assert!(
        get(&pod_ip, 8888, "/whoami").await.starts_with("uid=1000"),
        "the image's user"
    );
    let mounts = exec(&pods, &pod_name, &["cat", "/proc/self/mounts"]).await;
    assert!(mounts.contains(" /home/jovyan/work "), "{mounts}");

    // Deleted: the container is gone from the node, not only from the API server.
    let (status, _) = backend
        .post(
            "/delete_pod",
            json!({"user_id": "alice@dtu.dk", "pod_name": pod_name}),
        )
        .await;
    assert_eq!(status, 200);
    eventually(
        "the pod's server to stop answering",
        Duration::from_secs(60),
        || async {
            tokio::time::timeout(
                Duration::from_secs(1),
                tokio::net::TcpStream::connect((pod_ip.as_str(), 8888)),
            )
            .await
            .map_or(true, |connected| connected.is_err())
        },
    )
    .await;
}

/// Fails on kwok: its pods have no kubelet Events, so the progress stream's pull step never says
/// what was pulled, and nothing serves at the pod's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_launch_streams_the_real_pull_and_serves_from_the_node() {
    let ns = "rn-native";
    let OnRealNode { client, backend, .. } = on_real_node(ns, &[("web", WEB)], "").await;
    let alice = ALICE;

    let (name, events) = launch_and_follow(&backend, "web").await;
    let (last, report) = events.last().expect("events");
    assert_eq!(last, "ready", "{events:?}");
    let pull = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "image pull")
        .unwrap_or_else(|| panic!("an image pull step: {report}"));
    assert_eq!(pull["state"], "done", "{pull}");
    assert!(
        pull["message"]
            .as_str()
            .unwrap()
            .contains("registry.outfit.test/outfit-test/web:1"),
        "{pull}"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get(&name).await.unwrap();
    let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    assert!(get(&pod_ip, 8888, "/").await.contains("web"), "the image's page");
    let (status, _): (u16, Value) = backend
        .call(alice, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert!(matches!(status, 200 | 202 | 204), "{status}");
}

/// Fails on kwok: its nodes list no images and pull nothing. Here the planner's pull pod makes the
/// real kubelet pull the entry's image before anyone launches it, the node then lists it, and the
/// launch's container starts from the image already on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_pull_planner_pulls_onto_the_node_before_the_launch() {
    const IMAGE: &str = "registry.outfit.test/outfit-test/ahead:1";
    let ns = "rn-pre-pull";
    let ahead = WEB.replace("outfit-test/web:1", "outfit-test/ahead:1");
    let OnRealNode {
        plane,
        client,
        backend,
        ..
    } = on_real_node(
        ns,
        &[("ahead", &ahead)],
        "prePull: {enabled: true, nodesPerImage: 1}\n",
    )
    .await;
    // Pull pods take the placeholders' priority, as `outfit manifests --pre-pull` installs it.
    placeholder_class(&client).await;

    // Before any launch: pulled by a pull pod, which the kubelet says, and listed by the node.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node = plane.env("REAL_NODE_NAMES");
    eventually("the node listing the image", Duration::from_secs(90), || async {
        let listed = nodes.get(&node).await.unwrap().status.and_then(|s| s.images);
        listed
            .iter()
            .flatten()
            .any(|i| i.names.iter().flatten().any(|n| n == IMAGE))
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let pulled_by = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| {
            e.reason.as_deref() == Some("Pulled")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("Successfully pulled") && m.contains(IMAGE))
        })
        .map(|e| e.involved_object.name.unwrap_or_default())
        .expect("the kubelet's Pulled event");
    assert!(pulled_by.starts_with("outfit-pull-"), "pulled by {pulled_by}");

    // The launch's container starts from the image on the node: no pull.
    let name = launched_ready(&backend, ALICE, "ahead").await;
    let said = kubelet_events(&client, ns, &name).await;
    assert!(
        said.iter()
            .any(|e| e.starts_with("Pulled: ") && e.contains("already present on machine")),
        "{said:?}"
    );
    assert!(!said.iter().any(|e| e.starts_with("Pulling: ")), "{said:?}");
}

/// A deic-dk manifest of the project's `ssh` image: dropbear on 22 (so the backend gives the pod
/// an ssh NodePort Service), letting in root with `key`.
fn ssh_manifest(key: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: ssh
spec:
  containers:
  - name: ssh
    image: LOCALREGISTRY/outfit-test/ssh:1
    env: [{{name: AUTHORIZED_KEYS, value: "{key}"}}]
    ports: [{{containerPort: 22}}]
    readinessProbe: {{tcpSocket: {{port: 22}}, periodSeconds: 1}}
"#
    )
}

/// Fails on kwok: a NodePort there leads nowhere (no kube-proxy, no process in the pod). Here the
/// `ssh_url` deic-dk's `get_pods` hands out, its node port on the node's address, reaches the
/// workspace's own ssh server through kube-proxy and past the workspace's NetworkPolicy (port 22
/// from anywhere), and a key login runs a command in the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deic_dk_s_ssh_url_logs_in_to_the_workspace() {
    let ns = "rn-ssh";
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rn-ssh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "rn-ssh", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (openssh-client)");
    assert!(made.success());
    let public = std::fs::read_to_string(dir.join("key.pub")).unwrap();
    let manifest = ssh_manifest(public.trim());
    let OnRealNode {
        plane, backend, urls, ..
    } = on_real_node(ns, &[("ssh", &manifest)], "").await;
    let pod_name = deic_ready(&backend, &urls[0], "alice@dtu.dk").await;

    let (_, listed) = backend
        .post("/get_pods", json!({"user_id": "alice@dtu.dk"}))
        .await;
    let port = listed[0]["k8s_pod_info"]["sshPort"]
        .as_str()
        .unwrap_or_else(|| panic!("an ssh port: {listed}"))
        .to_owned();
    assert!(
        listed[0]["ssh_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{port}")),
        "{listed}"
    );
    // The site's ingress domain names its nodes; here, the node's address. Ready is not yet
    // reachable: kube-proxy rejects the node port until it has synced the pod's endpoint, about
    // a second after the pod turned ready.
    let node = plane.env("REAL_NODE_IP");
    let login = || {
        std::process::Command::new("ssh")
            .arg("-i")
            .arg(&key)
            .args(["-p", &port, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args(["-o", "LogLevel=ERROR", &format!("root@{node}"), "hostname; id -u"])
            .output()
            .expect("ssh")
    };
    let mut tries = 0;
    let said = loop {
        let output = login();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            break String::from_utf8_lossy(&output.stdout).into_owned();
        }
        tries += 1;
        assert!(
            tries < 30 && stderr.contains("Connection refused"),
            "ssh (try {tries}): {stderr}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(said, format!("{pod_name}\n0\n"));
    let _ = std::fs::remove_dir_all(&dir);
}
