//! A bounded soak of `outfit serve --from-cluster` under load and faults. Run with:
//!
//! ```text
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/soak --minutes 10
//! ```
//!
//! It starts its own control plane (`hack/control-plane/up.sh`, stopped with `down.sh` at the end;
//! `--state-dir` reuses a running one), installs the CRDs `outfit manifests` prints, and starts
//! the release `outfit serve --from-cluster --policies DIR --tls-cert --tls-key` (the binary next
//! to this one, or `--outfit`), registered nowhere: the soak sends it AdmissionReviews over HTTPS
//! itself, as the API server would. For `--minutes`, all at once:
//!
//! - **Load**: the load generator's 200-review mix ([`outfit_loadgen::mix`]) against 100
//!   PodDefaults in files, open loop at `--rate` requests/s over `--connections` keep-alive
//!   connections, each reconnecting (a new TLS handshake) every `--requests-per-connection`. Every
//!   answer must be HTTP 200, `allowed: true`, carry the request's own uid, and its patch must
//!   apply (an RFC 6902 applier of its own, not outfit's) and give the object the same review gave
//!   before any fault: those policies never change.
//! - **Policy changes** every `--policy-every` seconds: a policy file is rewritten (atomic rename)
//!   with a new env value, and a PodDefault in the cluster is created, patched twice and deleted
//!   in turn. Probe reviews (every 250 ms, their own connection) of a pod each policy selects
//!   must show the value in force, or one in force during the last `--window` seconds. The time
//!   from each change to the first probe that shows it is the propagation lag.
//! - **Certificate rotation** every `--rotate-every` seconds: a new leaf from the same CA, swapped
//!   in as Kubernetes updates a Secret volume (a new `..<n>` directory and an atomic rename of the
//!   `..data` symlink). New handshakes must present it within `--window` seconds.
//! - **API server outages** every `--outage-every` seconds: kube-apiserver is killed (SIGKILL,
//!   etcd keeps the data), left down `--outage-seconds`, and started again with the same command
//!   line (`outfit_test_support::control_plane`, as the end-to-end tests do). No cluster change
//!   is made while it is down.
//! - **RSS** of outfit serve (`VmRSS`) every 2 s.
//!
//! At the end, after a quiet `--window`: `outfit_policies{kind="PodDefault"}` on the admin port
//! must equal the PodDefaults in the files plus those in the cluster, and the probes must show
//! the final values. Exit status 1 on any failure or violation. Keep the rate modest on a shared
//! machine: every request's answer is parsed, patched and compared on the client side.

use std::{
    collections::BTreeMap,
    net::{SocketAddr, TcpListener as StdListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
    config::{KubeConfigOptions, Kubeconfig},
};
use outfit_loadgen::{harness, mix};
use outfit_server::SelfSigned;
use outfit_test_support::{
    control_plane::{ControlPlane, vm_rss_kib},
    http::{Call, tls_client_config},
};
use rustls::ClientConfig;
use rustls_pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    args_override_self = true,
    about = "Soak outfit serve --from-cluster under load, policy changes, cert rotation and API server outages"
)]
struct Args {
    /// Length of the soak.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Requests per second of the review mix (open loop).
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Keep-alive connections the mix is spread over.
    #[arg(long, default_value_t = 8)]
    connections: u32,
    /// Requests after which a connection is closed and a new one (new TLS handshake) opened.
    #[arg(long, default_value_t = 500)]
    requests_per_connection: u32,
    /// PodDefaults in files, spread over `--namespaces`.
    #[arg(long, default_value_t = 100)]
    policies: usize,
    /// Namespaces of the file PodDefaults.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Static PodDefaults created in the cluster (besides the one that changes).
    #[arg(long, default_value_t = 20)]
    cluster_policies: usize,
    /// Seconds between policy changes (one file rewrite and one cluster change each time).
    #[arg(long, default_value_t = 3.0)]
    policy_every: f64,
    /// Seconds between certificate rotations.
    #[arg(long, default_value_t = 60.0)]
    rotate_every: f64,
    /// Seconds between API server kills (the first after this long).
    #[arg(long, default_value_t = 180.0)]
    outage_every: f64,
    /// Seconds the API server stays down.
    #[arg(long, default_value_t = 20.0)]
    outage_seconds: f64,
    /// Seconds a change may take to show (policies, certificates) before a stale answer counts
    /// as a violation.
    #[arg(long, default_value_t = 5.0)]
    window: f64,
    /// `outfit serve --poll-interval` (policy and certificate files).
    #[arg(long, default_value_t = 2)]
    poll_interval: u64,
    #[command(flatten)]
    places: harness::Places,
}

/// Counts and samples shared by every task.
#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    failures: AtomicU64,
    reconnects: AtomicU64,
    probes: AtomicU64,
    violations: AtomicU64,
    /// Violations within a minute of an API server restart.
    violations_after_outage: AtomicU64,
    rotations: AtomicU64,
    rotation_failures: AtomicU64,
    outages: AtomicU64,
    file_changes: AtomicU64,
    cluster_changes: AtomicU64,
    cluster_change_errors: AtomicU64,
    /// The first few failure and violation messages.
    messages: Mutex<Vec<String>>,
    latencies_us: Mutex<Vec<u32>>,
    rotation_lags: Mutex<Vec<Duration>>,
    outage_downtimes: Mutex<Vec<Duration>>,
    /// When kube-apiserver last came back.
    last_restart: Mutex<Option<Instant>>,
}

impl Stats {
    fn note(&self, message: String) {
        let mut messages = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        if messages.len() < 30 {
            eprintln!("soak: {message}");
            messages.push(message);
        }
    }

    fn fail(&self, message: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.note(message);
    }
}

/// What a changing policy should make outfit add, over time.
#[derive(Default)]
struct Expectation {
    history: Mutex<Vec<Change>>,
}

struct Change {
    at: Instant,
    /// The env value the policy adds, `None` when the policy is absent; `Unknown` when a change's
    /// outcome is not known (a failed API call), until it is read back.
    value: Expected,
    first_seen: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Value(Option<String>),
    Unknown,
}

impl Expectation {
    fn push(&self, value: Expected) {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        history.push(Change {
            at: Instant::now(),
            value,
            first_seen: None,
        });
    }

    fn current(&self) -> Expected {
        let history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        history.last().map_or(Expected::Value(None), |c| c.value.clone())
    }

    /// Whether `seen` at `now` is a value in force at some time within the last `window`, and
    /// marks the first sighting of the latest value.
    fn check(&self, seen: &Option<String>, now: Instant, window: Duration) -> bool {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let since = now.checked_sub(window).unwrap_or(now);
        // The change in force at `since`, and every later one.
        let start = history.iter().rposition(|c| c.at <= since).unwrap_or(0);
        let ok = history.is_empty()
            || history[start..]
                .iter()
                .any(|c| c.value == Expected::Unknown || c.value == Expected::Value(seen.clone()));
        if let Some(last) = history.last_mut()
            && last.first_seen.is_none()
            && last.value == Expected::Value(seen.clone())
        {
            last.first_seen = Some(now);
        }
        ok
    }

    /// Propagation lags of the changes seen, and how many changes were never seen.
    fn lags(&self) -> (Vec<Duration>, usize) {
        let history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let known = history.iter().filter(|c| c.value != Expected::Unknown);
        let (seen, unseen): (Vec<&Change>, Vec<&Change>) = known.partition(|c| c.first_seen.is_some());
        let lags = seen
            .iter()
            .filter_map(|c| c.first_seen.map(|s| s.duration_since(c.at)))
            .collect();
        (lags, unseen.len())
    }
}

/// Everything the tasks share.
struct Soak {
    args: Args,
    stats: Stats,
    file_policy: Expectation,
    cluster_policy: Expectation,
    /// True while kube-apiserver is down (no cluster changes then).
    api_down: AtomicBool,
    webhook: SocketAddr,
    admin: SocketAddr,
    tls: Arc<ClientConfig>,
    /// The 200 review bodies split around the request uid's last 12 digits.
    templates: Vec<(Bytes, Bytes)>,
    objects: Vec<Value>,
    /// Whether each review is a CREATE.
    creates: Vec<bool>,
    /// Each review's object as outfit's first answer patched it (`None`: no patch).
    baseline: Mutex<Vec<Option<Value>>>,
    uid: AtomicU64,
    state_dir: PathBuf,
    work: PathBuf,
    client: Client,
    deadline: Instant,
}

const FILE_NS: &str = "soak-file";
const CLUSTER_NS: &str = "soak-cluster";
const ROTATING: &str = "rotating";
const UID_PREFIX: &[u8] = b"\"uid\":\"00000000-0000-4000-8000-";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    ensure!(
        args.rate > 0 && args.connections > 0,
        "--rate and --connections must be positive"
    );
    let (work, outfit) = args.places.resolve("outfit-soak")?;
    let plane = ControlPlane::start_or_reuse(args.places.state_dir.as_deref(), &work, 0)?;
    let result = soak(args, &outfit, plane.state_dir.clone(), work.clone()).await;
    plane.stop();
    println!(
        "work directory (outfit.log, certificates, policies): {}",
        work.display()
    );
    match result {
        Ok(true) => Ok(()),
        Ok(false) => bail!("the soak found failures (above)"),
        Err(error) => Err(error),
    }
}

fn free_port() -> Result<SocketAddr> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?)
}

fn poddefault_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1alpha1", "PodDefault"),
        "poddefaults",
    )
}

fn poddefault(name: &str, namespace: &str, label: &str, env_name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "desc": format!("soak {name}"),
            "selector": {"matchLabels": {label: "true"}},
            "env": [{"name": env_name, "value": value}]
        }
    })
}

/// Writes the changing policy file atomically (a temporary file renamed over it).
fn write_file_policy(dir: &Path, generation: u64) -> Result<()> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FILE_NS}},
        poddefault(ROTATING, FILE_NS, FILE_NS, "SOAK_FILE", &format!("gen-{generation}")),
    ]});
    let tmp = dir.join(".soak-file.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&list)?)?;
    std::fs::rename(&tmp, dir.join("soak-file.json"))?;
    Ok(())
}

/// A Secret-volume-like directory: `..<n>/tls.{crt,key}`, `..data -> ..<n>`, `tls.crt ->
/// ..data/tls.crt`. Returns the new leaf's DER.
fn install_leaf(tls_dir: &Path, ca_key_pem: &str, generation: u64) -> Result<CertificateDer<'static>> {
    let (cert, key) = outfit_server::tls::issue_leaf_with_ca_pem(ca_key_pem, &[])?;
    let gen_dir = format!("..{generation}");
    std::fs::create_dir_all(tls_dir.join(&gen_dir))?;
    std::fs::write(tls_dir.join(&gen_dir).join("tls.crt"), &cert)?;
    std::fs::write(tls_dir.join(&gen_dir).join("tls.key"), &key)?;
    let tmp = tls_dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&gen_dir, &tmp)?;
    std::fs::rename(&tmp, tls_dir.join("..data"))?;
    for name in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(tls_dir.join(name)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), tls_dir.join(name))?;
        }
    }
    if generation > 1 {
        let _ = std::fs::remove_dir_all(tls_dir.join(format!("..{}", generation - 1)));
    }
    Ok(CertificateDer::from_pem_slice(cert.as_bytes())?)
}

async fn soak(args: Args, outfit: &Path, state_dir: PathBuf, work: PathBuf) -> Result<bool> {
    // Certificates: a CA, and the serving pair in a Secret-volume-like directory.
    let ca = SelfSigned::ensure(&work.join("ca"), &[])?;
    let ca_key_pem = std::fs::read_to_string(&ca.ca_key)?;
    let tls_dir = work.join("tls");
    let _ = std::fs::remove_dir_all(&tls_dir);
    std::fs::create_dir_all(&tls_dir)?;
    install_leaf(&tls_dir, &ca_key_pem, 1)?;
    // Policies in files: the mix's PodDefaults and the changing one.
    let policy_dir = work.join("policies");
    let _ = std::fs::remove_dir_all(&policy_dir);
    mix::generate_policies(&policy_dir, args.policies, args.namespaces)?;
    write_file_policy(&policy_dir, 0)?;

    // The cluster: outfit's CRDs, a namespace, static PodDefaults.
    let kubeconfig = state_dir.join("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = Client::try_from(config)?;
    install_crds(&client, outfit).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": CLUSTER_NS}}))?,
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error.into()),
    }
    let pds: Api<DynamicObject> = Api::namespaced_with(client.clone(), CLUSTER_NS, &poddefault_resource());
    for i in 0..args.cluster_policies {
        let pd = poddefault(
            &format!("static-{i}"),
            CLUSTER_NS,
            &format!("static-{i}"),
            &format!("STATIC_{i}"),
            "x",
        );
        match pds
            .create(&PostParams::default(), &serde_json::from_value(pd)?)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    let _ = pds.delete(ROTATING, &DeleteParams::default()).await;

    // outfit serve.
    let webhook = free_port()?;
    let admin = free_port()?;
    let log = std::fs::File::create(work.join("outfit.log"))?;
    let mut child = Command::new(outfit)
        .arg("serve")
        .arg("--from-cluster")
        // Registered nowhere: the soak sends the reviews itself.
        .arg("--no-manage-webhook")
        .arg("--policies")
        .arg(&policy_dir)
        .arg("--tls-cert")
        .arg(tls_dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(tls_dir.join("tls.key"))
        .arg("--listen")
        .arg(webhook.to_string())
        .arg("--admin-listen")
        .arg(admin.to_string())
        .arg("--poll-interval")
        .arg(args.poll_interval.to_string())
        .env("KUBECONFIG", &kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context("starting outfit serve")?;
    let pid = child.id();
    let outcome = async {
        wait_ready(admin, &mut child).await?;
        let bodies = mix::review_mix(args.namespaces, args.policies.div_ceil(args.namespaces.max(1)));
        let mut templates = Vec::new();
        let mut objects = Vec::new();
        let mut creates = Vec::new();
        for body in &bodies {
            let at = find(body, UID_PREFIX).context("no uid in a mix body")? + UID_PREFIX.len();
            templates.push((body.slice(..at), body.slice(at + 12..)));
            let review: Value = serde_json::from_slice(body)?;
            objects.push(review["request"]["object"].clone());
            creates.push(review["request"]["operation"] == "CREATE");
        }
        let minutes = Duration::from_secs_f64(args.minutes * 60.0);
        let soak = Arc::new(Soak {
            tls: tls_client_config(&ca.ca_cert)?,
            templates,
            objects,
            creates,
            baseline: Mutex::new(Vec::new()),
            uid: AtomicU64::new(1),
            stats: Stats::default(),
            file_policy: Expectation::default(),
            cluster_policy: Expectation::default(),
            api_down: AtomicBool::new(false),
            webhook,
            admin,
            state_dir: state_dir.clone(),
            work: work.clone(),
            client: client.clone(),
            deadline: Instant::now() + minutes,
            args,
        });
        soak.file_policy.push(Expected::Value(Some("gen-0".into())));
        soak.cluster_policy.push(Expected::Value(None));
        baseline(&soak).await?;
        run(soak.clone(), pid, &tls_dir, &ca_key_pem, &policy_dir).await
    }
    .await;
    // SIGTERM, then wait for a clean exit.
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let exit = tokio::task::spawn_blocking(move || {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > until {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await?;
    println!("outfit serve exit after SIGTERM: {exit:?}");
    let ok = outcome?;
    Ok(ok && exit.is_some_and(|s| s.success()))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn install_crds(client: &Client, outfit: &Path) -> Result<()> {
    let output = Command::new(outfit)
        .args(["manifests", "--webhook-url", "https://127.0.0.1:1/unused"])
        .output()?;
    ensure!(output.status.success(), "outfit manifests failed");
    let documents = outfit_core::document::parse_stream(&String::from_utf8(output.stdout)?, "manifests")?;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut names = Vec::new();
    for document in documents
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
    {
        let object: DynamicObject = serde_json::from_value(document.value.clone())?;
        names.push(
            document.value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        match crds.create(&PostParams::default(), &object).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    for name in names {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let crd = serde_json::to_value(crds.get(&name).await?)?;
            let established = crd["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                break;
            }
            ensure!(Instant::now() < until, "CRD {name} never became Established");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A GET on the admin port: (status, body).
async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let answer = Call::new("GET", path).send(addr, Duration::from_secs(5)).await?;
    Ok((answer.status, answer.text()))
}

async fn wait_ready(admin: SocketAddr, child: &mut Child) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("outfit serve exited during start-up: {status}");
        }
        if matches!(http_get(admin, "/readyz").await, Ok((200, _))) {
            return Ok(());
        }
        ensure!(Instant::now() < until, "outfit serve not ready after 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

type Sender = http1::SendRequest<Full<Bytes>>;

/// A new connection, and the leaf certificate the server presented.
async fn connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Result<(Sender, CertificateDer<'static>)> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(config.clone())
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .cloned()
        .context("no peer certificate")?;
    let (sender, connection) = http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok((sender, leaf))
}

/// Sends one review and returns the decoded `response`, checked for HTTP 200, the uid and
/// `allowed: true`.
async fn review(sender: &mut Sender, body: Bytes, uid: &str) -> Result<Value> {
    sender.ready().await?;
    let request = Request::post("/mutate?timeout=10s")
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(body))?;
    let response = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .context("no answer within 10 s")??;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    ensure!(status == 200, "HTTP {status}: {}", String::from_utf8_lossy(&body));
    let mut review: Value = serde_json::from_slice(&body).context("answer is not JSON")?;
    let response = review["response"].take();
    ensure!(
        response["uid"] == uid,
        "uid {} answered for {uid}",
        response["uid"]
    );
    ensure!(response["allowed"] == true, "not allowed: {response}");
    Ok(response)
}

/// The object after the answer's patch (`None` when there is none).
fn patched(response: &Value, object: &Value) -> Result<Option<Value>> {
    let Some(patch) = response["patch"].as_str() else {
        return Ok(None);
    };
    ensure!(
        response["patchType"] == "JSONPatch",
        "patchType {}",
        response["patchType"]
    );
    let ops: Value = serde_json::from_slice(&base64_decode(patch)?).context("patch is not JSON")?;
    let mut object = object.clone();
    apply_patch(&mut object, &ops)?;
    Ok(Some(object))
}

fn base64_decode(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => bail!("invalid base64 byte {c}"),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Ok(out)
}

/// RFC 6902 `add`, `remove`, `replace` and `test`: all outfit emits.
fn apply_patch(doc: &mut Value, ops: &Value) -> Result<()> {
    for op in ops.as_array().context("patch is not an array")? {
        let path = op["path"].as_str().context("op without path")?;
        let tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let kind = op["op"].as_str().unwrap_or_default();
        let Some((last, parents)) = tokens.split_last() else {
            ensure!(kind == "replace" || kind == "add", "{kind} of the root");
            *doc = op["value"].clone();
            continue;
        };
        let mut parent = &mut *doc;
        for token in parents {
            parent = match parent {
                Value::Object(map) => map.get_mut(token.as_str()),
                Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
                _ => None,
            }
            .with_context(|| format!("{path}: no {token}"))?;
        }
        match (kind, parent) {
            ("add", Value::Object(map)) => {
                map.insert(last.clone(), op["value"].clone());
            }
            ("add", Value::Array(items)) => {
                let at = if last == "-" { items.len() } else { last.parse()? };
                ensure!(at <= items.len(), "{path}: index out of range");
                items.insert(at, op["value"].clone());
            }
            ("remove", Value::Object(map)) => {
                map.shift_remove(last.as_str())
                    .with_context(|| format!("{path}: nothing to remove"))?;
            }
            ("remove", Value::Array(items)) => {
                let at: usize = last.parse()?;
                ensure!(at < items.len(), "{path}: index out of range");
                items.remove(at);
            }
            ("replace", Value::Object(map)) => {
                let slot = map
                    .get_mut(last.as_str())
                    .with_context(|| format!("{path}: nothing to replace"))?;
                *slot = op["value"].clone();
            }
            ("replace", Value::Array(items)) => {
                let slot = items
                    .get_mut(last.parse::<usize>()?)
                    .with_context(|| format!("{path}: index out of range"))?;
                *slot = op["value"].clone();
            }
            ("test", _) => {}
            (kind, _) => bail!("{path}: unsupported op {kind} or parent"),
        }
    }
    Ok(())
}

fn next_body(soak: &Soak, index: usize) -> (Bytes, String) {
    let n = soak.uid.fetch_add(1, Ordering::Relaxed) % 1_000_000_000_000;
    let digits = format!("{n:012}");
    let (prefix, suffix) = &soak.templates[index];
    let mut body = Vec::with_capacity(prefix.len() + 12 + suffix.len());
    body.extend_from_slice(prefix);
    body.extend_from_slice(digits.as_bytes());
    body.extend_from_slice(suffix);
    (Bytes::from(body), format!("00000000-0000-4000-8000-{digits}"))
}

/// Sends every review of the mix once, before any fault, and keeps the patched objects: the mix's
/// policies never change, so every later answer must give the same. Checks that each pod CREATE
/// got the env variable of each PodDefault it opts in to.
async fn baseline(soak: &Soak) -> Result<()> {
    let (mut sender, _) = connect(soak.webhook, &soak.tls).await?;
    let mut baseline = Vec::new();
    let mut mutated = 0;
    for (i, object) in soak.objects.iter().enumerate() {
        let (body, uid) = next_body(soak, i);
        let response = review(&mut sender, body, &uid).await?;
        let after = patched(&response, object)?;
        let labels = object["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let is_create_pod = object["kind"] == "Pod" && soak.creates[i];
        for label in labels.keys().filter(|l| l.starts_with("pd-")) {
            if !is_create_pod {
                continue;
            }
            let want = format!("PD_{}_ENDPOINT", &label[3..]);
            let has = after.as_ref().is_some_and(|o| {
                o["spec"]["containers"][0]["env"]
                    .as_array()
                    .is_some_and(|env| env.iter().any(|e| e["name"] == want.as_str()))
            });
            ensure!(has, "review {i}: the pod opts in to {label} but got no {want}");
        }
        mutated += usize::from(after.is_some());
        baseline.push(after);
    }
    println!("baseline: {} reviews, {mutated} mutated", baseline.len());
    *soak.baseline.lock().unwrap_or_else(PoisonError::into_inner) = baseline;
    Ok(())
}

async fn run(soak: Arc<Soak>, pid: u32, tls_dir: &Path, ca_key_pem: &str, policy_dir: &Path) -> Result<bool> {
    let stop = CancellationToken::new();
    let rss = Arc::new(Mutex::new(Vec::<(f64, u64)>::new()));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..soak.args.connections {
        tasks.spawn(load(soak.clone(), c, stop.clone()));
    }
    tasks.spawn(probe(soak.clone(), stop.clone()));
    tasks.spawn(change_policies(
        soak.clone(),
        policy_dir.to_path_buf(),
        stop.clone(),
    ));
    tasks.spawn(rotate(
        soak.clone(),
        tls_dir.to_path_buf(),
        ca_key_pem.to_owned(),
        stop.clone(),
    ));
    tasks.spawn(outages(soak.clone(), stop.clone()));
    tasks.spawn(sample_rss(soak.clone(), pid, rss.clone(), started, stop.clone()));
    tokio::time::sleep_until(soak.deadline.into()).await;
    stop.cancel();
    while let Some(joined) = tasks.join_next().await {
        if let Err(error) = joined? {
            soak.stats.fail(format!("task failed: {error:#}"));
        }
    }
    let elapsed = started.elapsed();
    // Quiet period, then the final comparisons.
    tokio::time::sleep(Duration::from_secs_f64(soak.args.window)).await;
    let final_ok = final_checks(&soak).await?;
    report(
        &soak,
        elapsed,
        &rss.lock().unwrap_or_else(PoisonError::into_inner),
        final_ok,
    )
}

/// One connection of the mix: `rate / connections` requests per second, open loop.
async fn load(soak: Arc<Soak>, c: u32, stop: CancellationToken) -> Result<()> {
    let per_second = f64::from(soak.args.rate) / f64::from(soak.args.connections);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    let mut sender: Option<Sender> = None;
    let mut on_connection = 0;
    let mut index = (c as usize * 37) % soak.templates.len();
    let mut latencies = Vec::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        if sender.is_none() || on_connection >= soak.args.requests_per_connection {
            match connect(soak.webhook, &soak.tls).await {
                Ok((s, _)) => {
                    sender = Some(s);
                    on_connection = 0;
                    soak.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    soak.stats.requests.fetch_add(1, Ordering::Relaxed);
                    soak.stats.fail(format!("connect: {error:#}"));
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        index = (index + 1) % soak.templates.len();
        let (body, uid) = next_body(&soak, index);
        let sent = Instant::now();
        let result = review(s, body, &uid).await;
        latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
        soak.stats.requests.fetch_add(1, Ordering::Relaxed);
        on_connection += 1;
        let checked = result.and_then(|response| {
            let after = patched(&response, &soak.objects[index])?;
            let baseline = soak.baseline.lock().unwrap_or_else(PoisonError::into_inner);
            ensure!(
                after == baseline[index],
                "review {index}: the patched object differs from the baseline"
            );
            Ok(())
        });
        if let Err(error) = checked {
            soak.stats.fail(format!("uid {uid}: {error:#}"));
            sender = None;
        }
    }
    soak.stats
        .latencies_us
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(latencies);
    Ok(())
}

fn probe_body(uid: &str, namespace: &str, label: &str) -> Bytes {
    let review = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "probe", "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "soak"},
            "object": probe_pod(namespace, label), "dryRun": false
        }
    });
    Bytes::from(serde_json::to_vec(&review).unwrap_or_default())
}

fn probe_pod(namespace: &str, label: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace, "labels": {label: "true"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    })
}

/// The value of env variable `name` in the patched probe pod.
fn env_in(after: Option<&Value>, name: &str) -> Option<String> {
    after?["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}

/// Sends a probe of each changing policy and returns the values seen.
async fn probe_once(soak: &Soak, sender: &mut Sender) -> Result<[(Option<String>, Instant); 2]> {
    let mut seen = Vec::new();
    for (namespace, env) in [(FILE_NS, "SOAK_FILE"), (CLUSTER_NS, "SOAK_CLUSTER")] {
        let uid = format!("probe-{}", soak.uid.fetch_add(1, Ordering::Relaxed));
        let response = review(sender, probe_body(&uid, namespace, namespace), &uid).await?;
        let after = patched(&response, &probe_pod(namespace, namespace))?;
        seen.push((env_in(after.as_ref(), env), Instant::now()));
    }
    let [file, cluster]: [(Option<String>, Instant); 2] =
        seen.try_into().map_err(|_| anyhow::anyhow!("two probes"))?;
    Ok([file, cluster])
}

async fn probe(soak: Arc<Soak>, stop: CancellationToken) -> Result<()> {
    let window = Duration::from_secs_f64(soak.args.window);
    let mut sender: Option<Sender> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while !stop.is_cancelled() {
        tick.tick().await;
        if sender.is_none() {
            match connect(soak.webhook, &soak.tls).await {
                Ok((s, _)) => sender = Some(s),
                Err(error) => {
                    soak.stats.fail(format!("probe connect: {error:#}"));
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        soak.stats.probes.fetch_add(2, Ordering::Relaxed);
        soak.stats.requests.fetch_add(2, Ordering::Relaxed);
        match probe_once(&soak, s).await {
            Ok([(file, file_at), (cluster, cluster_at)]) => {
                for (name, expectation, seen, at) in [
                    ("file", &soak.file_policy, file, file_at),
                    ("cluster", &soak.cluster_policy, cluster, cluster_at),
                ] {
                    if !expectation.check(&seen, at, window) {
                        soak.stats.violations.fetch_add(1, Ordering::Relaxed);
                        let restarted = *soak
                            .stats
                            .last_restart
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        if restarted.is_some_and(|r| at.duration_since(r) < Duration::from_secs(60)) {
                            soak.stats.violations_after_outage.fetch_add(1, Ordering::Relaxed);
                        }
                        soak.stats.note(format!(
                            "{name} policy: probe saw {seen:?} at {:.1} s before the end, expected {:?} (or a value in force within {window:?})",
                            soak.deadline.saturating_duration_since(at).as_secs_f64(),
                            expectation.current()
                        ));
                    }
                }
            }
            Err(error) => {
                soak.stats.fail(format!("probe: {error:#}"));
                sender = None;
            }
        }
    }
    Ok(())
}

async fn change_policies(soak: Arc<Soak>, policy_dir: PathBuf, stop: CancellationToken) -> Result<()> {
    let pds: Api<DynamicObject> =
        Api::namespaced_with(soak.client.clone(), CLUSTER_NS, &poddefault_resource());
    let mut tick = tokio::time::interval(Duration::from_secs_f64(soak.args.policy_every));
    tick.tick().await;
    let mut generation = 0u64;
    let mut patches = 0;
    // Whether the rotating PodDefault exists (`None`: unknown after a failed call).
    let mut present = Some(false);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        // Stop changing a little before the end so the last change can be checked.
        if soak.deadline.saturating_duration_since(Instant::now()) < Duration::from_secs_f64(soak.args.window)
        {
            continue;
        }
        generation += 1;
        let value = format!("gen-{generation}");
        soak.file_policy.push(Expected::Value(Some(value.clone())));
        write_file_policy(&policy_dir, generation)?;
        soak.stats.file_changes.fetch_add(1, Ordering::Relaxed);
        if soak.api_down.load(Ordering::Relaxed) {
            continue;
        }
        if present.is_none() {
            // Learn the state after a failed call.
            match pds.get_opt(ROTATING).await {
                Ok(found) => {
                    let value = found
                        .as_ref()
                        .and_then(|pd| pd.data["spec"]["env"][0]["value"].as_str().map(str::to_owned));
                    present = Some(found.is_some());
                    soak.cluster_policy.push(Expected::Value(value));
                }
                Err(_) => continue,
            }
        }
        let result = match present {
            Some(false) => {
                soak.cluster_policy.push(Expected::Value(Some(value.clone())));
                let pd = poddefault(ROTATING, CLUSTER_NS, CLUSTER_NS, "SOAK_CLUSTER", &value);
                patches = 0;
                pds.create(&PostParams::default(), &serde_json::from_value(pd)?)
                    .await
                    .map(|_| Some(true))
            }
            _ if patches < 2 => {
                soak.cluster_policy.push(Expected::Value(Some(value.clone())));
                patches += 1;
                let patch = json!({"spec": {"env": [{"name": "SOAK_CLUSTER", "value": value}]}});
                pds.patch(ROTATING, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| Some(true))
            }
            _ => {
                soak.cluster_policy.push(Expected::Value(None));
                pds.delete(ROTATING, &DeleteParams::default())
                    .await
                    .map(|_| Some(false))
            }
        };
        match result {
            Ok(now) => {
                present = now;
                soak.stats.cluster_changes.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                soak.cluster_policy.push(Expected::Unknown);
                present = None;
                soak.stats.cluster_change_errors.fetch_add(1, Ordering::Relaxed);
                soak.stats.note(format!(
                    "cluster change failed (not counted as a failure): {error}"
                ));
            }
        }
    }
    Ok(())
}

async fn rotate(
    soak: Arc<Soak>,
    tls_dir: PathBuf,
    ca_key_pem: String,
    stop: CancellationToken,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(soak.args.rotate_every));
    tick.tick().await;
    let mut generation = 1;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        generation += 1;
        let leaf = install_leaf(&tls_dir, &ca_key_pem, generation)?;
        let rotated = Instant::now();
        let until = rotated + Duration::from_secs_f64(soak.args.window);
        loop {
            match connect(soak.webhook, &soak.tls).await {
                Ok((_, served)) if served == leaf => {
                    soak.stats.rotations.fetch_add(1, Ordering::Relaxed);
                    soak.stats
                        .rotation_lags
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(rotated.elapsed());
                    break;
                }
                Ok(_) => {}
                Err(error) => soak
                    .stats
                    .fail(format!("handshake after rotation {generation}: {error:#}")),
            }
            if Instant::now() > until {
                soak.stats.rotation_failures.fetch_add(1, Ordering::Relaxed);
                soak.stats.note(format!(
                    "rotation {generation}: new handshakes still get the old certificate after {:?}",
                    rotated.elapsed()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// Kills kube-apiserver as a crash would and starts it again with the same command line.
async fn outages(soak: Arc<Soak>, stop: CancellationToken) -> Result<()> {
    let every = Duration::from_secs_f64(soak.args.outage_every);
    let mut next = Instant::now() + every;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(next.into()) => {}
        }
        next += every;
        // An outage must end, and the cluster be checked, before the soak does.
        let needed = Duration::from_secs_f64(soak.args.outage_seconds + 30.0);
        if soak.deadline.saturating_duration_since(Instant::now()) < needed {
            continue;
        }
        let plane = ControlPlane::at(&soak.state_dir);
        soak.api_down.store(true, Ordering::Relaxed);
        let outage = tokio::task::block_in_place(|| plane.kill_apiserver())?;
        println!(
            "outage: kube-apiserver (pid {}) killed {:.0} s before the end",
            outage.pid,
            soak.deadline
                .saturating_duration_since(outage.killed)
                .as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs_f64(soak.args.outage_seconds)).await;
        let down = outage
            .restart(&plane, &soak.work.join("kube-apiserver-restarted.log"))
            .await?;
        soak.api_down.store(false, Ordering::Relaxed);
        *soak
            .stats
            .last_restart
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        soak.stats.outages.fetch_add(1, Ordering::Relaxed);
        soak.stats
            .outage_downtimes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(down);
        println!(
            "outage: kube-apiserver ready again after {:.1} s down",
            down.as_secs_f64()
        );
    }
    Ok(())
}

async fn sample_rss(
    soak: Arc<Soak>,
    pid: u32,
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
    started: Instant,
    stop: CancellationToken,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    let mut last_print = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        if let Some(kib) = vm_rss_kib(pid) {
            samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((started.elapsed().as_secs_f64(), kib));
            if last_print.elapsed() >= Duration::from_secs(30) {
                last_print = Instant::now();
                let s = &soak.stats;
                println!(
                    "{:>4.0} s: {} requests, {} failures, {} violations, {} file + {} cluster changes, {} rotations, {} outages, RSS {} KiB",
                    started.elapsed().as_secs_f64(),
                    s.requests.load(Ordering::Relaxed),
                    s.failures.load(Ordering::Relaxed),
                    s.violations.load(Ordering::Relaxed),
                    s.file_changes.load(Ordering::Relaxed),
                    s.cluster_changes.load(Ordering::Relaxed),
                    s.rotations.load(Ordering::Relaxed),
                    s.outages.load(Ordering::Relaxed),
                    kib
                );
            }
        }
    }
    Ok(())
}

/// Prometheus text: the value of each series whose name (with labels) starts with `prefix`.
fn metric_series(metrics: &str, prefix: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// After the last change and outage: the PodDefaults outfit serves equal those in the files and
/// the cluster, and the probes show the final values.
async fn final_checks(soak: &Soak) -> Result<bool> {
    let mut ok = true;
    let all: Api<DynamicObject> = Api::all_with(soak.client.clone(), &poddefault_resource());
    let in_cluster = all.list(&ListParams::default()).await?.items.len();
    let in_files = soak.args.policies + 1;
    let (_, metrics) = http_get(soak.admin, "/metrics").await?;
    let served = metric_series(&metrics, "outfit_policies{kind=\"PodDefault\"}")
        .values()
        .copied()
        .next()
        .unwrap_or(-1.0);
    println!(
        "final: outfit_policies{{kind=\"PodDefault\"}} {served}, files {in_files} + cluster {in_cluster}"
    );
    if served != (in_files + in_cluster) as f64 {
        ok = false;
        soak.stats.note(format!(
            "final: outfit serves {served} PodDefaults, the files and the cluster hold {}",
            in_files + in_cluster
        ));
    }
    let (mut sender, _) = connect(soak.webhook, &soak.tls).await?;
    let [(file, _), (cluster, _)] = probe_once(soak, &mut sender).await?;
    for (name, seen, expected) in [
        ("file", file, soak.file_policy.current()),
        ("cluster", cluster, soak.cluster_policy.current()),
    ] {
        println!("final: {name} policy serves {seen:?}, expected {expected:?}");
        if expected != Expected::Value(seen) {
            ok = false;
            soak.stats
                .note(format!("final: the {name} policy served is not the one in force"));
        }
    }
    for prefix in [
        "outfit_admission_requests_total",
        "outfit_policy_reloads_total",
        "outfit_tls_reloads_total",
        "outfit_policies{",
    ] {
        for (series, value) in metric_series(&metrics, prefix) {
            println!("metric: {series} {value}");
        }
    }
    Ok(ok)
}

fn report(soak: &Soak, elapsed: Duration, rss: &[(f64, u64)], final_ok: bool) -> Result<bool> {
    let s = &soak.stats;
    let requests = s.requests.load(Ordering::Relaxed);
    let failures = s.failures.load(Ordering::Relaxed);
    let violations = s.violations.load(Ordering::Relaxed);
    let rotation_failures = s.rotation_failures.load(Ordering::Relaxed);
    let mut latencies = std::mem::take(&mut *s.latencies_us.lock().unwrap_or_else(PoisonError::into_inner));
    latencies.sort_unstable();
    let pct = |p: f64| -> f64 {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |us| f64::from(*us) / 1000.0)
    };
    let secs = elapsed.as_secs_f64();
    println!("\n==== soak report ====");
    println!(
        "duration {secs:.0} s; target rate {} req/s over {} connections; {requests} requests ({:.0} req/s), {} reconnects",
        soak.args.rate,
        soak.args.connections,
        requests as f64 / secs,
        s.reconnects.load(Ordering::Relaxed)
    );
    println!(
        "mix latency ms: p50 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2}",
        pct(0.5),
        pct(0.99),
        pct(0.999),
        latencies.last().map_or(0.0, |us| f64::from(*us) / 1000.0)
    );
    println!("failed or wrong answers: {failures}");
    println!(
        "probes: {}; stale answers outside the {} s window: {violations} ({} of them within 60 s of an API server restart)",
        s.probes.load(Ordering::Relaxed),
        soak.args.window,
        s.violations_after_outage.load(Ordering::Relaxed)
    );
    for (name, expectation) in [("file", &soak.file_policy), ("cluster", &soak.cluster_policy)] {
        let (mut lags, unseen) = expectation.lags();
        lags.sort_unstable();
        println!(
            "{name} policy changes seen: {} (lag p50 {:.2} s, max {:.2} s), never seen: {unseen}",
            lags.len(),
            lags.get(lags.len() / 2).map_or(0.0, Duration::as_secs_f64),
            lags.last().map_or(0.0, Duration::as_secs_f64)
        );
    }
    println!(
        "policy changes: {} file rewrites, {} cluster changes ({} failed calls)",
        s.file_changes.load(Ordering::Relaxed),
        s.cluster_changes.load(Ordering::Relaxed),
        s.cluster_change_errors.load(Ordering::Relaxed)
    );
    let lags = s.rotation_lags.lock().unwrap_or_else(PoisonError::into_inner);
    println!(
        "certificate rotations served: {} (max lag {:.2} s), not served within the window: {rotation_failures}",
        s.rotations.load(Ordering::Relaxed),
        lags.iter().max().map_or(0.0, Duration::as_secs_f64)
    );
    let downs = s.outage_downtimes.lock().unwrap_or_else(PoisonError::into_inner);
    println!(
        "API server outages: {} (down {:?} s)",
        s.outages.load(Ordering::Relaxed),
        downs
            .iter()
            .map(|d| (d.as_secs_f64() * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    let start = rss.first().map_or(0, |r| r.1);
    let (peak_at, peak) = rss.iter().fold((0.0, 0), |m, r| if r.1 > m.1 { *r } else { m });
    let end = rss.last().map_or(0, |r| r.1);
    println!(
        "outfit serve RSS: start {:.1} MiB, peak {:.1} MiB (at {peak_at:.0} s), end {:.1} MiB ({} samples)",
        start as f64 / 1024.0,
        peak as f64 / 1024.0,
        end as f64 / 1024.0,
        rss.len()
    );
    println!("final policy set equal to the cluster's and files': {final_ok}");
    let messages = s.messages.lock().unwrap_or_else(PoisonError::into_inner);
    if !messages.is_empty() {
        println!("first messages:");
        for m in messages.iter() {
            println!("  {m}");
        }
    }
    let ok = failures == 0 && violations == 0 && rotation_failures == 0 && final_ok;
    println!("result: {}", if ok { "PASS" } else { "FAIL" });
    Ok(ok)
}
