//! Running `outfit workspaces` on the test cluster, as its benchmark and soak do: a namespace
//! ready for pods, users with tokens, and the backend process.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::{Api, Client, api::PostParams};
use outfit_test_support::free_port;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where a soak runs: the flags every soak takes.
#[derive(Debug, clap::Args)]
pub struct Places {
    /// The state directory of a running `hack/control-plane/up.sh` (with `--nodes 1` for the
    /// workspace soak); without it the soak starts (and at the end stops) its own in
    /// `<work>/control-plane`.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The outfit binary (default: `outfit` next to this binary).
    #[arg(long)]
    pub outfit: Option<PathBuf>,
    /// Working directory for configuration, certificates and logs (kept at the end).
    #[arg(long)]
    pub work: Option<PathBuf>,
}

impl Places {
    /// The working directory (`--work`, or `<tmp>/<name>-<pid>`; created) and the outfit binary
    /// (which must exist).
    pub fn resolve(&self, name: &str) -> Result<(PathBuf, PathBuf)> {
        let work = match &self.work {
            Some(w) => w.clone(),
            None => std::env::temp_dir().join(format!("{name}-{}", std::process::id())),
        };
        std::fs::create_dir_all(&work)?;
        let outfit = match &self.outfit {
            Some(o) => o.clone(),
            None => std::env::current_exe()?.with_file_name("outfit"),
        };
        ensure!(
            outfit.exists(),
            "{} not found: build it with `cargo build --release -p outfit` or pass --outfit",
            outfit.display()
        );
        Ok((work, outfit))
    }
}

/// Serves `manifest(name)` at `/<name>.yaml` on loopback (`name` of lowercase letters and
/// digits; anything else is `web`); returns the port.
pub async fn serve_manifests(manifest: impl Fn(&str) -> String + Send + Sync + 'static) -> Result<u16> {
    let manifest = std::sync::Arc::new(manifest);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let manifest = manifest.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let read = tcp.read(&mut buffer).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..read]);
                let name = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|path| path.strip_prefix('/')?.strip_suffix(".yaml"))
                    .filter(|n| {
                        !n.is_empty() && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    })
                    .unwrap_or("web");
                let manifest = manifest(name);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{manifest}",
                    manifest.len()
                );
                let _ = tcp.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(port)
}

/// The objects `outfit manifests ARGS` prints (`outfit` the binary).
pub fn printed_manifests(outfit: &Path, args: &[&str]) -> Result<Vec<Value>> {
    let output = Command::new(outfit)
        .arg("manifests")
        .args(args)
        .output()
        .with_context(|| format!("running {}", outfit.display()))?;
    ensure!(
        output.status.success(),
        "outfit manifests {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(serde_saphyr::from_multiple(std::str::from_utf8(&output.stdout)?)?)
}

/// Installs the `Workspace` CRD that `outfit manifests --workspaces` prints (`outfit` the binary;
/// there already is fine) and waits until the API server serves it: `outfit workspaces` refuses
/// to start without it.
pub async fn install_workspace_crd(client: &Client, outfit: &Path) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd = printed_manifests(outfit, &["--workspaces"])?
        .into_iter()
        .find(|o| o["kind"] == "CustomResourceDefinition")
        .context("outfit manifests --workspaces printed no CustomResourceDefinition")?;
    let crd: CustomResourceDefinition = serde_json::from_value(crd)?;
    match Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error).context("creating the Workspace CRD"),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let request = hyper::Request::get("/apis/outfit.dev/v1alpha1").body(Vec::new())?;
        if let Ok(list) = client.request::<Value>(request).await
            && list["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["name"] == "workspaces"))
        {
            return warm_up_workspaces(client).await;
        }
        ensure!(
            Instant::now() < deadline,
            "the Workspace CRD was not served within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The first Workspace create after the CRD is installed waits about 2 s at the API server (the
/// first request to write a new resource sets up its handling there): `kubectl create` of three
/// Workspaces on a fresh cluster took 2.16, 0.07 and 0.06 s. One is made (and deleted) here, so
/// that a benchmark's first creates measure what every later one costs, as on a cluster whose
/// CRD was installed long before (the benchmarks once counted those 2 s in a fresh cluster's
/// first creates, BENCHMARKS.md).
async fn warm_up_workspaces(client: &Client) -> Result<()> {
    use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("outfit.dev", "v1alpha1", "Workspace"));
    let workspaces: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let name = format!("outfit-warm-up-{}", std::process::id());
    let mut warm_up = DynamicObject::new(&name, &resource).within("default");
    warm_up.data = json!({"spec": {"owner": "warm-up", "entry": "warm-up", "started": false}});
    workspaces
        .create(&PostParams::default(), &warm_up)
        .await
        .context("the warm-up Workspace")?;
    workspaces
        .delete(&name, &DeleteParams::default())
        .await
        .context("deleting the warm-up Workspace")?;
    Ok(())
}

/// Makes namespace `name` and waits for its `default` ServiceAccount: the ServiceAccount
/// admission plugin refuses pods without it, and the controller manager makes it.
pub async fn make_namespace(client: &Client, name: &str) -> Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let deadline = Instant::now() + Duration::from_secs(30);
    while accounts.get_opt("default").await?.is_none() {
        if Instant::now() > deadline {
            bail!(
                "no default ServiceAccount in {name}: is the controller manager running (up.sh --nodes 1)?"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// One ServiceAccount per user in `ns`, `<prefix>0`, `<prefix>1`, ...; a day-long token of each
/// (checked by the backend's TokenReview like anyone's).
pub async fn service_account_tokens(
    client: &Client,
    ns: &str,
    prefix: &str,
    count: usize,
) -> Result<Vec<String>> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let tokens: Vec<Result<String>> = futures::stream::iter((0..count).map(|i| {
        let accounts = accounts.clone();
        async move {
            let name = format!("{prefix}{i}");
            let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
            accounts.create(&PostParams::default(), &account).await?;
            let request = json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 86400},
            });
            let answer: Value = accounts
                .create_subresource("token", &name, &PostParams::default(), &request)
                .await?;
            answer["status"]["token"]
                .as_str()
                .map(str::to_owned)
                .context("a TokenRequest answer without a token")
        }
    }))
    .buffered(8)
    .collect()
    .await;
    tokens.into_iter().collect()
}

/// Whether [`Backend::start`] gives the backend an admin port (`/readyz`, `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminPort {
    Off,
    /// On a free port of 127.0.0.1: [`Backend::admin_port`].
    Loopback,
}

/// Where a workspace benchmark runs: the flags workspaces-bench and workspaces-scale share.
#[derive(Debug, clap::Args)]
pub struct BenchCluster {
    /// The state directory of `hack/control-plane/up.sh --nodes N`.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// The outfit binary.
    #[arg(long, default_value = "target/release/outfit")]
    pub outfit: PathBuf,
}

/// A running `outfit workspaces`; killed when dropped.
#[derive(Debug)]
pub struct Backend {
    /// The process.
    pub child: Child,
    /// Its API's port on 127.0.0.1.
    pub port: u16,
    /// Its admin port (`/readyz`, `/metrics`) on 127.0.0.1, if it has one.
    pub admin_port: Option<u16>,
    /// How it was started, to start it again on the same ports.
    launch: Launch,
}

/// The command line of a [`Backend`]: the binary, its kubeconfig and config, its log and level.
#[derive(Debug, Clone)]
struct Launch {
    outfit: PathBuf,
    kubeconfig: PathBuf,
    config: PathBuf,
    log: Option<(PathBuf, String)>,
}

impl Launch {
    /// Starts the process; its log is appended to.
    fn spawn(&self) -> Result<Child> {
        let (stderr, level) = match &self.log {
            Some((path, level)) => {
                let file = std::fs::File::options().create(true).append(true).open(path)?;
                (Stdio::from(file), level.as_str())
            }
            None => (Stdio::inherit(), "warn"),
        };
        Command::new(&self.outfit)
            .args(["workspaces", "--config"])
            .arg(&self.config)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("OUTFIT_LOG", level)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {}", self.outfit.display()))
    }
}

impl Backend {
    /// Starts `outfit workspaces` with the admin's `kubeconfig` and a config written to
    /// `config`: `settings` (YAML keys) plus `listen` on a free loopback port and, as `admin`
    /// says, an admin port on another or none. Its log goes to `log` (at `level`), or at `warn`
    /// to this stderr. Waits until it listens.
    pub fn start(
        outfit: &Path,
        kubeconfig: &Path,
        config: &Path,
        settings: &str,
        log: Option<(&Path, &str)>,
        admin: AdminPort,
    ) -> Result<Self> {
        let port = free_port();
        let admin_port = match admin {
            AdminPort::Off => None,
            AdminPort::Loopback => Some(free_port()),
        };
        let admin_listen = admin_port.map_or_else(|| "''".to_owned(), |p| format!("127.0.0.1:{p}"));
        std::fs::write(
            config,
            format!("{settings}\nlisten: 127.0.0.1:{port}\nadminListen: {admin_listen}\n"),
        )?;
        if let Some((path, _)) = log {
            std::fs::File::create(path)?;
        }
        let launch = Launch {
            outfit: outfit.to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            config: config.to_owned(),
            log: log.map(|(path, level)| (path.to_owned(), level.to_owned())),
        };
        let backend = Self {
            child: launch.spawn()?,
            port,
            admin_port,
            launch,
        };
        backend.await_listening()?;
        Ok(backend)
    }

    /// Kills the process as a crash would (SIGKILL), and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the process again as it was started (the same ports and config), its log appended
    /// to the same file; waits until it listens.
    pub fn start_again(&mut self) -> Result<()> {
        self.kill();
        self.child = self.launch.spawn()?;
        self.await_listening()
    }

    fn await_listening(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            ensure!(
                Instant::now() < deadline,
                "outfit workspaces did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Whether the process is still running.
    pub fn alive(&self) -> bool {
        std::fs::read(format!("/proc/{}/cmdline", self.child.id())).is_ok_and(|c| !c.is_empty())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
