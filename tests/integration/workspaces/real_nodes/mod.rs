//! Workspaces on a real node (issue 41): the test cluster's real kubelet
//! (`hack/control-plane/real-node.sh`) pulls the project's images from the cluster's registry and
//! runs them in containerd, so what kwok only writes down happens here: an image pull, a process
//! that listens, a readiness probe the kubelet sends, a mounted home, a file read from inside the
//! container, a NetworkPolicy that drops packets. Each test names what it checks that a kwok node
//! cannot show.
//!
//! - `starts`: pulls, probes, deic-dk's tokens and ssh, pulls planned ahead;
//! - `install`: outfit installed from its own image, its webhook mutating a workspace;
//! - `isolation`: the NetworkPolicy of each workspace, enforced;
//! - `jupyterlab`: a notebook server opened through the proxy, a cell run over its kernel's
//!   WebSocket;
//! - `lifecycle`: a home across a stop and a start and back from a snapshot, idle culling on what
//!   the workspace reports;
//! - `userns`: root in the workspace without root on the node, and a runtime that cannot.

mod install;
mod isolation;
mod jupyterlab;
mod lifecycle;
mod starts;
mod userns;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api, Client,
    api::{AttachParams, ListParams},
};
use tokio::io::AsyncReadExt;

use super::support::*;
use crate::control_plane::ControlPlane;

/// Alice, by the test cluster's static token.
const ALICE: Caller<'static> = Caller::Token("outfit-alice-token");

/// A test's start on the real node: the plane, an admin client, and a backend for the test's
/// namespace.
struct OnRealNode {
    plane: &'static ControlPlane,
    client: Client,
    backend: Backend,
    /// The URLs of the manifests, in the order they were given.
    urls: Vec<String>,
}

/// Starts a backend for `ns` (made here) on the real node, with the catalogue `entries` (name,
/// manifest) and the configuration lines `extra` (see [`node_config`]).
async fn on_real_node(ns: &str, entries: &[(&str, &str)], extra: &str) -> OnRealNode {
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let urls: Vec<String> = entries
        .iter()
        .map(|(name, text)| manifests.put(&format!("{name}.yaml"), text))
        .collect();
    let mut config = node_config(plane, extra);
    if !entries.is_empty() {
        config.push_str("catalogue:\n");
        for ((name, _), url) in entries.iter().zip(&urls) {
            config.push_str(&format!("- {{name: {name}, url: '{url}'}}\n"));
        }
    }
    let backend = Backend::start(plane, ns, &manifests, &config).await;
    OnRealNode {
        plane,
        client,
        backend,
        urls,
    }
}

/// A backend's configuration lines for the real node, then `extra`, whose keys win over the
/// node's: its images' registry, its pod network, and homes it can mount (`ephemeral`: its
/// kernel has no NFS client).
fn node_config(plane: &ControlPlane, extra: &str) -> String {
    let node = [
        ("localRegistryURL", plane.env("REGISTRY_HOST")),
        ("podSubnetCidr", plane.env("REAL_NODE_POD_CIDR")),
        ("storageStrategy", "ephemeral".to_owned()),
    ];
    let mut config: String = node
        .iter()
        .filter(|(key, _)| !extra.lines().any(|l| l.starts_with(&format!("{key}:"))))
        .map(|(key, value)| format!("{key}: {value}\n"))
        .collect();
    config.push_str(extra);
    config
}

/// Builds images of `tests/tools/node-images/build.py` (its arguments `args`, after the
/// registry's) and pushes them to the plane's registry.
fn push_images(plane: &ControlPlane, args: &[&str]) {
    let registry = plane.env("REGISTRY_URL");
    let output = std::process::Command::new("python3")
        .arg(crate::support::repo_root().join("tests/tools/node-images/build.py"))
        .args(["--registry", registry.trim_start_matches("http://")])
        .args(args)
        .output()
        .expect("run build.py");
    assert!(
        output.status.success(),
        "build.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// deic-dk's kind of manifest on the project's image `image` (`web` or `tokens`), named as deic-dk
/// names images (`LOCALREGISTRY`, which the backend rewrites to the configured registry), with
/// more `annotations` (`, key: value` pairs). The image serves its web root on 8888 once
/// listening, where the readiness probe looks; `tokens` first writes a fresh token to `/tmp/key`.
fn deic_manifest(image: &str, annotations: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {image}
  annotations: {{sciencedata.dk/ingress-port: "8888"{annotations}}}
spec:
  containers:
  - name: {image}
    image: LOCALREGISTRY/outfit-test/{image}:1
    ports: [{{containerPort: 8888}}]
    readinessProbe: {{httpGet: {{path: /ready, port: 8888}}, periodSeconds: 1}}
    volumeMounts:
    - {{name: sciencedata, mountPath: /home/jovyan/work}}
"#
    )
}

/// A catalogue entry's manifest on the project's `web` image.
const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "8888"}
spec:
  containers:
  - name: web
    image: registry.outfit.test/outfit-test/web:1
    ports: [{containerPort: 8888}]
    readinessProbe: {httpGet: {path: /ready, port: 8888}, periodSeconds: 1}
"#;

/// Creates a pod of the manifest at `url` for `user` through deic-dk's API and waits until it is
/// ready (which takes the kubelet's probe finding the server listening): the pod's name.
async fn deic_ready(backend: &Backend, url: &str, user: &str) -> String {
    let (status, created) = backend
        .post(
            "/create_pod",
            serde_json::json!({"yaml_url": url, "user_id": user}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let pod_name = created["pod_name"].as_str().unwrap().to_owned();
    let (status, ready) = backend
        .post(
            "/watch_create_pod",
            serde_json::json!({"user_id": user, "pod_name": pod_name}),
        )
        .await;
    assert_eq!(
        (status, &ready),
        (200, &serde_json::json!({"ready": true})),
        "{user}"
    );
    pod_name
}

/// Launches the catalogue entry `entry` as alice and follows its progress stream to its end: the
/// workspace's name and the stream's events.
async fn launch_and_follow(backend: &Backend, entry: &str) -> (String, Vec<(String, serde_json::Value)>) {
    let (status, created) = backend.launch(ALICE, entry).await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    let events = backend.follow(ALICE, &name).await;
    (name, events)
}

/// What `command` prints in the first container of the pod `name`, run through the API server
/// and the kubelet as `kubectl exec` runs it.
async fn exec(pods: &Api<Pod>, name: &str, command: &[&str]) -> String {
    let mut attached = pods
        .exec(name, command.to_vec(), &AttachParams::default().stderr(false))
        .await
        .unwrap_or_else(|e| panic!("exec {command:?} in {name}: {e}"));
    let mut out = String::new();
    attached
        .stdout()
        .expect("stdout")
        .read_to_string(&mut out)
        .await
        .unwrap();
    attached.join().await.unwrap();
    out
}

/// The body of `GET http://ip:port/path`, from this machine to the pod's address.
async fn get(ip: &str, port: u16, path: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect((ip, port))
        .await
        .unwrap_or_else(|e| panic!("connecting to {ip}:{port}: {e}"));
    let request = format!("GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut tcp, request.as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    assert!(head.starts_with("HTTP/1.") && head.contains(" 200 "), "{answer}");
    body.to_owned()
}

/// The kubelet's Events about the pod `name`, as `reason: message` lines.
async fn kubelet_events(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let selector = format!("involvedObject.name={name}");
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet"))
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect()
}
