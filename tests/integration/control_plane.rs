//! A real kube-apiserver and etcd for the end-to-end tests, started once per test binary with
//! `hack/control-plane/up.sh` (which builds them from Go modules into a cache outside the work
//! tree on first use) and stopped when the test binary exits.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
};

use kube::{
    Client, Config,
    api::{Api, DynamicObject, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::{Value, json};

use crate::support::repo_root;

/// A running control plane.
pub(crate) struct ControlPlane {
    pub(crate) state_dir: PathBuf,
}

impl ControlPlane {
    /// The shared control plane, started on first use.
    pub(crate) fn get() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| ControlPlane::start("shared"))
    }

    /// The shared realistic control plane: with a controller manager, a scheduler and one kwok
    /// node, so pods are scheduled, get addresses, turn Ready and finish deleting, and the garbage
    /// collector and the volume binder run. Started on first use.
    pub(crate) fn with_nodes() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| ControlPlane::start_with("nodes", 1))
    }

    /// A control plane of its own, for a test that stops and restarts parts of it. Like the shared
    /// one, it is stopped when the test binary exits.
    pub(crate) fn start(name: &str) -> ControlPlane {
        ControlPlane::start_with(name, 0)
    }

    fn start_with(name: &str, nodes: u32) -> ControlPlane {
        let state_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("control-plane-{}-{name}", std::process::id()));
        let scripts = repo_root().join("hack/control-plane");
        // Stop the processes and remove the state when this test binary exits, however it exits:
        // the harness starts them in their own session, so nothing else would. The watchdog
        // outlives this process by design, so it is never waited for.
        #[expect(clippy::zombie_processes, reason = "the watchdog must outlive the test binary")]
        let _watchdog = Command::new("bash")
            .arg("-c")
            .arg(r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2/down.sh" "$3" >/dev/null 2>&1; rm -rf "$3""#)
            .arg("watchdog")
            .arg(std::process::id().to_string())
            .arg(&scripts)
            .arg(&state_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the control-plane watchdog");
        let status = Command::new(scripts.join("up.sh"))
            .arg("--nodes")
            .arg(nodes.to_string())
            .arg(&state_dir)
            .status()
            .expect("run hack/control-plane/up.sh");
        assert!(
            status.success(),
            "hack/control-plane/up.sh failed; see the logs in {}",
            state_dir.display()
        );
        ControlPlane { state_dir }
    }

    /// Kills kube-apiserver as a crash would (etcd keeps the data) and returns a function that starts it again
    /// with the same command line.
    pub(crate) fn stop_apiserver(&self) -> impl FnOnce() {
        let pid_file = self.state_dir.join("kube-apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file)
            .expect("apiserver pid file")
            .trim()
            .to_owned();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("apiserver command line");
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let status = Command::new("kill").args(["-KILL", &pid]).status().expect("kill");
        assert!(status.success());
        while std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists()
            && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let log = self.state_dir.join("kube-apiserver-restarted.log");
        move || {
            let status = Command::new("bash")
                .arg("-c")
                .arg(r#"pidfile="$1"; log="$2"; shift 2; setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >"$log" 2>&1 &"#)
                .arg("restart")
                .arg(&pid_file)
                .arg(&log)
                .args(&args)
                .status()
                .expect("restart kube-apiserver");
            assert!(status.success());
        }
    }

    /// A value of the `env` file up.sh wrote (`POD_CIDR`, `NODE_NAMES`, ...).
    pub(crate) fn env(&self, key: &str) -> String {
        let env = std::fs::read_to_string(self.state_dir.join("env")).expect("the control plane's env file");
        let prefix = format!("export {key}=");
        env.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|value| value.trim_matches('\'').to_owned())
            .unwrap_or_else(|| panic!("{key} is not in the control plane's env file"))
    }

    /// The admin's kubeconfig.
    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.state_dir.join("kubeconfig")
    }

    /// A client authenticated as the admin (group `system:masters`).
    pub(crate) async fn admin_client(&self) -> Client {
        client_from(&self.state_dir.join("kubeconfig")).await
    }
}

/// A client authenticated as the kubeconfig says.
pub(crate) async fn client_from(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(config).expect("client")
}

/// The API resource of a kind, by its plural.
pub(crate) fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// An API for `resource`, in `namespace` or cluster-wide.
pub(crate) fn api(client: &Client, namespace: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Creates a raw object and returns it as the API server stored it.
pub(crate) async fn create(
    client: &Client,
    namespace: Option<&str>,
    resource: &ApiResource,
    object: Value,
) -> Result<Value, kube::Error> {
    let object: DynamicObject = serde_json::from_value(object).expect("a valid object");
    let stored = api(client, namespace, resource)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(serde_json::to_value(stored).expect("serializes"))
}

/// Creates a namespace, with `labels`, where pods can be created. There is no controller-manager,
/// so the default ServiceAccount the ServiceAccount admission plugin requires is created here.
pub(crate) async fn pod_namespace(client: &Client, name: &str, labels: Value) {
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    create(
        client,
        None,
        &resource("", "v1", "Namespace", "namespaces"),
        namespace,
    )
    .await
    .expect("create namespace");
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    create(
        client,
        Some(name),
        &resource("", "v1", "ServiceAccount", "serviceaccounts"),
        account,
    )
    .await
    .expect("create the default service account");
}
