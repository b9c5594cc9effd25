//! The project's test cluster (`hack/control-plane`): a real kube-apiserver and etcd (and, with
//! nodes, a controller manager, a scheduler and kwok) on free loopback ports. The end-to-end
//! tests share one per test binary, stopped when the binary exits however it exits; the soaks and
//! benchmarks start one (or reuse one they are given) and stop it themselves. Both can kill its
//! kube-apiserver as a crash would and start it again.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use kube::{
    Client, Config,
    api::{Api, DynamicObject, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    core::GroupVersionKind,
    discovery::ApiResource,
};
use serde_json::{Value, json};

use crate::repo_root;

/// How long a restarted kube-apiserver may take to answer `/readyz`.
const RESTART_READY: Duration = Duration::from_secs(90);

/// What went wrong with the control plane, naming the file or command.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error("running {command}: {source}")]
    Run {
        command: &'static str,
        source: std::io::Error,
    },
    #[error("{command} failed; see the logs in {}", dir.display())]
    Failed { command: &'static str, dir: PathBuf },
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{key} is not in {}/env", dir.display())]
    MissingEnv { key: String, dir: PathBuf },
    #[error("{name} (pid {pid}) is not running")]
    NotRunning { name: String, pid: String },
    #[error("kube-apiserver not ready {} s after its restart", RESTART_READY.as_secs())]
    NotReady,
    #[error("the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

type Result<T, E = ControlPlaneError> = std::result::Result<T, E>;

/// A running control plane: its state directory, and whether this process stops it with
/// [`ControlPlane::stop`] (the tests' are stopped by a watchdog when the test binary exits).
#[derive(Debug)]
pub struct ControlPlane {
    /// `hack/control-plane/up.sh`'s state directory.
    pub state_dir: PathBuf,
    own: bool,
}

impl ControlPlane {
    /// The test binary's shared control plane (etcd and kube-apiserver only), started on first
    /// use.
    pub fn get() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| ControlPlane::start("shared"))
    }

    /// The test binary's shared realistic control plane: with a controller manager, a scheduler
    /// and one kwok node, so pods are scheduled, get addresses, turn Ready and finish deleting,
    /// and the garbage collector and the volume binder run. Started on first use.
    pub fn with_nodes() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| ControlPlane::start_for_test_binary("nodes", 1, 0))
    }

    /// The test binary's shared control plane with a real node (`hack/control-plane/real-node.sh`)
    /// and no kwok node: every pod is pulled from the plane's registry and runs in containerd, on
    /// a network this machine reaches. Started on first use; one per machine.
    pub fn with_real_node() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| ControlPlane::start_for_test_binary("real-node", 0, 1))
    }

    /// A control plane of the test's own, for a test that stops and restarts parts of it. Like
    /// the shared one, it is stopped when the test binary exits.
    pub fn start(name: &str) -> ControlPlane {
        ControlPlane::start_for_test_binary(name, 0, 0)
    }

    /// As [`Self::start`], with a controller manager, a scheduler and `nodes` kwok nodes (as
    /// [`Self::with_nodes`]), for a test that needs pods to run on a cluster of its own.
    pub fn start_with_nodes(name: &str, nodes: u32) -> ControlPlane {
        ControlPlane::start_for_test_binary(name, nodes, 0)
    }

    fn start_for_test_binary(name: &str, nodes: u32, real_nodes: u32) -> ControlPlane {
        let state_dir = scratch_dir().join(format!("control-plane-{}-{name}", std::process::id()));
        // Stop the processes and remove the state when this binary exits, however it exits: up.sh
        // starts them in their own session, so nothing else would. The watchdog outlives this
        // process by design, so it is never waited for.
        #[expect(clippy::zombie_processes, reason = "the watchdog must outlive the test binary")]
        let _watchdog = Command::new("bash")
            .arg("-c")
            .arg(r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2/down.sh" "$3" >/dev/null 2>&1; rm -rf "$3""#)
            .arg("watchdog")
            .arg(std::process::id().to_string())
            .arg(repo_root().join("hack/control-plane"))
            .arg(&state_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the control-plane watchdog");
        up(&state_dir, nodes, real_nodes).unwrap_or_else(|error| panic!("{error}"));
        ControlPlane {
            state_dir,
            own: false,
        }
    }

    /// The control plane at `state_dir`, started by someone else (never stopped by this one).
    pub fn at(state_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.to_owned(),
            own: false,
        }
    }

    /// Reuses the control plane at `state_dir`, or starts one in `<work>/control-plane` with
    /// `up.sh --nodes nodes` (0: etcd and kube-apiserver only) that [`Self::stop`] stops.
    pub fn start_or_reuse(state_dir: Option<&Path>, work: &Path, nodes: u32) -> Result<Self> {
        if let Some(dir) = state_dir {
            return Ok(Self::at(dir));
        }
        let state_dir = work.join("control-plane");
        up(&state_dir, nodes, 0)?;
        Ok(Self { state_dir, own: true })
    }

    /// Stops the control plane if this process started it with [`Self::start_or_reuse`].
    pub fn stop(&self) {
        if self.own {
            let _ = Command::new(repo_root().join("hack/control-plane/down.sh"))
                .arg(&self.state_dir)
                .stdout(Stdio::null())
                .status();
        }
    }

    /// A value of the `env` file up.sh wrote (`POD_CIDR`, `NODE_NAMES`, ...); panics if it is
    /// missing (for tests).
    pub fn env(&self, key: &str) -> String {
        self.try_env(key).unwrap_or_else(|error| panic!("{error}"))
    }

    /// A value of the `env` file up.sh wrote (`export KEY='value'`).
    pub fn try_env(&self, key: &str) -> Result<String> {
        env_value(&self.state_dir, key)
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state_dir.join("kubeconfig")
    }

    /// A client authenticated as the admin (group `system:masters`); panics if the kubeconfig
    /// is unusable (for tests).
    pub async fn admin_client(&self) -> Client {
        client_from(&self.kubeconfig()).await
    }

    /// A client authenticated as the admin.
    pub async fn try_admin_client(&self) -> Result<Client> {
        try_client_from(&self.kubeconfig()).await
    }

    /// Whether kube-apiserver answers `/readyz` with `ok`.
    pub fn apiserver_ready(&self) -> bool {
        apiserver_ready(&self.state_dir)
    }

    /// Kills kube-apiserver with SIGKILL, as a crash would (etcd keeps the data), and waits until
    /// it is gone; the [`Outage`] starts it again with the same command line.
    pub fn kill_apiserver(&self) -> Result<Outage> {
        let daemon = self.daemon("kube-apiserver")?;
        let pid = daemon.pid.clone();
        let killed = Instant::now();
        let status = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .map_err(|source| ControlPlaneError::Run {
                command: "kill",
                source,
            })?;
        if !status.success() {
            return Err(ControlPlaneError::NotRunning {
                name: daemon.name,
                pid,
            });
        }
        while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Outage { pid, daemon, killed })
    }

    /// Kills kube-apiserver as a crash would (etcd keeps the data) and returns a function that
    /// starts it again with the same command line (for tests: panics on failure).
    pub fn stop_apiserver(&self) -> impl FnOnce() + use<> {
        let outage = self.kill_apiserver().unwrap_or_else(|error| panic!("{error}"));
        let log = self.state_dir.join("kube-apiserver-restarted.log");
        move || outage.start_again(&log).unwrap_or_else(|error| panic!("{error}"))
    }
}

/// A killed kube-apiserver, to be started again.
#[derive(Debug)]
pub struct Outage {
    /// The killed process's pid.
    pub pid: String,
    /// It as it ran.
    daemon: Daemon,
    /// When it was killed.
    pub killed: Instant,
}

impl Outage {
    /// Starts kube-apiserver again with the same command line, its output appended to `log`,
    /// without waiting for it to be ready.
    pub fn start_again(&self, log: &Path) -> Result<()> {
        self.daemon.start_again(log)
    }

    /// Starts kube-apiserver again (see [`Self::start_again`]) and waits until it is ready;
    /// returns how long it was down in all.
    pub async fn restart(self, plane: &ControlPlane, log: &Path) -> Result<Duration> {
        self.start_again(log)?;
        let until = Instant::now() + RESTART_READY;
        loop {
            let state_dir = plane.state_dir.clone();
            let ready = tokio::task::spawn_blocking(move || apiserver_ready(&state_dir))
                .await
                .unwrap_or(false);
            if ready {
                return Ok(self.killed.elapsed());
            }
            if Instant::now() >= until {
                return Err(ControlPlaneError::NotReady);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Starts `args` in a session of its own (as up.sh starts its daemons, so it outlives this
/// process), its pid written to `pid_file` and its output appended to `log`; does not wait.
fn start_detached(pid_file: &Path, log: &Path, args: &[String], name: &'static str) -> Result<()> {
    run(
        Command::new("bash")
            .arg("-c")
            .arg(r#"pidfile="$1"; log="$2"; shift 2; setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$log" 2>&1 &"#)
            .arg("restart")
            .arg(pid_file)
            .arg(log)
            .args(args),
        name,
        log,
    )
}

/// Runs `command` to its end; `name` says which in an error, with `dir`, where to look.
fn run(command: &mut Command, name: &'static str, dir: &Path) -> Result<()> {
    let status = command.status().map_err(|source| ControlPlaneError::Run {
        command: name,
        source,
    })?;
    if !status.success() {
        return Err(ControlPlaneError::Failed {
            command: name,
            dir: dir.to_owned(),
        });
    }
    Ok(())
}

/// A running control-plane process (`kube-scheduler`, ...) as up.sh started it: its pid file and
/// command line, read while it runs, so that it can be started again if it exits.
#[derive(Debug, Clone)]
pub struct Daemon {
    name: String,
    /// Its pid when it was read.
    pid: String,
    pid_file: PathBuf,
    args: Vec<String>,
}

impl ControlPlane {
    /// The process `name` (its `<name>.pid` in the state directory), which must be running now.
    pub fn daemon(&self, name: &str) -> Result<Daemon> {
        let pid_file = self.state_dir.join(format!("{name}.pid"));
        let pid = std::fs::read_to_string(&pid_file)
            .map_err(|source| ControlPlaneError::Read {
                path: pid_file.clone(),
                source,
            })?
            .trim()
            .to_owned();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| ControlPlaneError::NotRunning {
                name: name.to_owned(),
                pid: pid.clone(),
            })?;
        let args = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        Ok(Daemon {
            name: name.to_owned(),
            pid,
            pid_file,
            args,
        })
    }
}

impl Daemon {
    /// Whether the process of the pid file still runs.
    pub fn running(&self) -> bool {
        std::fs::read_to_string(&self.pid_file).is_ok_and(|pid| {
            std::fs::read(format!("/proc/{}/cmdline", pid.trim())).is_ok_and(|c| !c.is_empty())
        })
    }

    /// The process's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts it again with the same command line, its output appended to `log`; does not wait.
    pub fn start_again(&self, log: &Path) -> Result<()> {
        start_detached(
            &self.pid_file,
            log,
            &self.args,
            "restarting a control-plane process",
        )
    }
}

/// Runs `hack/control-plane/up.sh --nodes nodes --real-nodes real_nodes state_dir`.
fn up(state_dir: &Path, nodes: u32, real_nodes: u32) -> Result<()> {
    run(
        Command::new(repo_root().join("hack/control-plane/up.sh"))
            .arg("--nodes")
            .arg(nodes.to_string())
            .arg("--real-nodes")
            .arg(real_nodes.to_string())
            .arg(state_dir),
        "hack/control-plane/up.sh",
        state_dir,
    )
}

/// Where a test binary keeps its scratch state: cargo's `CARGO_TARGET_TMPDIR` (`<target>/tmp`,
/// the binary being `<target>/<profile>/deps/NAME`), else the system's temporary directory.
fn scratch_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("tmp")))
        .filter(|dir| std::fs::create_dir_all(dir).is_ok())
        .unwrap_or_else(std::env::temp_dir)
}

/// Whether the kube-apiserver of the control plane at `state_dir` answers `/readyz` with `ok`
/// (through curl, so that no client state is shared with the process under test).
pub fn apiserver_ready(state_dir: &Path) -> bool {
    let (Ok(url), Ok(ca), Ok(token)) = (
        env_value(state_dir, "APISERVER_URL"),
        env_value(state_dir, "APISERVER_CA"),
        env_value(state_dir, "ADMIN_TOKEN"),
    ) else {
        return false;
    };
    Command::new("curl")
        .args(["-sS", "--max-time", "2", "--cacert", &ca, "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("{url}/readyz"))
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| o.stdout == b"ok")
}

/// A value of `state_dir/env` (`export KEY='value'`).
pub fn env_value(state_dir: &Path, key: &str) -> Result<String> {
    let path = state_dir.join("env");
    let env = std::fs::read_to_string(&path).map_err(|source| ControlPlaneError::Read { path, source })?;
    let prefix = format!("export {key}=");
    env.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim_matches('\'').to_owned())
        .ok_or_else(|| ControlPlaneError::MissingEnv {
            key: key.to_owned(),
            dir: state_dir.to_owned(),
        })
}

/// The resident set of process `pid`, in KiB (`VmRSS`).
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A client authenticated as the kubeconfig says; panics if it is unusable (for tests).
pub async fn client_from(kubeconfig: &Path) -> Client {
    try_client_from(kubeconfig)
        .await
        .unwrap_or_else(|error| panic!("{error}"))
}

/// A client authenticated as the kubeconfig says.
pub async fn try_client_from(kubeconfig: &Path) -> Result<Client> {
    let unusable = |source: Box<dyn std::error::Error + Send + Sync>| ControlPlaneError::Kubeconfig {
        path: kubeconfig.to_owned(),
        source,
    };
    let file = Kubeconfig::read_from(kubeconfig).map_err(|e| unusable(e.into()))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| unusable(e.into()))?;
    Client::try_from(config).map_err(|e| unusable(e.into()))
}

/// The API resource of a kind, by its plural.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// An API for `resource`, in `namespace` or cluster-wide.
pub fn api(client: &Client, namespace: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Creates a raw object and returns it as the API server stored it.
pub async fn create(
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

/// Creates a namespace, with `labels`, where pods can be created. Without a controller manager
/// nothing makes the default ServiceAccount the ServiceAccount admission plugin requires, so it
/// is created here.
pub async fn pod_namespace(client: &Client, name: &str, labels: Value) {
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
