//! End to end: a real kube-apiserver calls `outfit serve`, applies its patch and stores the pod.
//! Every assertion is on the object the API server stored (or on the error it returned), so these
//! tests fail when the webhook is not registered or not called.

use std::{
    path::Path,
    process::{Child, Command},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use kube::{
    Client,
    api::{Api, DynamicObject, PostParams},
    discovery::ApiResource,
};
use outfit_test_support::{free_port, http::Call};
use serde_json::{Value, json};

use crate::{
    control_plane::{ControlPlane, create, pod_namespace, resource},
    support::repo_root,
};

/// `outfit serve` as a child process, killed on drop. Its stdout and stderr go to a log file: a
/// test that fails, or finds the server exited when it should be running, prints the end of it.
pub(crate) struct Webhook {
    /// Behind a lock so that checks through `&self` can reap it (`try_wait`).
    child: Mutex<Child>,
    port: u16,
    admin: u16,
    certs: tempdir::Dir,
    /// Stopped on purpose ([`Webhook::terminate`]): its exit is no crash.
    terminated: bool,
}

mod tempdir {
    /// A directory removed on drop.
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        let exited = child.try_wait().ok().flatten();
        let _ = child.kill();
        let _ = child.wait();
        if std::thread::panicking() {
            let state = exited.map_or("was running".to_owned(), |status| {
                format!("had exited ({status})")
            });
            eprintln!("outfit serve {state}; the end of its log:\n{}", self.log_tail());
        } else if let Some(status) = exited.filter(|_| !self.terminated) {
            panic!(
                "outfit serve exited during the test ({status}); the end of its log:\n{}",
                self.log_tail()
            );
        }
    }
}

impl Webhook {
    /// The webhook's HTTPS port. Fails the test if the server has exited.
    pub(crate) fn port(&self) -> u16 {
        self.assert_running();
        self.port
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.lock().unwrap_or_else(PoisonError::into_inner).id()
    }

    /// Stops it as Kubernetes stops a pod (SIGTERM) and waits for it to exit; its exit status.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        assert!(sent.success());
        self.terminated = true;
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        child.wait().expect("wait for outfit serve")
    }

    /// Fails the test, with the end of the server's log, if `outfit serve` has exited: a crashed
    /// server must not pass for one that refuses or ignores requests.
    pub(crate) fn assert_running(&self) {
        let status = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_wait()
            .expect("wait for outfit serve");
        if let Some(status) = status {
            panic!(
                "outfit serve exited unexpectedly ({status}); the end of its log:\n{}",
                self.log_tail()
            );
        }
    }

    /// Everything the server has written to stdout and stderr so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.certs.0.join(LOG_FILE)).unwrap_or_default()
    }

    /// The last lines of [`Webhook::log`], enough to see why it failed.
    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Its metrics, as the admin port serves them. Fails the test if the server has exited.
    pub(crate) fn metrics(&self) -> String {
        self.assert_running();
        Call::new("GET", "/metrics")
            .send_blocking(self.admin, Duration::from_secs(30))
            .expect("the admin port answers")
            .text()
    }

    /// The CA its self-signed certificate chains to.
    pub(crate) fn ca_file(&self) -> std::path::PathBuf {
        self.certs.0.join("ca.crt")
    }

    fn start(policies: &Path) -> Webhook {
        let policies = policies.to_str().expect("utf-8 path");
        Webhook::start_with(&["--policies", policies], &[])
    }

    pub(crate) fn start_with(args: &[&str], env: &[(&str, std::path::PathBuf)]) -> Webhook {
        Webhook::launch(args, env, true)
    }

    /// As [`Webhook::start_with`], without `--self-signed`: `args` say where the certificate
    /// comes from (`--tls-secret NAME`, say).
    pub(crate) fn start_without_certs(args: &[&str], env: &[(&str, std::path::PathBuf)]) -> Webhook {
        Webhook::launch(args, env, false)
    }

    fn launch(args: &[&str], env: &[(&str, std::path::PathBuf)], self_signed: bool) -> Webhook {
        let certs = tempdir::Dir(std::env::temp_dir().join(format!(
            "outfit-e2e-certs-{}-{}",
            std::process::id(),
            free_port()
        )));
        let (port, admin) = (free_port(), free_port());
        std::fs::create_dir_all(&certs.0).expect("the webhook's directory");
        let log = std::fs::File::create(certs.0.join(LOG_FILE)).expect("the webhook's log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_outfit"));
        command
            .arg("serve")
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())));
        if self_signed {
            command.arg("--self-signed").arg(&certs.0);
        }
        let child = command
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--admin-listen",
                &format!("127.0.0.1:{admin}"),
            ])
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log)
            .spawn()
            .expect("start outfit serve");
        // Owned by the Webhook from here on, so that a failed start kills it and shows its log.
        let webhook = Webhook {
            child: Mutex::new(child),
            port,
            admin,
            certs,
            terminated: false,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !admin_ready(admin) {
            webhook.assert_running();
            assert!(Instant::now() < deadline, "outfit serve did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        webhook
    }
}

/// The file, in the webhook's directory, that its stdout and stderr are written to.
const LOG_FILE: &str = "outfit-serve.log";

/// Whether the admin port on `port` answers GET /readyz with 200.
fn admin_ready(port: u16) -> bool {
    Call::new("GET", "/readyz")
        .send_blocking(port, Duration::from_secs(5))
        .is_ok_and(|answer| answer.status == 200)
}

/// Registers `webhook` with the API server through `outfit manifests --webhook-url`.
pub(crate) async fn register(client: &Client, webhook: &Webhook, name: &str, namespace: &str) {
    register_with(client, webhook, name, namespace, &[]).await;
}

/// As [`register`], with more `outfit manifests` arguments (`--policies`, say).
async fn register_with(
    client: &Client,
    webhook: &Webhook,
    name: &str,
    namespace: &str,
    extra: &[&str],
) -> Value {
    let url = format!("https://127.0.0.1:{}/mutate", webhook.port());
    let ca = webhook.certs.0.join("ca.crt");
    let mut args = vec![
        "--without-poddefault-crd",
        "--without-gatekeeper-crds",
        "--webhook-url",
        &url,
        "--ca-file",
        ca.to_str().expect("a UTF-8 path"),
    ];
    args.extend_from_slice(extra);
    let mut documents = crate::support::manifests(&args);
    // outfit's own CRDs (PodPolicy, Audience) are always printed: no other project installs them.
    documents.retain(|d| d.kind() != "CustomResourceDefinition");
    assert_eq!(
        documents.len(),
        1,
        "local mode without the upstream CRDs prints only the webhook configuration besides outfit's own"
    );
    let configs = resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    // Several tests share one API server: each webhook only sees its own test's namespace.
    let mut configuration = documents[0].value.clone();
    configuration["metadata"]["name"] = json!(name);
    configuration["webhooks"][0]["namespaceSelector"] =
        json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
    create(client, None, &configs, configuration.clone())
        .await
        .expect("register the webhook");
    wait_until_called(client, webhook, namespace).await;
    configuration
}

/// Waits until the API server calls `webhook` for pods of `namespace`: it picks up a new webhook
/// configuration through a watch, a moment after the create returns, and a test that creates its
/// object at once would race it. Probes with server-side dry runs, which store nothing.
async fn wait_until_called(client: &Client, webhook: &Webhook, namespace: &str) {
    let requests = |text: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("outfit_admission_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let before = requests(&webhook.metrics());
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource("", "v1", "Pod", "pods"));
    let probe: DynamicObject = serde_json::from_value(pod("webhook-probe", json!({}), json!([]))).unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The answer does not matter (a test's policies may deny the probe); the call does.
        let _ = pods.create(&dry_run, &probe).await;
        if requests(&webhook.metrics()) > before {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the API server never called the webhook"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Gatekeeper Assign on Services: `outfit manifests --policies` registers the webhook for
/// Services too, so the cluster applies it as `outfit mutate` does (with pods-only rules the
/// API server would never call outfit for a Service).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assign_on_services_mutates_the_services_the_api_server_stores() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    let namespace = "e2e-services";
    pod_namespace(&client, namespace, json!({})).await;
    let policies = repo_root()
        .join("target")
        .join(format!("e2e-service-policies-{}", std::process::id()));
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("assign.yaml"),
        concat!(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: sticky-sessions}\n",
            "spec:\n",
            "  applyTo: [{groups: [''], versions: [v1], kinds: [Service]}]\n",
            "  match: {scope: Namespaced, kinds: [{apiGroups: [''], kinds: [Service]}]}\n",
            "  location: spec.sessionAffinity\n",
            "  parameters: {assign: {value: ClientIP}}\n",
        ),
    )
    .unwrap();
    let webhook = Webhook::start(&policies);
    let path = policies.to_str().unwrap();
    let configuration = register_with(&client, &webhook, "services", namespace, &["--policies", path]).await;
    let rules = &configuration["webhooks"][0]["rules"];
    assert_eq!(rules[1]["resources"], json!(["services"]), "{rules}");

    let services = resource("", "v1", "Service", "services");
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let stored = create(&client, Some(namespace), &services, service)
        .await
        .expect("create the Service");
    assert_eq!(stored["spec"]["sessionAffinity"], "ClientIP", "{stored}");
    // outfit's record of what changed it (Gatekeeper keeps none unless --mutation-annotations).
    assert_eq!(
        stored["metadata"]["annotations"]["outfit.dev/mutated-by"], "Assign//sticky-sessions",
        "{stored}"
    );
    std::fs::remove_dir_all(&policies).ok();
}

pub(crate) fn pod(name: &str, labels: Value, env: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox", "env": env}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_stores_pods_as_outfit_mutates_them() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    let namespace = "e2e-poddefault";
    pod_namespace(&client, namespace, json!({})).await;

    let policies = repo_root()
        .join("target")
        .join(format!("e2e-policies-{}", std::process::id()));
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(
        policies.join("poddefault.yaml"),
        format!(
            "apiVersion: kubeflow.org/v1alpha1\nkind: PodDefault\nmetadata: {{name: proxy, namespace: {namespace}}}\n\
             spec:\n  selector: {{matchLabels: {{proxy: \"true\"}}}}\n  env: [{{name: HTTPS_PROXY, value: \"http://proxy:3128\"}}]\n"
        ),
    )
    .unwrap();
    let webhook = Webhook::start(&policies);
    register(&client, &webhook, "from-files", namespace).await;

    let pods = resource("", "v1", "Pod", "pods");
    let stored = create(
        &client,
        Some(namespace),
        &pods,
        pod("mutated", json!({"proxy": "true"}), json!([])),
    )
    .await
    .expect("pod created");
    assert_eq!(
        stored["spec"]["containers"][0]["env"],
        json!([{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}])
    );
    assert_eq!(
        stored["metadata"]["annotations"]["poddefault.admission.kubeflow.org/poddefault-proxy"],
        ""
    );

    let untouched = create(
        &client,
        Some(namespace),
        &pods,
        pod("untouched", json!({}), json!([])),
    )
    .await
    .expect("pod created");
    assert!(untouched["spec"]["containers"][0].get("env").is_none());

    let conflicting = pod(
        "conflicting",
        json!({"proxy": "true"}),
        json!([{"name": "HTTPS_PROXY", "value": "http://other:1"}]),
    );
    let error = create(&client, Some(namespace), &pods, conflicting)
        .await
        .expect_err("conflict denies the pod");
    let message = error.to_string();
    assert!(
        message.contains(
            "denied the request: conflict occurred while applying poddefaults: proxy on pod: conflicting"
        ),
        "{message}"
    );

    // A server-side dry run returns the mutated pod and stores nothing.
    let pod_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pods);
    let dry: DynamicObject = serde_json::from_value(pod("dry", json!({"proxy": "true"}), json!([]))).unwrap();
    let returned = pod_api
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &dry,
        )
        .await
        .expect("dry run");
    let returned = serde_json::to_value(returned).unwrap();
    assert_eq!(
        returned["spec"]["containers"][0]["env"],
        json!([{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}])
    );
    assert!(
        pod_api.get_opt("dry").await.expect("get").is_none(),
        "a dry run stores nothing"
    );

    // With outfit stopped, failurePolicy Fail (the default `outfit manifests` prints) rejects pods
    // in the namespaces it selects; namespaces it excludes are never sent to it.
    drop(webhook);
    let error = create(
        &client,
        Some(namespace),
        &pods,
        pod("while-down", json!({}), json!([])),
    )
    .await
    .expect_err("failurePolicy Fail rejects the pod");
    assert!(error.to_string().contains("failed calling webhook"), "{error}");
    let other = "e2e-not-selected";
    pod_namespace(&client, other, json!({})).await;
    create(
        &client,
        Some(other),
        &pods,
        pod("elsewhere", json!({"proxy": "true"}), json!([])),
    )
    .await
    .expect("a namespace the webhook does not select is never sent to it");
    let _ = std::fs::remove_dir_all(&policies);
}

/// A PodDefault's sidecar that a Gatekeeper mutator then changes, with a second webhook after
/// outfit's that changes the pod too: the API server calls outfit again (`reinvocationPolicy:
/// IfNeeded`) and the second pass must neither deny the pod (the sidecar no longer equals the
/// PodDefault's) nor change it (RELIABILITY.md, fuzzing finding 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poddefault_sidecar_a_mutator_changed_survives_reinvocation() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    let namespace = "e2e-reinvocation";
    pod_namespace(&client, namespace, json!({})).await;
    let dir = |name: &str| {
        let dir = repo_root()
            .join("target")
            .join(format!("e2e-reinvocation-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    let (first, second) = (dir("first"), dir("second"));
    std::fs::write(
        first.join("policies.yaml"),
        format!(
            "apiVersion: kubeflow.org/v1alpha1\nkind: PodDefault\nmetadata: {{name: s3-mount, namespace: {namespace}}}\n\
             spec:\n  selector: {{}}\n  sidecars: [{{name: s3-fuse, image: s3-fuse:1}}]\n---\n\
             apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {{name: every-container}}\n\
             spec:\n  applyTo: [{{groups: [\"\"], versions: [v1], kinds: [Pod]}}]\n  match: {{namespaces: [{namespace}]}}\n\
             \x20 location: \"spec.containers[name: *].env[name: INJECTED].value\"\n  parameters: {{assign: {{value: \"yes\"}}}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        second.join("policies.yaml"),
        format!(
            "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {{name: second-webhook}}\n\
             spec:\n  match: {{namespaces: [{namespace}]}}\n  location: metadata.labels.second-webhook\n\
             \x20 parameters: {{assign: {{value: \"yes\"}}}}\n"
        ),
    )
    .unwrap();
    // Webhooks are called in the order of their configurations' names.
    let outfit = Webhook::start(&first);
    register(&client, &outfit, "e2e-reinvocation-1-outfit", namespace).await;
    let other = Webhook::start(&second);
    register(&client, &other, "e2e-reinvocation-2-other", namespace).await;

    let pods = resource("", "v1", "Pod", "pods");
    // Until the API server has picked up both configurations, pods come back without the second
    // webhook's label; a denial on reinvocation fails `create` here.
    let stored = eventually_created(&client, namespace, &pods, "reinvoked", |pod| {
        pod["metadata"]["labels"]["second-webhook"] == "yes"
            && pod["spec"]["containers"][1]["name"] == "s3-fuse"
    })
    .await;
    assert_eq!(stored["metadata"]["labels"]["second-webhook"], "yes", "{stored}");
    let containers = stored["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2, "{stored}");
    for container in containers {
        assert_eq!(
            container["env"],
            json!([{"name": "INJECTED", "value": "yes"}]),
            "{container}"
        );
    }
    assert_eq!(containers[1]["name"], "s3-fuse");
    assert_eq!(containers[1]["image"], "s3-fuse:1");
    let _ = std::fs::remove_dir_all(&first);
    let _ = std::fs::remove_dir_all(&second);
}

/// The Gatekeeper NFS example from Coder's blog, applied as objects of the CRDs, mutates a
/// two-container pod through the API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gatekeeper_mutators_from_the_cluster_mount_nfs_in_every_container() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    crate::support::install_crds(&client).await;
    let namespace = "coder-big-dataset";
    pod_namespace(&client, namespace, json!({})).await;
    let assign = resource("mutations.gatekeeper.sh", "v1alpha1", "Assign", "assign");
    let text = std::fs::read_to_string(repo_root().join("examples/gatekeeper-nfs/policies.yaml")).unwrap();
    for document in outfit_core::document::parse_stream(&text, "nfs").unwrap() {
        create(&client, None, &assign, document.value)
            .await
            .expect("create the Assign");
    }
    let webhook = Webhook::start_with(
        &["--from-cluster"],
        &[("KUBECONFIG", plane.state_dir.join("kubeconfig"))],
    );
    register(&client, &webhook, "gatekeeper-nfs", namespace).await;

    let pods = resource("", "v1", "Pod", "pods");
    let two_containers = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "workspace"},
        "spec": {"containers": [{"name": "workspace", "image": "code-server"}, {"name": "sidecar", "image": "busybox"}]}
    });
    let stored = create(&client, Some(namespace), &pods, two_containers)
        .await
        .expect("pod created");
    for container in stored["spec"]["containers"].as_array().unwrap() {
        let mounts: Vec<&Value> = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["name"] == "nfs-volume")
            .collect();
        assert_eq!(mounts.len(), 1, "{container}");
        assert_eq!(mounts[0]["mountPath"], "/nfs");
    }
    let volumes: Vec<&Value> = stored["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"] == "nfs-volume")
        .collect();
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0]["persistentVolumeClaim"]["claimName"], "nfs-pvc");
}

/// `outfit serve --from-cluster`: PodDefaults created, changed and deleted in the API server take
/// effect on the next pod without a restart; /readyz waits for the first read of the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poddefaults_from_the_cluster_apply_without_a_restart() {
    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    crate::support::install_crds(&client).await;
    let namespace = "e2e-from-cluster";
    pod_namespace(&client, namespace, json!({})).await;

    let webhook = Webhook::start_with(
        &["--from-cluster"],
        &[("KUBECONFIG", plane.state_dir.join("kubeconfig"))],
    );
    register(&client, &webhook, "from-cluster", namespace).await;

    let pods = resource("", "v1", "Pod", "pods");
    let pod_defaults = resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults");
    let policy = |value: &str| {
        json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "proxy"},
               "spec": {"selector": {}, "env": [{"name": "HTTPS_PROXY", "value": value}]}})
    };
    let env_of = |pod: &Value| pod["spec"]["containers"][0]["env"].clone();
    let expect_env = |value: &str| json!([{"name": "HTTPS_PROXY", "value": value}]);

    create(&client, Some(namespace), &pod_defaults, policy("http://one:1"))
        .await
        .expect("create the PodDefault");
    let first = eventually_created(&client, namespace, &pods, "first", |pod| {
        env_of(pod) == expect_env("http://one:1")
    })
    .await;
    assert_eq!(env_of(&first), expect_env("http://one:1"));

    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pod_defaults);
    let patch = json!({"spec": {"env": [{"name": "HTTPS_PROXY", "value": "http://two:2"}]}});
    api.patch(
        "proxy",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("change it");
    let second = eventually_created(&client, namespace, &pods, "second", |pod| {
        env_of(pod) == expect_env("http://two:2")
    })
    .await;
    assert_eq!(env_of(&second), expect_env("http://two:2"));

    api.delete("proxy", &kube::api::DeleteParams::default())
        .await
        .expect("delete it");
    let third = eventually_created(&client, namespace, &pods, "third", |pod| env_of(pod).is_null()).await;
    assert!(env_of(&third).is_null());
}

/// Creates pods named `<prefix>-<n>` until one is stored satisfying `done`: a change reaches the
/// webhook through a watch, so the first pod after it may still see the old policies. Bounded to
/// a few seconds (the bar is "within a second"; the bound leaves room for a loaded machine).
async fn eventually_created(
    client: &Client,
    namespace: &str,
    pods: &ApiResource,
    prefix: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(10);
    for attempt in 0.. {
        let name = format!("{prefix}-{attempt}");
        let stored = create(client, Some(namespace), pods, pod(&name, json!({}), json!(null)))
            .await
            .expect("pod created");
        if done(&stored) || Instant::now() > deadline {
            // Reported, not asserted: how long the change took to reach a stored pod.
            eprintln!(
                "{prefix}: policy change visible after {:?} ({} pods)",
                start.elapsed(),
                attempt + 1
            );
            return stored;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!("the loop returns")
}

/// A webhook that dies mid-test fails the test, with its log, at the next request helper and at
/// the end of the test, instead of passing for a server that refuses or ignores requests.
#[test]
fn a_crashed_outfit_serve_fails_the_test_with_its_log() {
    let policies = repo_root().join("examples/workspace/policies");
    let webhook = Webhook::start(&policies);
    webhook.assert_running();
    let status = Command::new("kill")
        .args(["-KILL", &webhook.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let message = |panic: Box<dyn std::any::Any + Send>| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| panic!("a panic with a message"))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let noticed = loop {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| webhook.port())) {
            Ok(_) => assert!(
                Instant::now() < deadline,
                "the killed server still counts as running"
            ),
            Err(panic) => break message(panic),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(noticed.contains("outfit serve exited unexpectedly"), "{noticed}");
    assert!(
        noticed.contains("SIGKILL") || noticed.contains("signal: 9"),
        "{noticed}"
    );
    assert!(
        noticed.contains("INFO"),
        "the message carries the server's log: {noticed}"
    );
    // Dropped at the end of a test that did not fail otherwise, it fails it.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(webhook)))
        .map_err(message)
        .expect_err("dropping a webhook that exited fails the test");
    assert!(
        dropped.contains("outfit serve exited during the test"),
        "{dropped}"
    );
}
