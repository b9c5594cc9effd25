//! What outfit costs a pod create, end to end through a real kube-apiserver. Run with:
//!
//! ```text
//! hack/bench-webhook-e2e.sh            # builds the release binaries, then runs this
//! ./target/release/webhook-e2e --clients 8 --seconds 20
//! ```
//!
//! It starts its own control plane (`hack/control-plane/up.sh --nodes 0`: etcd and kube-apiserver
//! only, so pods are stored and nothing else happens to them; stopped with `down.sh` at the end;
//! `--state-dir` reuses a running one), makes a namespace `webhook-e2e-<pid>` with its `default`
//! ServiceAccount, and measures the same closed-loop load in each configuration: `--clients` (8)
//! workers, each with its own `kube::Client` (the admin's token, so API Priority and Fairness
//! exempts it), create small one-container pods with distinct names back to back for `--warmup`
//! (2 s, discarded) plus `--seconds` (20 s). Each create is timed from the request to the API
//! server's answer (the stored pod). The configurations, one after the other:
//!
//! 1. **No webhook**: the API server's own admission chain only.
//! 2. **No webhook, pre-mutated pod**: the pods as `outfit mutate` with the 7 policies below makes
//!    them, created with no webhook: what storing the bigger pod costs, without the call.
//! 3. **outfit, 7 policies**: the release `outfit serve --policies DIR` (the binary next to this
//!    one, or `--outfit`) on 127.0.0.1 with a self-signed certificate, registered as the
//!    MutatingWebhookConfiguration that `outfit manifests --webhook-url --ca-file --policies`
//!    prints (failurePolicy Fail, timeoutSeconds 5), its namespaceSelector narrowed to the
//!    benchmark's namespace. The policies: the four PodDefaults of `examples/workspace` and the two
//!    Gatekeeper Assigns of `examples/gatekeeper-nfs`, moved to that namespace, and a marker
//!    PodDefault. The pods opt in to all but the s3-mount PodDefault, so six apply to every pod
//!    (env, volumes, mounts, tolerations) and one is evaluated and skipped. With `--sidecar` they
//!    opt in to s3-mount too: the set's Assign adds the NFS mount to the injected sidecar, the API
//!    server re-runs its ServiceAccount plugin (which mounts the token into the new container) and
//!    so reinvokes outfit (`outfit manifests` sets reinvocationPolicy IfNeeded). Until finding 2 of
//!    RELIABILITY.md was fixed, the second pass found the sidecar changed and denied every pod.
//! 4. **outfit, `--many-policies` (1,000) policies**: the same seven, and PodDefaults (nine in
//!    ten, in the pods' namespace, selecting a label the pods lack) and Assigns (one in ten, for
//!    other namespaces) that apply to nothing. `--many-policies 0` skips it.
//!
//! Before each outfit run, probe pods are created until one comes back with that run's marker (the
//! API server calls the new webhook). After each run, `--verify` (200) of the stored pods, spread
//! over the run, are read back: with outfit (and for the pre-mutated pod) each must carry every
//! mutation, without it none. Then
//! the namespace's pods are deleted, so that every run starts from the same store. At the end the
//! namespace and the webhook configuration are deleted. Prints a table (pods/s, p50, p99, max,
//! errors), the CPU time per create of kube-apiserver, etcd, outfit and the load generator (from
//! `/proc/<pid>/stat` over the run), and what outfit adds to a create. Exit status 1 on any failed
//! create or unmutated pod.
//! Everything listens on 127.0.0.1; the load generator shares the machine's cores with etcd,
//! kube-apiserver and outfit.

mod load;
mod webhook;

use std::{
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use k8s_openapi::api::{
    admissionregistration::v1::MutatingWebhookConfiguration,
    core::v1::{Namespace, NamespaceSpec, Pod, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use outfit_loadgen::harness;
use outfit_test_support::control_plane::ControlPlane;
use serde_json::json;

use crate::{
    load::{Run, Window},
    webhook::Outfit,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    args_override_self = true,
    about = "Pod creates per second and latency through kube-apiserver, with outfit as the mutating webhook and without"
)]
struct Args {
    /// Concurrent clients (closed loop: each sends its next create when the last is answered).
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Measured seconds per configuration.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Seconds of discarded warm-up before each measurement.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Policies of the last configuration (0: skip it).
    #[arg(long, default_value_t = 1000)]
    many_policies: usize,
    /// Stored pods read back per configuration to check their mutations.
    #[arg(long, default_value_t = 200)]
    verify: usize,
    /// Also label the pods for the s3-mount PodDefault, whose sidecar a Gatekeeper Assign then
    /// changes: outfit is reinvoked on every pod (RELIABILITY.md, fuzzing finding 2).
    #[arg(long)]
    sidecar: bool,
    #[command(flatten)]
    places: harness::Places,
}

/// One configuration's figures.
struct Measured {
    name: String,
    run: Run,
    /// CPU milliseconds per create sent (warm-up included) of each process, over the run.
    cpu: Vec<(&'static str, f64)>,
}

/// Processes whose CPU time is counted during a run.
struct Cpu(Vec<(&'static str, u32)>);

impl Cpu {
    /// utime + stime of each process, in clock ticks (USER_HZ, 100 per second on Linux).
    fn ticks(&self) -> Vec<u64> {
        self.0
            .iter()
            .map(|(_, pid)| cpu_ticks(*pid).unwrap_or(0))
            .collect()
    }

    /// CPU ms per create between `before` and now.
    fn per_create(&self, before: &[u64], creates: u64) -> Vec<(&'static str, f64)> {
        let after = self.ticks();
        self.0
            .iter()
            .zip(before.iter().zip(after))
            .map(|((name, _), (b, a))| (*name, a.saturating_sub(*b) as f64 * 10.0 / creates.max(1) as f64))
            .collect()
    }
}

/// utime + stime of process `pid` from `/proc/<pid>/stat` (fields 14 and 15).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// What every phase needs.
struct Bench<'a> {
    args: &'a Args,
    outfit: &'a Path,
    work: &'a Path,
    admin: Client,
    clients: Vec<Client>,
    namespace: String,
    hook: String,
    window: Window,
    /// kube-apiserver's and etcd's pids.
    apiserver: u32,
    etcd: u32,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("webhook-e2e: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    ensure!(
        args.clients > 0 && args.seconds > 0.0 && args.warmup >= 0.0,
        "--clients and --seconds must be positive"
    );
    let (work, outfit) = args.places.resolve("outfit-webhook-e2e")?;
    let plane = ControlPlane::start_or_reuse(args.places.state_dir.as_deref(), &work, 0)?;
    println!("load average before: {}", loadavg());
    let result = bench(&args, &plane, &outfit, &work).await;
    println!("load average after: {}", loadavg());
    plane.stop();
    println!(
        "work directory (outfit logs, policies, certificates): {}",
        work.display()
    );
    let measured = result?;
    report(&args, &measured);
    let failed: Vec<&Measured> = measured.iter().filter(|m| m.run.errors > 0).collect();
    if !failed.is_empty() {
        for m in &failed {
            eprintln!(
                "{}: {} failed creates, first: {:?}",
                m.name, m.run.errors, m.run.messages
            );
        }
        bail!("pod creates failed");
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "unknown".to_owned(), |l| l.trim().to_owned())
}

/// Sets up the namespace and clients, runs every configuration, and cleans up whatever happened.
async fn bench(args: &Args, plane: &ControlPlane, outfit: &Path, work: &Path) -> Result<Vec<Measured>> {
    let admin = plane.try_admin_client().await.context("the admin client")?;
    let mut clients = Vec::new();
    for _ in 0..args.clients {
        clients.push(plane.try_admin_client().await?);
    }
    let pid = std::process::id();
    let bench = Bench {
        args,
        outfit,
        work,
        admin,
        clients,
        namespace: format!("webhook-e2e-{pid}"),
        hook: format!("outfit-webhook-e2e-{pid}"),
        window: Window {
            warmup: Duration::from_secs_f64(args.warmup),
            measured: Duration::from_secs_f64(args.seconds),
        },
        apiserver: plane.try_env("APISERVER_PID")?.parse().context("APISERVER_PID")?,
        etcd: plane.try_env("ETCD_PID")?.parse().context("ETCD_PID")?,
    };
    make_namespace(&bench.admin, &bench.namespace).await?;
    let outcome = bench.configurations().await;
    let cleaned = cleanup(&bench.admin, &bench.namespace, &bench.hook).await;
    let measured = outcome?;
    cleaned.context("cleaning up")?;
    Ok(measured)
}

impl Bench<'_> {
    async fn configurations(&self) -> Result<Vec<Measured>> {
        let mut measured = Vec::new();
        eprintln!("webhook-e2e: no webhook");
        let cpu = self.cpu(None);
        let before = cpu.ticks();
        let run = load::run(
            &self.clients,
            &self.namespace,
            "a",
            &webhook::pod_template(self.args.sidecar)?,
            self.window,
        )
        .await?;
        let cpu = cpu.per_create(&before, run.sent);
        self.verify(&run, None).await?;
        clear_pods(&self.admin, &self.namespace).await?;
        measured.push(Measured {
            name: "no webhook".to_owned(),
            run,
            cpu,
        });
        measured.push(self.premutated().await?);
        measured.push(self.with_outfit("b", 7).await?);
        if self.args.many_policies > 0 {
            measured.push(self.with_outfit("c", self.args.many_policies).await?);
        }
        Ok(measured)
    }

    /// No webhook, but the pods created as outfit mutates them (`outfit mutate` with the 7
    /// policies): what storing the bigger pod costs, without the webhook call.
    async fn premutated(&self) -> Result<Measured> {
        let dir = self.work.join("policies-b");
        webhook::write_policies(&dir, &self.namespace, "b", 7)?;
        let template = webhook::premutated(self.outfit, &dir, &self.namespace, self.args.sidecar)?;
        eprintln!("webhook-e2e: no webhook, pods as outfit mutates them");
        let cpu = self.cpu(None);
        let before = cpu.ticks();
        let run = load::run(&self.clients, &self.namespace, "m", &template, self.window).await?;
        let cpu = cpu.per_create(&before, run.sent);
        self.verify(&run, Some("b")).await?;
        clear_pods(&self.admin, &self.namespace).await?;
        Ok(Measured {
            name: "no webhook, pre-mutated pod".to_owned(),
            run,
            cpu,
        })
    }

    /// One configuration with outfit serving `total` policies, `label` naming its pods, files and
    /// marker.
    async fn with_outfit(&self, label: &str, total: usize) -> Result<Measured> {
        let dir = self.work.join(format!("policies-{label}"));
        let count = webhook::write_policies(&dir, &self.namespace, label, total)?;
        eprintln!("webhook-e2e: outfit with {count} policies");
        let mut server = Outfit::start(self.outfit, &dir, self.work, &format!("outfit-{label}")).await?;
        webhook::register(
            &self.admin,
            self.outfit,
            &server,
            &dir,
            &self.hook,
            &self.namespace,
        )
        .await?;
        let started = Instant::now();
        webhook::wait_for_mutation(
            &self.admin,
            &self.namespace,
            &format!("probe-{label}"),
            label,
            self.args.sidecar,
        )
        .await?;
        eprintln!(
            "webhook-e2e: the API server calls outfit ({} ms after registration)",
            started.elapsed().as_millis()
        );
        let cpu = self.cpu(Some(server.pid()));
        let before = cpu.ticks();
        let run = load::run(
            &self.clients,
            &self.namespace,
            label,
            &webhook::pod_template(self.args.sidecar)?,
            self.window,
        )
        .await?;
        let cpu = cpu.per_create(&before, run.sent);
        server.check_running()?;
        self.verify(&run, Some(label)).await?;
        clear_pods(&self.admin, &self.namespace).await?;
        Ok(Measured {
            name: format!("outfit, {count} policies"),
            run,
            cpu,
        })
    }

    /// The processes to count: kube-apiserver, etcd, outfit serve (if running), this one.
    fn cpu(&self, outfit: Option<u32>) -> Cpu {
        let mut processes = vec![("kube-apiserver", self.apiserver), ("etcd", self.etcd)];
        processes.extend(outfit.map(|pid| ("outfit", pid)));
        processes.push(("load generator", std::process::id()));
        Cpu(processes)
    }

    /// Reads back up to `--verify` stored pods spread over `run`: with marker `set`, each must
    /// carry every mutation; without, none.
    async fn verify(&self, run: &Run, set: Option<&str>) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.namespace);
        let step = run.names.len().div_ceil(self.args.verify.max(1)).max(1);
        let mut bad = Vec::new();
        let mut checked = 0;
        for name in run.names.iter().step_by(step) {
            let pod = pods
                .get(name)
                .await
                .with_context(|| format!("reading back pod {name}"))?;
            checked += 1;
            match set {
                Some(set) => {
                    let missing = webhook::missing_mutations(&pod, set, self.args.sidecar);
                    if !missing.is_empty() {
                        bad.push(format!("{name} lacks {}", missing.join(", ")));
                    }
                }
                None if !webhook::untouched(&pod) => bad.push(format!("{name} was mutated")),
                None => {}
            }
        }
        ensure!(
            bad.is_empty(),
            "{} of {checked} stored pods checked are wrong: {}",
            bad.len(),
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        );
        eprintln!("webhook-e2e: {checked} stored pods checked");
        Ok(())
    }
}

/// Makes namespace `name` and its `default` ServiceAccount (without a controller manager nobody
/// else does, and the ServiceAccount admission plugin refuses pods without it).
async fn make_namespace(client: &Client, name: &str) -> Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))?;
    Api::<ServiceAccount>::namespaced(client.clone(), name)
        .create(&PostParams::default(), &account)
        .await
        .context("creating the default ServiceAccount")?;
    Ok(())
}

/// Deletes every pod of `namespace` (unscheduled pods go at once) and waits until none is left.
async fn clear_pods(client: &Client, namespace: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the run's pods")?;
    let until = Instant::now() + Duration::from_secs(120);
    while !pods.list(&ListParams::default().limit(1)).await?.items.is_empty() {
        ensure!(
            Instant::now() < until,
            "pods of {namespace} still there after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Deletes the webhook configuration, the pods, the ServiceAccount and the namespace, and
/// finalizes the namespace (there is no namespace controller to do it).
async fn cleanup(client: &Client, namespace: &str, hook: &str) -> Result<()> {
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    if configs.get_opt(hook).await?.is_some() {
        configs.delete(hook, &DeleteParams::default()).await?;
    }
    clear_pods(client, namespace).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let _ = accounts.delete("default", &DeleteParams::default()).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(namespace, &DeleteParams::default()).await?;
    if let Some(mut object) = namespaces.get_opt(namespace).await? {
        object.spec = Some(NamespaceSpec {
            finalizers: Some(Vec::new()),
        });
        namespaces
            .replace_subresource("finalize", namespace, &PostParams::default(), &object)
            .await
            .context("finalizing the namespace")?;
    }
    Ok(())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Prints the table and what each outfit configuration adds to the first (no webhook).
fn report(args: &Args, measured: &[Measured]) {
    println!();
    println!(
        "Pod creates through kube-apiserver: {} closed-loop clients, {} s measured after a {} s warm-up \
         per configuration; latency = create request to the API server's answer.",
        args.clients, args.seconds, args.warmup
    );
    println!(
        "| configuration                | creates |  pods/s |   p50    |   p99    |   max    | errors |"
    );
    println!(
        "|------------------------------|---------|---------|----------|----------|----------|--------|"
    );
    for m in measured {
        let r = &m.run;
        println!(
            "| {:<28} | {:>7} | {:>7.1} | {:>5.1} ms | {:>5.1} ms | {:>5.1} ms | {:>6} |",
            m.name,
            r.creates,
            r.throughput(),
            ms(r.percentile(50.0)),
            ms(r.percentile(99.0)),
            ms(r.max()),
            r.errors
        );
    }
    println!();
    println!("CPU time per create (ms; all creates of the run, warm-up included):");
    for m in measured {
        let parts: Vec<String> = m.cpu.iter().map(|(name, ms)| format!("{name} {ms:.2}")).collect();
        let total: f64 = m.cpu.iter().map(|(_, ms)| ms).sum();
        println!("  {}: {}; total {total:.2}", m.name, parts.join(", "));
    }
    println!();
    let (bases, outfits): (Vec<&Measured>, Vec<&Measured>) =
        measured.iter().partition(|m| m.name.starts_with("no webhook"));
    let pairs = bases
        .iter()
        .skip(1)
        .map(|m| (*m, bases[0]))
        .chain(outfits.iter().flat_map(|m| bases.iter().map(move |b| (*m, *b))));
    for (m, base) in pairs {
        println!(
            "{} vs {}: {:+.1} ms per create at p50, {:+.1} ms at p99; throughput x{:.2}",
            m.name,
            base.name,
            ms(m.run.percentile(50.0)) - ms(base.run.percentile(50.0)),
            ms(m.run.percentile(99.0)) - ms(base.run.percentile(99.0)),
            m.run.throughput() / base.run.throughput().max(f64::MIN_POSITIVE)
        );
    }
}
