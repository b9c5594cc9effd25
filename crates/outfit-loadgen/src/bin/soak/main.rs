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

mod args;
mod certs;
mod cluster;
mod load;
mod policies;
mod report;
mod review;
mod shared;
mod webhook;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use outfit_loadgen::mix;
use outfit_server::SelfSigned;
use outfit_test_support::{control_plane::ControlPlane, http::tls_client_config};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::{
    args::Args,
    certs::{install_leaf, rotate},
    cluster::{install_crds, outages},
    load::{baseline, load, probe},
    policies::{change_policies, poddefault, poddefault_resource, write_file_policy},
    report::{final_checks, report, sample_rss},
    review::find,
    shared::{CLUSTER_NS, Expectation, Expected, ROTATING, Soak, Stats, UID_PREFIX},
    webhook::wait_ready,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Sets the soak up (certificates, policy files, the cluster's CRDs and PodDefaults, `outfit serve`
/// and the baseline pass), runs it, and stops `outfit serve`: whether everything passed.
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
    let (mut child, webhook, admin) = webhook::start(
        outfit,
        &work,
        &policy_dir,
        &tls_dir,
        &kubeconfig,
        args.poll_interval,
    )?;
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
    let exit = webhook::stop(child).await?;
    let ok = outcome?;
    Ok(ok && exit.is_some_and(|s| s.success()))
}

/// Every task at once until the deadline, then a quiet `--window`, the final checks and the report.
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
