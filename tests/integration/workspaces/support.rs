//! What the workspace tests share: a manifest server, the backend as a child process, an HTTP
//! client that shares no code with the backend, and cluster helpers.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service},
    networking::v1::Ingress,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use outfit_test_support::http::{Call, loopback};
pub(super) use outfit_test_support::{free_port, wait::eventually};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::control_plane::ControlPlane;

/// A manifest server on loopback: serves whatever a test put under a path.
#[derive(Clone)]
pub(super) struct Manifests {
    pub(super) port: u16,
    files: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Manifests {
    pub(super) async fn start() -> Self {
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
    pub(super) fn put(&self, name: &str, text: &str) -> String {
        let path = format!("/manifests/{name}");
        self.files.lock().unwrap().insert(path.clone(), text.to_owned());
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// `outfit workspaces` as a child process, killed on drop. Its stderr is the test's, so its log
/// shows with a failing test; a backend found exited while it should be running fails the test.
pub(super) struct Backend {
    /// Behind a lock so that checks through `&self` can reap it (`try_wait`).
    child: Mutex<Child>,
    pub(super) port: u16,
    config: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        let exited = child.try_wait().ok().flatten();
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&self.config);
        match exited {
            Some(status) if std::thread::panicking() => {
                eprintln!("outfit workspaces had exited ({status}); its log is above")
            }
            Some(status) => panic!("outfit workspaces exited during the test ({status}); its log is above"),
            None => {}
        }
    }
}

impl Backend {
    /// Starts the backend for `namespace`, its manifests from `manifests`, with `extra` config
    /// lines.
    pub(super) async fn start(
        plane: &ControlPlane,
        namespace: &str,
        manifests: &Manifests,
        extra: &str,
    ) -> Backend {
        Backend::start_as(plane, namespace, manifests, extra, plane.kubeconfig()).await
    }

    /// As [`Backend::start`], with the credentials of `kubeconfig`.
    pub(super) async fn start_as(
        plane: &ControlPlane,
        namespace: &str,
        manifests: &Manifests,
        extra: &str,
        kubeconfig: PathBuf,
    ) -> Backend {
        Backend::start_on(plane, namespace, manifests, extra, kubeconfig, free_port()).await
    }

    /// As [`Backend::start_as`], listening on `port` (for a configuration that names it, such as
    /// a sign-in's redirect URL).
    pub(super) async fn start_on(
        plane: &ControlPlane,
        namespace: &str,
        manifests: &Manifests,
        extra: &str,
        kubeconfig: PathBuf,
        port: u16,
    ) -> Backend {
        workspace_crd(&plane.admin_client().await).await;
        let pod_cidr = plane.env("POD_CIDR");
        // timeoutCreate leaves room for a loaded machine (hack/test.sh runs four tests at a time on
        // two cores): a home restored from a snapshot took past 60 s there with six at a time.
        let base = format!(
            "namespace: {namespace}\n\
                 whitelistManifestRegex: 'http://127\\.0\\.0\\.1:{}/manifests/'\n\
                 ingressDomain: pods.test\n\
                 localRegistryURL: registry.test:5000\n\
                 podSubnetCidr: {pod_cidr}\n\
                 timeoutCreate: 100s\n\
                 timeoutDelete: 30s\n\
                 storageGracePeriod: 0s\n\
                 hostnameList: [{{hostname: silo1.test, address: 10.0.0.20}}]\n\
                 listen: 127.0.0.1:{port}\n\
                 adminListen: ''\n",
            manifests.port
        );
        // A key in `extra` takes the place of the same key here.
        let overridden = |line: &str| {
            let key = line.split(':').next().unwrap_or_default();
            extra.lines().any(|l| l.starts_with(&format!("{key}:")))
        };
        let base: String = base
            .lines()
            .filter(|l| !overridden(l))
            .map(|l| format!("{l}\n"))
            .collect();
        Backend::start_with_config(&format!("{base}{extra}"), port, kubeconfig).await
    }

    /// A backend on the whole configuration `text`, which listens on `port`.
    pub(super) async fn start_with_config(text: &str, port: u16, kubeconfig: PathBuf) -> Backend {
        // Under the test build's tmp directory, which goes with the build, not /tmp.
        let config = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("outfit-ws-{}-{port}.yaml", std::process::id()));
        std::fs::write(&config, text).unwrap();
        let backend = Backend {
            child: Mutex::new(spawn(&config, &kubeconfig)),
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
            self.assert_running();
            assert!(
                Instant::now() < deadline,
                "outfit workspaces did not start listening"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fails the test if the backend has exited: a crashed backend must not pass for one that
    /// refuses or ignores requests.
    pub(super) fn assert_running(&self) {
        let status = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_wait()
            .expect("wait for outfit workspaces");
        if let Some(status) = status {
            panic!("outfit workspaces exited unexpectedly ({status}); its log is above");
        }
    }

    /// Kills the backend as a crash would and starts it again with the same configuration.
    pub(super) async fn restart(&mut self) {
        self.assert_running();
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        child.kill().unwrap();
        child.wait().unwrap();
        *child = spawn(&self.config, &self.kubeconfig);
        self.wait_listening().await;
    }

    /// POSTs `body` to `path`; returns the status and the JSON answer. Fails the test if the
    /// backend has exited.
    pub(super) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.assert_running();
        let (status, text) = http(self.port, "POST", path, &body.to_string()).await;
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"));
        (status, value)
    }
}

pub(super) fn spawn(config: &std::path::Path, kubeconfig: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(["workspaces", "--config"])
        .arg(config)
        .env("KUBECONFIG", kubeconfig)
        // info unless the run asks for more (RUST_LOG=outfit_workspaces=debug, say).
        .env(
            "OUTFIT_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start outfit workspaces")
}

/// One HTTP/1.1 request over a fresh connection; returns the status and the body.
pub(super) async fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    http_with(port, method, path, &[], body).await
}

/// As [`http`], with extra request `headers`; a chunked answer (a progress stream) is read to
/// its end.
pub(super) async fn http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let answer = Call::new(method, path)
        .headers(headers)
        .content_type("application/json")
        .body(body.to_owned())
        .send(loopback(port), Duration::from_secs(120))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    (answer.status, answer.text())
}

/// A caller of the native API.
#[derive(Debug, Clone, Copy)]
pub(super) enum Caller<'a> {
    /// `Authorization: Bearer <token>`.
    Token(&'a str),
    /// An authenticating proxy's headers: user and groups.
    Proxy(&'a str, &'a str),
    /// A browser's cookies (a session).
    Cookie(&'a str),
    /// No credentials.
    Anonymous,
}

impl Caller<'_> {
    fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            Self::Token(token) => vec![("authorization", format!("Bearer {token}"))],
            Self::Proxy(user, groups) => vec![
                ("x-forwarded-user", (*user).to_owned()),
                ("x-forwarded-groups", (*groups).to_owned()),
            ],
            Self::Cookie(cookies) => vec![("cookie", (*cookies).to_owned())],
            Self::Anonymous => vec![],
        }
    }
}

impl Backend {
    /// A native API request as `caller`; returns the status and the JSON answer (`null` when empty).
    pub(super) async fn call(
        &self,
        caller: Caller<'_>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.assert_running();
        let headers = caller.headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let (status, text) = http_with(self.port, method, path, &headers, &body).await;
        if text.trim().is_empty() {
            return (status, Value::Null);
        }
        let value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        (status, value)
    }

    /// Launches the catalogue entry `manifest` as `caller`.
    pub(super) async fn launch(&self, caller: Caller<'_>, manifest: &str) -> (u16, Value) {
        self.call(
            caller,
            "POST",
            "/api/v1/workspaces",
            Some(json!({"manifest": manifest})),
        )
        .await
    }

    /// Follows the workspace `name` of `caller` until its stream ends, which must be at ready.
    pub(super) async fn follow_to_ready(&self, caller: Caller<'_>, name: &str) {
        let events = self.follow(caller, name).await;
        assert_eq!(
            events.last().map(|(n, _)| n.as_str()),
            Some("ready"),
            "{events:?}"
        );
    }

    /// The events of a progress stream as `caller`, read until the stream ends: (name, data).
    pub(super) async fn follow(&self, caller: Caller<'_>, name: &str) -> Vec<(String, Value)> {
        self.assert_running();
        let headers = caller.headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let path = format!("/api/v1/workspaces/{name}/progress");
        let (status, text) = http_with(self.port, "GET", &path, &headers, "").await;
        assert_eq!(status, 200, "{path}: {text}");
        parse_events(&text)
    }
}

/// Server-Sent Events: (event name, JSON data) of each event; comments are skipped.
pub(super) fn parse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = "message".to_owned();
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = value.to_owned();
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(value).expect("event data is JSON"));
                }
            }
            Some((name, data?))
        })
        .collect()
}

/// Installs the RBAC objects `outfit manifests --workspaces` prints for a backend in `system`
/// managing `workspaces`, and returns a kubeconfig with a token of its ServiceAccount: the
/// backend then runs with exactly the permissions the install gives it.
pub(super) async fn least_privilege(
    plane: &ControlPlane,
    client: &Client,
    system: &str,
    workspaces: &str,
) -> PathBuf {
    least_privilege_with(plane, client, system, workspaces, &[]).await
}

/// As [`least_privilege`], with more `outfit manifests --workspaces` arguments
/// (`--allowed-host-path`, say). A namespace that exists gets the printed one's labels (its Pod
/// Security level).
pub(super) async fn least_privilege_with(
    plane: &ControlPlane,
    client: &Client,
    system: &str,
    workspaces: &str,
    extra: &[&str],
) -> PathBuf {
    let mut args = vec![
        "--workspaces",
        "--namespace",
        system,
        "--workspaces-namespace",
        workspaces,
    ];
    args.extend_from_slice(extra);
    let documents = crate::support::manifests(&args);
    let plurals = [
        ("Namespace", "namespaces"),
        ("ServiceAccount", "serviceaccounts"),
        ("Role", "roles"),
        ("RoleBinding", "rolebindings"),
        ("ClusterRole", "clusterroles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
        // The guard on what the backend's identity creates: its workspaces launch under it.
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
        (
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    ];
    for document in &documents {
        let Some((kind, plural)) = plurals.iter().find(|(kind, _)| document.kind() == *kind) else {
            continue;
        };
        let api_version = document.value["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let namespace = document.value["metadata"]["namespace"].as_str();
        let resource = crate::control_plane::resource(group, version, kind, plural);
        // Cluster-scoped objects are shared by every test on this API server: each test's get a
        // name of their own, or the second test's binding would silently be the first's.
        let mut object = document.value.clone();
        if kind.starts_with("Cluster") || kind.starts_with("ValidatingAdmissionPolicy") {
            let own = format!("{}-{workspaces}", object["metadata"]["name"].as_str().unwrap());
            object["metadata"]["name"] = Value::String(own.clone());
            if *kind == "ClusterRoleBinding" {
                object["roleRef"]["name"] = Value::String(own);
            } else if *kind == "ValidatingAdmissionPolicyBinding" {
                object["spec"]["policyName"] = Value::String(own);
            }
        }
        match crate::control_plane::create(client, namespace, &resource, object.clone()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 && *kind == "Namespace" => {
                let labels = json!({"metadata": {"labels": object["metadata"]["labels"]}});
                Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
                    .patch(
                        object["metadata"]["name"].as_str().unwrap(),
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(labels),
                    )
                    .await
                    .expect("the printed namespace's labels");
            }
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
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
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

/// Installs the `Workspace` CRD `outfit manifests --workspaces` prints (there already is fine),
/// as an install does before the backend starts: it refuses to start without it.
pub(super) async fn workspace_crd(client: &Client) {
    let printed = crate::support::manifests(&["--workspaces"]);
    let crds = printed
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
        .map(|d| d.value.clone());
    assert_eq!(crate::support::install_crd_objects(client, crds).await, 1);
}

pub(super) async fn namespace(client: &Client, name: &str) {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
}

pub(super) const JUPYTER: &str = r#"
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
pub(super) const UNSCHEDULABLE: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: stuck}
spec:
  nodeSelector: {no-such-node: "true"}
  containers: [{name: main, image: busybox}]
"#;

/// Waits until the namespace holds no pod, Service, Ingress or claim, and the volume is gone.
pub(super) async fn nothing_left(client: &Client, ns: &str, volume: &str) {
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

pub(super) const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sciencedata.dk/ingress-port: "80"}
spec:
  containers: [{name: web, image: nginx, ports: [{containerPort: 80}]}]
"#;

/// A kwok node `name` of a test's own beside the plane's, made once and waited for until the
/// scheduler may use it: labelled and tainted `<pool>=yes`, so that only that test's pods (which
/// select and tolerate it) land there; `cpu` CPUs, pod addresses from `cidr`.
pub(super) async fn pool_node(client: &Client, (name, pool): (&str, &str), (cidr, cpu): (&str, &str)) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name,
                     "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
                                pool: "yes"}},
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr],
                 "taints": [{"key": pool, "value": "yes", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": cpu, "memory": "1Ti", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "1Ti", "pods": "110"}}
    });
    match nodes
        .create(&PostParams::default(), &serde_json::from_value(node).unwrap())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating node {name}: {error}"),
    }
    eventually(&format!("node {name} Ready"), Duration::from_secs(60), || async {
        let node = nodes.get(name).await.unwrap();
        let untainted = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(|t| t.iter().all(|t| t.key != "node.kubernetes.io/not-ready"));
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        (untainted && ready).then_some(())
    })
    .await;
}

/// The placeholders' PriorityClass, as `outfit manifests --workspaces` installs it (pull pods are
/// of it too), made once per cluster.
pub(super) async fn placeholder_class(client: &Client) {
    use outfit_workspaces_core::workspace::placeholder;
    let class = json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": placeholder::PRIORITY_CLASS},
        "value": placeholder::PRIORITY, "globalDefault": false, "preemptionPolicy": "Never"
    });
    let classes: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &outfit_test_support::control_plane::resource(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
        ),
    );
    match classes
        .create(&PostParams::default(), &serde_json::from_value(class).unwrap())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the PriorityClass: {error}"),
    }
}

/// Runs the browser driver `tests/browser/<script>` with `args` under the system's python3
/// (Selenium is Debian's python3-selenium, installed for it) and returns the JSON summary it
/// prints last; a failed run fails the test with what the driver printed.
pub(super) async fn browser_session<I, S>(script: &str, args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/browser")
        .join(script);
    let output = tokio::process::Command::new("/usr/bin/python3")
        .arg(&driver)
        .args(args)
        .output()
        .await
        .expect("/usr/bin/python3 runs the browser driver");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the browser session failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("a JSON summary")
}
