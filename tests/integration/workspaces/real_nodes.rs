//! Workspaces on a real node (issue 41): the test cluster's real kubelet
//! (`hack/control-plane/real-node.sh`) pulls the project's images from the cluster's registry and
//! runs them in containerd, so what kwok only writes down happens here: an image pull, a process
//! that listens, a readiness probe the kubelet sends, a file read from inside the container.
//! Each test names what it checks that a kwok node cannot show.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api,
    api::{AttachParams, ListParams},
};
use outfit_test_support::provisioner;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::support::*;
use crate::control_plane::ControlPlane;

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

/// The backend's configuration lines for the real node: its images' registry, its pod network,
/// and homes the node can mount (its kernel has no NFS client).
fn real_node_config(plane: &ControlPlane) -> String {
    format!(
        "localRegistryURL: {}\npodSubnetCidr: {}\nstorageStrategy: ephemeral\n",
        plane.env("REGISTRY_HOST"),
        plane.env("REAL_NODE_POD_CIDR"),
    )
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
async fn kubelet_events(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
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

/// Fails on kwok: there the token would be read from this machine's `/tmp/key` (kwok runs
/// `exec` here), no image is pulled and nothing listens at the pod's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deic_dk_tokens_are_read_from_the_running_container_of_a_pulled_image() {
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let ns = "rn-deic";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put(
        "tokens.yaml",
        &deic_manifest("tokens", ", sciencedata.dk/copy-token: key"),
    );
    let backend = Backend::start(plane, ns, &manifests, &real_node_config(plane)).await;

    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "alice@dtu.dk"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let pod_name = created["pod_name"].as_str().unwrap().to_owned();
    // Ready only once the kubelet's probe found the server listening in the container.
    let (status, ready) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "alice@dtu.dk", "pod_name": pod_name}),
        )
        .await;
    assert_eq!((status, &ready), (200, &json!({"ready": true})));

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
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let ns = "rn-native";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let extra = format!(
        "{}catalogue:\n- {{name: web, url: '{url}'}}\n",
        real_node_config(plane)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);

    let (status, created) = backend.launch(alice, "web").await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    let events = backend.follow(alice, &name).await;
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
    let pod = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .expect("the workspace's pod");
    let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    assert!(get(&pod_ip, 8888, "/").await.contains("web"), "the image's page");
    let (status, _): (u16, Value) = backend
        .call(alice, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert!(matches!(status, 200 | 202 | 204), "{status}");
}

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
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let (ns, ingress_ns) = ("rn-isolation", "rn-ingress");
    namespace(&client, ns).await;
    namespace(&client, ingress_ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", &deic_manifest("web", ""));
    let extra = format!("{}ingressNamespaces: [{ingress_ns}]\n", real_node_config(plane));
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
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

/// Fails on kwok, where a pod with `hostUsers: false` turns Ready like any other. On this node's
/// runtime (containerd 1.6, no user namespaces) the kubelet can never make its sandbox and retries
/// for ever: the backend fails the start at once, saying why, rather than at the create deadline
/// with a pod stuck in ContainerCreating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_namespace_on_a_runtime_without_them_fails_the_start_and_says_why() {
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let ns = "rn-userns";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let extra = format!(
        "{}hostUsers: false\ncatalogue:\n- {{name: web, url: '{url}'}}\n",
        real_node_config(plane)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);

    let (status, created) = backend.launch(alice, "web").await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    let events = backend.follow(alice, &name).await;
    let (last, report) = events.last().expect("events");
    assert_eq!(last, "failed", "{events:?}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("hostUsers: false") && message.contains("does not support user namespaces"),
        "{report}"
    );
    // Failed on the kubelet's word, not at the deadline (timeoutCreate is 100 s here).
    assert!(!message.contains("create deadline"), "{report}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("the failed pod removed", Duration::from_secs(30), || async {
        pods.list(&ListParams::default()).await.unwrap().items.is_empty()
    })
    .await;
}

/// Fails on kwok: no kubelet mounts the claim there, and `exec` runs on this machine, where
/// `/home/jovyan/work` does not exist. Here the real kubelet mounts the user's claim (a directory
/// of the provisioner stand-in's node-local class) into the container; a file written in it by
/// the workspace's user outlives the pod, and the next start mounts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_the_home_survives_a_stop_and_a_start() {
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    provisioner::ensure(plane).await;
    let ns = "rn-home";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    // The catalogue entry mounts the home where deic-dk's manifests do.
    let url = manifests.put(
        "web.yaml",
        &deic_manifest("web", "").replace("LOCALREGISTRY", "registry.outfit.test"),
    );
    let extra = format!(
        "{}storageStrategy: per-user\nstorageClassName: {}\ncatalogue:\n- {{name: web, url: '{url}'}}\n",
        real_node_config(plane).replace("storageStrategy: ephemeral\n", ""),
        provisioner::NODE_LOCAL_CLASS,
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);
    let (status, created) = backend.launch(alice, "web").await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(alice, &name).await;

    // Written by the workspace's user (1000, the image's), in the home the kubelet mounted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let written = exec(
        &pods,
        &name,
        &[
            "sh",
            "-c",
            "id -u > /home/jovyan/work/kept && cat /home/jovyan/work/kept",
        ],
    )
    .await;
    assert_eq!(written.trim(), "1000");

    let (status, answer) = backend
        .call(alice, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    eventually("the pod gone", Duration::from_secs(60), || async {
        pods.get_opt(&name).await.unwrap().is_none()
    })
    .await;
    let (status, answer) = backend
        .call(alice, "POST", &format!("/api/v1/workspaces/{name}/start"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    backend.follow_to_ready(alice, &name).await;
    let kept = exec(&pods, &name, &["cat", "/home/jovyan/work/kept"]).await;
    assert_eq!(kept.trim(), "1000", "the file written before the stop");
}

/// Fails on kwok: its nodes list no images and pull nothing. Here the planner's pull pod makes the
/// real kubelet pull the entry's image before anyone launches it, the node then lists it, and the
/// launch's container starts from the image already on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_pull_planner_pulls_onto_the_node_before_the_launch() {
    const IMAGE: &str = "registry.outfit.test/outfit-test/ahead:1";
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let ns = "rn-pre-pull";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put(
        "ahead.yaml",
        &WEB.replace("outfit-test/web:1", "outfit-test/ahead:1"),
    );
    let extra = format!(
        "{}catalogue:\n- {{name: ahead, url: '{url}'}}\nprePull: {{enabled: true, nodesPerImage: 1}}\n",
        real_node_config(plane)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;

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
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);
    let (status, created) = backend.launch(alice, "ahead").await;
    assert_eq!(status, 201, "{created}");
    let name = created["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(alice, &name).await;
    let said = kubelet_events(&client, ns, &name).await;
    assert!(
        said.iter()
            .any(|e| e.starts_with("Pulled: ") && e.contains("already present on machine")),
        "{said:?}"
    );
    assert!(!said.iter().any(|e| e.starts_with("Pulling: ")), "{said:?}");
}

/// Fails on kwok: nothing answers at a kwok pod's address, so the busy workspace would be culled
/// as idle too. Here each workspace's own server reports its last activity (Jupyter Server's
/// `/api/status`, at the `outfit.dev/activity-url` of its manifest): the one whose server keeps
/// reporting activity stays, the one whose activity ended at its start is stopped as idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_culling_follows_what_the_workspace_itself_reports() {
    let plane = ControlPlane::with_real_node();
    let client = plane.admin_client().await;
    let ns = "rn-cull";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let reporting = WEB.replace(
        "annotations: {",
        "annotations: {outfit.dev/activity-url: 'http://{ip}:8888/api/status', ",
    );
    let idle = manifests.put("idle.yaml", &reporting);
    let busy = manifests.put(
        "busy.yaml",
        &reporting.replace("ports: [", "env: [{name: BUSY, value: '1'}]\n    ports: ["),
    );
    let extra = format!(
        "{}idleTimeout: 20s\nactivityCheckInterval: 2s\n\
         catalogue:\n- {{name: idle, url: '{idle}'}}\n- {{name: busy, url: '{busy}'}}\n",
        real_node_config(plane)
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);
    let mut names = Vec::new();
    for entry in ["idle", "busy"] {
        let (status, created) = backend.launch(alice, entry).await;
        assert_eq!(status, 201, "{created}");
        let name = created["name"].as_str().unwrap().to_owned();
        backend.follow_to_ready(alice, &name).await;
        names.push(name);
    }
    let busy_ready = tokio::time::Instant::now();
    let [idle, busy] = &names[..] else { unreachable!() };

    let shown = |name: String| {
        let backend = &backend;
        async move {
            let (_, shown) = backend
                .call(alice, "GET", &format!("/api/v1/workspaces/{name}"), None)
                .await;
            shown
        }
    };
    eventually(
        "the idle workspace stopped as idle",
        Duration::from_secs(120),
        || async {
            let shown = shown(idle.clone()).await;
            shown["stopped"]["reason"] == "idle"
        },
    )
    .await;
    // Half as long again as the idle timeout since its start, the busy one is still up: its own
    // reports kept it, recorded on its pod.
    tokio::time::sleep_until(busy_ready + Duration::from_secs(30)).await;
    let shown = shown(busy.clone()).await;
    assert_eq!(shown["status"], "ready", "{shown}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get(busy).await.unwrap();
    assert!(
        pod.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("outfit.dev/last-activity"),
        "the busy workspace's activity recorded"
    );
}
