//! The project's test cluster (`hack/control-plane`) as the soaks use it: started (or reused),
//! read from its `env` file, its kube-apiserver killed as a crash would and started again.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};

/// How long a restarted kube-apiserver may take to answer `/readyz`.
const RESTART_READY: Duration = Duration::from_secs(90);

/// A running control plane: its state directory, and whether this process started it (and so
/// stops it when done).
#[derive(Debug)]
pub struct ControlPlane {
    /// `hack/control-plane/up.sh`'s state directory.
    pub state_dir: PathBuf,
    own: bool,
}

/// The repository's root, where `hack/` is.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl ControlPlane {
    /// The control plane at `state_dir`, started by someone else (never stopped by this one).
    pub fn at(state_dir: &Path) -> Self {
        Self {
            state_dir: state_dir.to_owned(),
            own: false,
        }
    }

    /// Reuses the control plane at `state_dir`, or starts one in `<work>/control-plane` with
    /// `up.sh --nodes nodes` (0: etcd and kube-apiserver only).
    pub fn start_or_reuse(state_dir: Option<&Path>, work: &Path, nodes: u32) -> Result<Self> {
        if let Some(dir) = state_dir {
            return Ok(Self::at(dir));
        }
        let dir = work.join("control-plane");
        let status = Command::new(repo().join("hack/control-plane/up.sh"))
            .args(["--nodes", &nodes.to_string()])
            .arg(&dir)
            .status()
            .context("running hack/control-plane/up.sh")?;
        ensure!(status.success(), "up.sh failed; logs in {}", dir.display());
        Ok(Self {
            state_dir: dir,
            own: true,
        })
    }

    /// Stops the control plane if this process started it.
    pub fn stop(&self) {
        if self.own {
            let _ = Command::new(repo().join("hack/control-plane/down.sh"))
                .arg(&self.state_dir)
                .stdout(Stdio::null())
                .status();
        }
    }

    /// A value of the state directory's `env` file (`export KEY='value'`).
    pub fn env(&self, key: &str) -> Result<String> {
        env_value(&self.state_dir, key)
    }

    /// A client with the admin's kubeconfig.
    pub async fn admin_client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(self.state_dir.join("kubeconfig"))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }

    /// Whether kube-apiserver answers `/readyz` with `ok` (curl, so that no client state is
    /// shared with the process under test).
    pub fn apiserver_ready(&self) -> bool {
        apiserver_ready(&self.state_dir)
    }

    /// Kills kube-apiserver with SIGKILL (etcd keeps the data) and waits until it is gone;
    /// returns what [`Outage::restart`] needs to start it again with the same command line.
    pub async fn kill_apiserver(&self) -> Result<Outage> {
        let pid_file = self.state_dir.join("kube-apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file)?.trim().to_owned();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .with_context(|| format!("kube-apiserver (pid {pid}) is not running"))?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let killed = Instant::now();
        ensure!(
            Command::new("kill").args(["-KILL", &pid]).status()?.success(),
            "kill {pid}"
        );
        while std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Outage {
            pid,
            pid_file,
            args,
            killed,
        })
    }
}

/// A killed kube-apiserver, to be started again.
#[derive(Debug)]
pub struct Outage {
    /// The killed process's pid.
    pub pid: String,
    pid_file: PathBuf,
    args: Vec<String>,
    /// When it was killed.
    pub killed: Instant,
}

impl Outage {
    /// Starts kube-apiserver again with the same command line (its output appended to `log`)
    /// and waits until it is ready; returns how long it was down in all.
    pub async fn restart(self, plane: &ControlPlane, log: &Path) -> Result<Duration> {
        let status = Command::new("bash")
            .arg("-c")
            .arg(r#"pidfile="$1"; log="$2"; shift 2; setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$log" 2>&1 &"#)
            .arg("restart")
            .arg(&self.pid_file)
            .arg(log)
            .args(&self.args)
            .status()?;
        ensure!(status.success(), "restarting kube-apiserver");
        let until = Instant::now() + RESTART_READY;
        loop {
            let state_dir = plane.state_dir.clone();
            let ready = tokio::task::spawn_blocking(move || apiserver_ready(&state_dir)).await?;
            if ready {
                return Ok(self.killed.elapsed());
            }
            ensure!(
                Instant::now() < until,
                "kube-apiserver not ready {} s after its restart",
                RESTART_READY.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Whether the kube-apiserver of the control plane at `state_dir` is ready.
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
    let env = std::fs::read_to_string(state_dir.join("env"))
        .with_context(|| format!("reading {}/env", state_dir.display()))?;
    let prefix = format!("export {key}=");
    env.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim_matches('\'').to_owned())
        .with_context(|| format!("{key} not in {}/env", state_dir.display()))
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
