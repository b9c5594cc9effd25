//! End to end: `outfit workspaces` on a realistic cluster (kube-apiserver, etcd, controller
//! manager, scheduler and kwok's simulated nodes, from `hack/control-plane`), driven through its
//! HTTP API as deic-dk's frontend drives it. Every assertion is on an HTTP answer or on what the
//! API server stores, so pods really get scheduled, turn Ready, and are deleted.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    core::v1::{Event, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Service},
    networking::v1::Ingress,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::control_plane::ControlPlane;

/// A manifest server on loopback: serves whatever a test put under a path.
#[derive(Clone)]
struct Manifests {
    port: u16,
    files: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Manifests {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let files: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let served = files.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else {
                    return;
                };
                let files = served.clone();
                tokio::spawn(async move {
                    let mut request = vec![0u8; 4096];
                    let n = tcp.read(&mut request).await.unwrap_or(0);
                    let head = String::from_utf8_lossy(&request[..n]).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let body = files.lock().unwrap().get(&path).cloned();
                    let response = match body {
                        Some(body) => format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_owned(),
                    };
                    let _ = tcp.write_all(response.as_bytes()).await;
                });
            }
        });
        Self { port, files }
    }

    /// Serves `text` at `/manifests/<name>`; returns its URL.
    fn put(&self, name: &str, text: &str) -> String {
        let path = format!("/manifests/{name}");
        self.files.lock().unwrap().insert(path.clone(), text.to_owned());
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// `outfit workspaces` as a child process, killed on drop.
struct Backend {
    child: Child,
    port: u16,
    config: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Backend {
    /// Starts the backend for `namespace`, its manifests from `manifests`, with `extra` config
    /// lines.
    async fn start(plane: &ControlPlane, namespace: &str, manifests: &Manifests, extra: &str) -> Backend {
        Backend::start_as(plane, namespace, manifests, extra, plane.kubeconfig()).await
    }

    /// As [`Backend::start`], with the credentials of `kubeconfig`.
    async fn start_as(
        plane: &ControlPlane,
        namespace: &str,
        manifests: &Manifests,
        extra: &str,
        kubeconfig: PathBuf,
    ) -> Backend {
        let port = free_port();
        let config = std::env::temp_dir().join(format!("outfit-ws-{}-{port}.yaml", std::process::id()));
        let pod_cidr = plane.env("POD_CIDR");
        std::fs::write(
            &config,
            format!(
                "namespace: {namespace}\n\
                 whitelistManifestRegex: 'http://127\\.0\\.0\\.1:{}/manifests/'\n\
                 ingressDomain: pods.test\n\
                 localRegistryURL: registry.test:5000\n\
                 podSubnetCidr: {pod_cidr}\n\
                 timeoutCreate: 20s\n\
                 timeoutDelete: 30s\n\
                 hostnameList: [{{hostname: silo1.test, address: 10.0.0.20}}]\n\
                 listen: 127.0.0.1:{port}\n\
                 adminListen: ''\n{extra}",
                manifests.port
            ),
        )
        .unwrap();
        let backend = Backend {
            child: spawn(&config, &kubeconfig),
            port,
            config,
            kubeconfig,
        };
        backend.wait_listening().await;
        backend
    }

    async fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "outfit workspaces did not start listening"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the backend as a crash would and starts it again with the same configuration.
    async fn restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = spawn(&self.config, &self.kubeconfig);
        self.wait_listening().await;
    }

    /// POSTs `body` to `path`; returns the status and the JSON answer.
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let (status, text) = http(self.port, "POST", path, &body.to_string()).await;
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"));
        (status, value)
    }
}

fn spawn(config: &std::path::Path, kubeconfig: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces", "--config"])
        .arg(config)
        .env("KUBECONFIG", kubeconfig)
        .env("OUTFIT_LOG", "info,outfit_workspaces=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start outfit workspaces")
}

/// One HTTP/1.1 request over a fresh connection; returns the status and the body.
async fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), tcp.read_to_end(&mut response))
        .await
        .expect("an answer within 2 minutes")
        .expect("read the answer");
    let response = String::from_utf8(response).expect("UTF-8");
    let (head, body) = response.split_once("\r\n\r\n").expect("a complete HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_owned())
}

/// Installs the RBAC objects `outfit manifests --workspaces` prints for a backend in `system`
/// managing `workspaces`, and returns a kubeconfig with a token of its ServiceAccount: the
/// backend then runs with exactly the permissions the install gives it.
async fn least_privilege(plane: &ControlPlane, client: &Client, system: &str, workspaces: &str) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args([
            "manifests",
            "--workspaces",
            "--namespace",
            system,
            "--workspaces-namespace",
            workspaces,
        ])
        .output()
        .expect("outfit manifests --workspaces");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents =
        outfit_core::document::parse_stream(&String::from_utf8(output.stdout).unwrap(), "manifests").unwrap();
    let plurals = [
        ("Namespace", "namespaces"),
        ("ServiceAccount", "serviceaccounts"),
        ("Role", "roles"),
        ("RoleBinding", "rolebindings"),
        ("ClusterRole", "clusterroles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
    ];
    for document in &documents {
        let Some((kind, plural)) = plurals.iter().find(|(kind, _)| document.kind() == *kind) else {
            continue;
        };
        let api_version = document.value["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let namespace = document.value["metadata"]["namespace"].as_str();
        let resource = crate::control_plane::resource(group, version, kind, plural);
        match crate::control_plane::create(client, namespace, &resource, document.value.clone()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("installing {kind}: {error}"),
        }
    }
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), system);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let answer: Value = accounts
        .create_subresource("token", "outfit-workspaces", &PostParams::default(), &request)
        .await
        .expect("a token for the backend's ServiceAccount");
    let token = answer["status"]["token"].as_str().expect("a token").to_owned();
    let path = std::env::temp_dir().join(format!(
        "outfit-ws-kubeconfig-{}-{workspaces}",
        std::process::id()
    ));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: c, cluster: {{server: '{}', certificate-authority: '{}'}}}}]\n\
             users: [{{name: backend, user: {{token: '{token}'}}}}]\n\
             contexts: [{{name: backend, context: {{cluster: c, user: backend}}}}]\n\
             current-context: backend\n",
            plane.env("APISERVER_URL"),
            plane.env("APISERVER_CA"),
        ),
    )
    .unwrap();
    path
}

async fn namespace(client: &Client, name: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
}

/// Waits until `check` holds, up to `limit`.
async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

const JUPYTER: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: jupyter
  labels: {app: replaced-by-the-backend}
  annotations:
    sciencedata.dk/ingress-port: "8888"
    sciencedata.dk/copy-token: TOKEN_KEY
spec:
  containers:
  - name: jupyter
    image: LOCALREGISTRY/jupyter:1
    ports: [{containerPort: 8888}, {containerPort: 22}]
    env:
    - {name: FILE, value: ""}
    volumeMounts:
    - {name: sciencedata, mountPath: /home/jovyan/work}
"#;

/// A pod no node will take: it can never be scheduled.
const UNSCHEDULABLE: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: stuck}
spec:
  nodeSelector: {no-such-node: "true"}
  containers: [{name: main, image: busybox}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_session_creates_serves_and_removes_everything() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-session";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_key = format!("outfit-e2e-token-{}", std::process::id());
    std::fs::write(format!("/tmp/{token_key}"), "/?token=s3cret\n").unwrap();
    let url = manifests.put("jupyter.yaml", &JUPYTER.replace("TOKEN_KEY", &token_key));
    // With the permissions `outfit manifests --workspaces` gives it, and no more.
    let kubeconfig = least_privilege(plane, &client, "ws-session-system", ns).await;
    let backend = Backend::start_as(plane, ns, &manifests, "", kubeconfig).await;

    let (status, created) = backend
        .post(
            "/create_pod",
            json!({"yaml_url": url, "user_id": "alice@dtu.dk",
                   "settings": {"jupyter": {"FILE": "notebook.ipynb", "UNDECLARED": "x"}}}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["pod_name"], "jupyter-alice-dtu-dk");
    // deic-dk drops settings the manifest does not declare without a word; outfit says so.
    assert!(
        created["warnings"].to_string().contains("UNDECLARED"),
        "{created}"
    );

    let started = Instant::now();
    let (status, ready) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "alice@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"}),
        )
        .await;
    assert_eq!(
        (status, &ready),
        (200, &json!({"ready": true})),
        "after {:?}",
        started.elapsed()
    );

    // The pod as stored: deic-dk's labels, env, image rewrite and storage volume.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get("jupyter-alice-dtu-dk").await.unwrap();
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(
        (labels["user"].as_str(), labels["domain"].as_str()),
        ("alice", "dtu.dk")
    );
    assert!(!labels.contains_key("app"), "the manifest's labels are replaced");
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("registry.test:5000/jupyter:1"));
    let env: BTreeMap<_, _> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(env["FILE"], "notebook.ipynb");
    assert_eq!(env["SD_UID"], "alice@dtu.dk");
    // Loopback stands for testingHost 10.0.0.20; the data network is 10.2.
    assert_eq!(env["HOME_SERVER_IP"], "10.2.0.20");
    assert_eq!(env["HOME_SERVER_HOSTNAME"], "silo1.test");
    assert!(!env.contains_key("UNDECLARED"));
    let uid = pod.metadata.uid.clone().unwrap();

    // get_pods: every field the frontend reads.
    let (status, listed) = backend
        .post("/get_pods", json!({"user_id": "alice@dtu.dk"}))
        .await;
    assert_eq!(status, 200);
    let info = &listed.as_array().expect("an array")[0];
    assert_eq!(info["pod_name"], "jupyter-alice-dtu-dk");
    assert_eq!(info["container_name"], "jupyter");
    assert_eq!(info["image_name"], "registry.test:5000/jupyter:1");
    assert_eq!(info["owner"], "alice@dtu.dk");
    assert_eq!(info["url"], "https://jupyter-alice-dtu-dk.pods.test");
    assert!(
        info["status"].as_str().unwrap().starts_with("Running:20"),
        "{info}"
    );
    assert_eq!(info["age"].as_str().unwrap().split(':').count(), 3, "{info}");
    let ssh_port = info["k8s_pod_info"]["sshPort"]
        .as_str()
        .expect("an ssh port")
        .to_owned();
    assert_eq!(info["ssh_url"], format!("ssh://root@pods.test:{ssh_port}"));
    assert_eq!(
        info["tokens"],
        json!({token_key.as_str(): "/?token=s3cret"}),
        "{info}"
    );
    let pod_ip = info["pod_ip"].as_str().unwrap().to_owned();
    assert!(
        !pod_ip.is_empty() && !info["node_ip"].as_str().unwrap().is_empty(),
        "{info}"
    );

    // The objects made for the pod, owned by it.
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    for name in ["jupyter-alice-dtu-dk-ssh", "jupyter-alice-dtu-dk-http"] {
        let service = services.get(name).await.unwrap();
        assert_eq!(service.metadata.owner_references.unwrap()[0].uid, uid, "{name}");
    }
    let ingress = Api::<Ingress>::namespaced(client.clone(), ns)
        .get("jupyter-alice-dtu-dk-ingress")
        .await
        .unwrap();
    let spec = ingress.spec.unwrap();
    assert_eq!(
        spec.rules.unwrap()[0].host.as_deref(),
        Some("jupyter-alice-dtu-dk.pods.test")
    );
    assert_eq!(
        spec.tls.unwrap()[0].secret_name.as_deref(),
        Some("user-pods-wildcard")
    );
    let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get("user-storage-alice-dtu-dk")
        .await
        .unwrap();
    assert_eq!(claim.spec.unwrap().storage_class_name.as_deref(), Some("nfs"));
    assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));

    // get_podip_owner: text, the exact id.
    let (status, owner) = http(backend.port, "GET", &format!("/get_podip_owner?ip={pod_ip}"), "").await;
    assert_eq!((status, owner.as_str()), (200, "alice@dtu.dk"));

    // Another user sees nothing and can do nothing, and learns nothing either.
    let bob = json!({"user_id": "bob@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"});
    assert_eq!(
        backend.post("/get_pods", json!({"user_id": "bob@dtu.dk"})).await,
        (200, json!([]))
    );
    assert_eq!(
        backend.post("/watch_create_pod", bob.clone()).await,
        (200, json!({"ready": false}))
    );
    assert_eq!(
        backend.post("/watch_delete_pod", bob.clone()).await,
        (200, json!({"deleted": true}))
    );
    let (status, refused) = backend.post("/delete_pod", bob).await;
    assert_eq!((status, &refused["requested"]), (400, &json!(false)), "{refused}");
    assert!(pods.get_opt("jupyter-alice-dtu-dk").await.unwrap().is_some());

    // Delete, watch it go, and nothing is left behind.
    let alice = json!({"user_id": "alice@dtu.dk", "pod_name": "jupyter-alice-dtu-dk"});
    assert_eq!(
        backend.post("/delete_pod", alice.clone()).await,
        (200, json!({"requested": true}))
    );
    assert_eq!(
        backend.post("/watch_delete_pod", alice).await,
        (200, json!({"deleted": true}))
    );
    assert!(pods.get_opt("jupyter-alice-dtu-dk").await.unwrap().is_none());
    nothing_left(&client, ns, "user-storage-alice-dtu-dk").await;
    let _ = std::fs::remove_file(format!("/tmp/{token_key}"));
}

/// Waits until the namespace holds no pod, Service, Ingress or claim, and the volume is gone.
async fn nothing_left(client: &Client, ns: &str, volume: &str) {
    let lp = ListParams::default();
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    eventually("removal of every object", Duration::from_secs(60), || async {
        pods.list(&lp).await.unwrap().items.is_empty()
            && services.list(&lp).await.unwrap().items.is_empty()
            && ingresses.list(&lp).await.unwrap().items.is_empty()
            && claims.list(&lp).await.unwrap().items.is_empty()
            && volumes.get_opt(volume).await.unwrap().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_never_turns_ready_is_removed_at_its_deadline_with_the_reason() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-deadline";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("stuck.yaml", UNSCHEDULABLE);
    let backend = Backend::start(plane, ns, &manifests, "").await;

    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "carol"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let pod_name = created["pod_name"].as_str().unwrap().to_owned();
    assert_eq!(pod_name, "stuck-carol");
    let (_, listed) = backend.post("/get_pods", json!({"user_id": "carol"})).await;
    assert_eq!(listed[0]["status"], "Creating");

    let started = Instant::now();
    let (status, answer) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "carol", "pod_name": pod_name}),
        )
        .await;
    let waited = started.elapsed();
    assert_eq!((status, &answer["ready"]), (200, &json!(false)), "{answer}");
    let reason = answer["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("scheduling:"), "{reason}");
    // The answer came at the deadline (timeoutCreate 20s), not at once nor long after.
    assert!(
        waited > Duration::from_secs(10) && waited < Duration::from_secs(60),
        "{waited:?}"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("removal of the stuck pod", Duration::from_secs(30), || async {
        pods.get_opt(&pod_name).await.unwrap().is_none()
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let failed = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("CreateFailed"))
        .expect("a CreateFailed event");
    assert!(
        failed.message.as_deref().unwrap_or("").contains("scheduling"),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_survives_a_restart_of_the_backend() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-restart";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", &JUPYTER.replace("TOKEN_KEY", "none-such"));
    let mut backend = Backend::start(plane, ns, &manifests, "").await;

    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "dave"}))
        .await;
    assert_eq!(status, 200, "{created}");
    // Killed before the pod is ready: nothing in memory survives.
    backend.restart().await;
    let watch = json!({"user_id": "dave", "pod_name": "jupyter-dave"});
    assert_eq!(
        backend.post("/watch_create_pod", watch).await,
        (200, json!({"ready": true}))
    );
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    assert!(services.get_opt("jupyter-dave-http").await.unwrap().is_some());
    // A second replica, started now, knows all of it from the cluster and answers alike.
    let replica = Backend::start(plane, ns, &manifests, "").await;
    let ask = json!({"user_id": "dave"});
    let (first, second) = (
        backend.post("/get_pods", ask.clone()).await,
        replica.post("/get_pods", ask).await,
    );
    let without_age = |mut answer: (u16, Value)| {
        answer.1[0]["age"] = json!(null);
        answer
    };
    assert_eq!(without_age(first.clone()), without_age(second));
    assert_eq!(
        first.1[0]["status"].as_str().map(|s| s.starts_with("Running:")),
        Some(true),
        "{first:?}"
    );
    drop(replica);
    assert!(
        Api::<Ingress>::namespaced(client.clone(), ns)
            .get_opt("jupyter-dave-ingress")
            .await
            .unwrap()
            .is_some()
    );

    // delete_all_user removes the pod and the storage, and says so.
    assert_eq!(
        backend.post("/delete_all_user", json!({"user_id": "dave"})).await,
        (200, json!({"deleted": true}))
    );
    nothing_left(&client, ns, "user-storage-dave").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_a_message() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-bad-input";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let good = manifests.put("ok.yaml", UNSCHEDULABLE);
    let deployment = manifests.put(
        "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
    );
    let unknown_volume = manifests.put(
        "volume.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: v}\nspec:\n  containers:\n  - name: c\n    image: x\n    volumeMounts: [{name: mystery, mountPath: /m}]\n",
    );
    let backend = Backend::start(plane, ns, &manifests, "maxBodyBytes: 2048\n").await;

    let error_of = |answer: &Value| answer["error"].as_str().unwrap_or_default().to_owned();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/create_pod",
            json!({"yaml_url": good, "user_id": "Alice"}),
            "lower-case",
        ),
        (
            "/create_pod",
            json!({"yaml_url": format!("http://evil.test/?{good}"), "user_id": "alice"}),
            "whitelist",
        ),
        (
            "/create_pod",
            json!({"yaml_url": format!("http://127.0.0.1:{}/manifests/missing.yaml", manifests.port), "user_id": "alice"}),
            "404",
        ),
        (
            "/create_pod",
            json!({"yaml_url": deployment, "user_id": "alice"}),
            "Deployment",
        ),
        (
            "/create_pod",
            json!({"yaml_url": unknown_volume, "user_id": "alice"}),
            "mystery",
        ),
        ("/create_pod", json!({"user_id": "alice"}), "yaml_url"),
        ("/get_pods", json!({"user_id": "foo@bar@baz"}), "'@'"),
        (
            "/delete_pod",
            json!({"user_id": "alice", "pod_name": "nope"}),
            "no pod",
        ),
    ];
    for (path, body, hint) in cases {
        let (status, answer) = backend.post(path, body.clone()).await;
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(error_of(&answer).contains(hint), "{path} {body}: {answer}");
        if path == "/create_pod" {
            assert_eq!(answer["pod_name"], "", "the compatible field stays");
        }
    }
    // Not JSON, wrong method, unknown route, too large.
    let (status, text) = http(backend.port, "POST", "/get_pods", "{not json").await;
    assert_eq!(status, 400);
    assert!(text.contains("not the expected JSON"), "{text}");
    let (status, _) = http(backend.port, "GET", "/create_pod", "").await;
    assert_eq!(status, 405);
    let (status, _) = http(backend.port, "POST", "/clean_all_unused", "{}").await;
    assert_eq!(status, 404);
    let (status, text) = http(
        backend.port,
        "POST",
        "/get_pods",
        &format!("{{\"user_id\": \"{}\"}}", "a".repeat(4096)),
    )
    .await;
    assert_eq!(status, 413, "{text}");
    // get_podip_owner: no ip, not an ip, outside the pod network.
    for (query, hint) in [
        ("", "missing"),
        ("?ip=x", "not an IP"),
        ("?ip=192.0.2.1", "outside"),
    ] {
        let (status, text) = http(backend.port, "GET", &format!("/get_podip_owner{query}"), "").await;
        assert_eq!(status, 400, "{query}");
        assert!(text.contains(hint), "{query}: {text}");
    }
    // Nothing was created by any of it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_outside_the_allowed_networks_or_without_the_token_are_refused() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-callers";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_file = std::env::temp_dir().join(format!("outfit-ws-token-{}", std::process::id()));
    std::fs::write(&token_file, "t0ken\n").unwrap();
    let backend = Backend::start(
        plane,
        ns,
        &manifests,
        &format!("bearerTokenFile: {}\n", token_file.display()),
    )
    .await;
    let (status, answer) = backend.post("/get_pods", json!({"user_id": "alice"})).await;
    assert_eq!(status, 401, "{answer}");
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", backend.port))
        .await
        .unwrap();
    let body = r#"{"user_id": "alice"}"#;
    let request = format!(
        "POST /get_pods HTTP/1.1\r\nhost: x\r\nauthorization: Bearer t0ken\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tcp.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.ends_with("[]\n"),
        "an empty list is [], not null: {response}"
    );
    drop(backend);

    // Loopback is not in the allowed networks: refused before anything else.
    let backend = Backend::start(plane, ns, &manifests, "allowedSourceCidrs: [\"10.0.0.0/8\"]\n").await;
    let (status, answer) = backend.post("/get_pods", json!({"user_id": "alice"})).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("allowedSourceCidrs"));
    drop(backend);
    let _ = std::fs::remove_file(token_file);

    // Over HTTPS when a certificate is configured (reloaded when its files change, as the
    // webhook's).
    let certs = std::env::temp_dir().join(format!("outfit-ws-certs-{}", std::process::id()));
    let files = outfit_server::SelfSigned::ensure(&certs, &[]).expect("a self-signed certificate");
    let tls = format!(
        "tlsCertFile: {}\ntlsKeyFile: {}\n",
        files.cert.display(),
        files.key.display()
    );
    let backend = Backend::start(plane, ns, &manifests, &tls).await;
    let output = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "30", "--cacert"])
        .arg(&files.ca_cert)
        .args(["-d", r#"{"user_id": "alice"}"#])
        .arg(format!("https://localhost:{}/get_pods", backend.port))
        .output()
        .await
        .expect("curl runs");
    let _ = std::fs::remove_dir_all(&certs);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "[]\n",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", backend.port))
        .await
        .unwrap();
    tcp.write_all(b"POST /get_pods HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    assert!(
        !answer.starts_with(b"HTTP/1.1 200"),
        "plain HTTP is not answered on the HTTPS port"
    );
}

const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_whose_ids_share_a_name_string_or_are_long_stay_apart() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-names";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let backend = Backend::start(plane, ns, &manifests, "").await;

    // deic-dk maps both ids to "a-b-x" and checks ownership on labels, so each sees the other's.
    let mut names = Vec::new();
    for user in ["a.b@x", "a-b@x"] {
        let (status, created) = backend
            .post("/create_pod", json!({"yaml_url": url, "user_id": user}))
            .await;
        assert_eq!(status, 200, "{created}");
        names.push(created["pod_name"].as_str().unwrap().to_owned());
    }
    assert_eq!(names, ["web-a-b-x", "web-a-b-x-1"]);
    for (user, own) in [("a.b@x", &names[0]), ("a-b@x", &names[1])] {
        let (_, listed) = backend.post("/get_pods", json!({"user_id": user})).await;
        let listed: Vec<_> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pod_name"].clone())
            .collect();
        assert_eq!(listed, [json!(own)], "{user}");
    }
    let (status, _) = backend
        .post("/delete_pod", json!({"user_id": "a-b@x", "pod_name": names[0]}))
        .await;
    assert_eq!(status, 400, "a-b@x must not delete a.b@x's pod");

    // A long id: every name it gives stays within 63 characters, and the API server takes them.
    let long = format!("{}@{}.example.org", "l".repeat(50), "d".repeat(40));
    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": long}))
        .await;
    assert_eq!(status, 200, "{created}");
    let pod = created["pod_name"].as_str().unwrap().to_owned();
    assert!(pod.len() <= 63 - "-ingress".len(), "{pod}");
    let watch = json!({"user_id": long, "pod_name": pod});
    assert_eq!(
        backend.post("/watch_create_pod", watch).await,
        (200, json!({"ready": true}))
    );
    let (_, listed) = backend.post("/get_pods", json!({"user_id": long})).await;
    assert_eq!(listed[0]["owner"], json!(long));
    assert_eq!(listed[0]["url"], format!("https://{pod}.pods.test"));
    let ingress = Api::<Ingress>::namespaced(client.clone(), ns)
        .get(&format!("{pod}-ingress"))
        .await
        .expect("the long id's Ingress");
    let host = ingress.spec.unwrap().rules.unwrap()[0].host.clone().unwrap();
    assert!(host.split('.').next().unwrap().len() <= 63, "{host}");
}

/// A client written from deic-dk's documentation alone (`tests/compat/`, Python, no code shared
/// with outfit) drives a whole session and checks every shape, status and rule of the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_written_from_the_documentation_drives_a_full_session() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-compat";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let token_key = format!("outfit-compat-token-{}", std::process::id());
    std::fs::write(format!("/tmp/{token_key}"), "?token=compat\n").unwrap();
    let url = manifests.put("jupyter.yaml", &JUPYTER.replace("TOKEN_KEY", &token_key));
    let backend = Backend::start(plane, ns, &manifests, "").await;
    let script = crate::support::repo_root().join("tests/compat/deic_session.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .args(["--url", &format!("http://127.0.0.1:{}", backend.port)])
        .args(["--manifest-url", &url])
        .args(["--token-key", &token_key, "--token-value", "?token=compat"])
        .args(["--ingress-domain", "pods.test"])
        .args([
            "--user",
            "alice@compat.example",
            "--other-user",
            "bob@compat.example",
        ])
        .args(["--pod-cidr", &plane.env("POD_CIDR")])
        .output()
        .await
        .expect("python3 runs the compatibility session");
    let _ = std::fs::remove_file(format!("/tmp/{token_key}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        output.status.success() && failures.is_empty(),
        "{}\n{}\nstderr: {}",
        failures.join("\n"),
        stdout.lines().last().unwrap_or_default(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.lines().last().unwrap_or_default().ends_with(" 0 failed"),
        "{stdout}"
    );
}

#[test]
fn a_bad_configuration_stops_the_backend_at_start_naming_the_key() {
    let config = std::env::temp_dir().join(format!("outfit-ws-bad-{}.yaml", std::process::id()));
    std::fs::write(&config, "namespace: ws\ntimeoutCreate: 90\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces", "--config"])
        .arg(&config)
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("outfit workspaces runs");
    let _ = std::fs::remove_file(&config);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("timeoutCreate") && stderr.contains("unit"),
        "{stderr}"
    );
    // The environment names its variable when it is the culprit.
    let output = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces"])
        .env("BACKEND_PODSUBNETCIDR", "10.0.0.0/99")
        .output()
        .expect("outfit workspaces runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("BACKEND_PODSUBNETCIDR") && stderr.contains("podSubnetCidr"),
        "{stderr}"
    );
}
