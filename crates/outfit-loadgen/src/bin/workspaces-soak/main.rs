//! A bounded soak of `outfit workspaces` through kube-apiserver outages. Run with:
//!
//! ```text
//! cargo build --release -p outfit -p outfit-loadgen
//! ./target/release/workspaces-soak --minutes 10
//! ```
//!
//! It starts its own control plane with simulated nodes (`hack/control-plane/up.sh --nodes 1`,
//! stopped at the end; `--state-dir` reuses a running one), a namespace of its own, a loopback
//! server of the manifest (an nginx pod with an http Ingress and the user's NFS storage), and the
//! `--replicas` replicas of the release `outfit workspaces` (one leads: it finishes starts and
//! culls) with the manifest in their catalogue and `maxWorkspacesPerUser: --max-per-user`. Then,
//! for `--minutes`, all at once:
//!
//! - **Users**: `--users` service accounts (their tokens checked by TokenReview like anyone's)
//!   each launch (`POST /api/v1/workspaces`) and delete (`DELETE /api/v1/workspaces/<name>`) in
//!   a loop, each request to the next replica in turn: every third launch is deleted at once,
//!   while its pod is still being made; every fourth is of a brief workspace (lifetime
//!   [`cluster::BRIEF_LIFETIME`]) left for the leader to cull; the others are deleted once `GET`
//!   shows them ready. A delete that fails is retried until it is answered 2xx or 404, as a user
//!   would.
//! - **API server outages** every `--outage-every` seconds: kube-apiserver is killed (SIGKILL,
//!   etcd keeps the data), left down `--outage-seconds`, and started again with the same command
//!   line.
//! - **Replica kills** every `--replica-kill-every` seconds: one replica (the leader first, then
//!   follower and leader in turn) is killed (SIGKILL) and started again `--replica-down` seconds
//!   later on the same ports.
//! - **The limit**: every second, no user may have more than `--max-per-user` pods not being
//!   deleted.
//! - **RSS** of the first replica every 2 s.
//!
//! Every answer must be JSON; an error must be `{"error", "reason"}`; no request may take
//! [`http::HANG`] or find the backend gone (a killed replica's refused connections excepted). An
//! error is expected only for a request that overlaps an outage or a replica kill, or the
//! `--grace` seconds after (watches resync; a dead replica's per-user Lease expires); any other
//! is a violation. A launch refused with `LimitExceeded` is counted, not a violation. Every
//! launch a user waits for must turn ready or fail cleanly within `--ready-wait`, and every brief
//! one be culled within it after: whichever replica accepted it, whichever was killed. No
//! workspace may be culled twice (its Culled Events).
//!
//! At the end the users' workspaces left are deleted through the API, and within `--settle`
//! seconds the namespace must hold no pod, Service, Ingress, NetworkPolicy or
//! PersistentVolumeClaim, and the cluster no PersistentVolume, of the backend's (label
//! `app.kubernetes.io/managed-by=outfit-workspaces`, or anything at all in the soak's namespace):
//! anything left is an orphan, listed by kind and name. Pods the API answered an error for but
//! that exist anyway are listed too. Exit status 1 on any violation or orphan.

mod cluster;
mod http;
mod outages;
mod replicas;
mod users;

use std::{
    path::PathBuf,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::{Result, bail, ensure};
use clap::Parser;
use outfit_loadgen::harness::{self, AdminPort, Backend};
use outfit_test_support::control_plane::{ControlPlane, vm_rss_kib};
use tokio_util::sync::CancellationToken;

use self::{
    outages::Outages,
    replicas::{Replicas, kill_loop},
    users::{Tally, user_loop},
};

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
struct Args {
    /// Length of the create/delete loop (the final cleanup and check come after it).
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Users launching and deleting at the same time.
    #[arg(long, default_value_t = 4)]
    users: usize,
    /// Seconds between API server kills (the first after this long).
    #[arg(long, default_value_t = 120.0)]
    outage_every: f64,
    /// Seconds the API server stays down.
    #[arg(long, default_value_t = 15.0)]
    outage_seconds: f64,
    /// Replicas of the backend behind the users.
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    /// Seconds between replica kills (the first after this long; 0: none).
    #[arg(long, default_value_t = 90.0)]
    replica_kill_every: f64,
    /// Seconds a killed replica stays down.
    #[arg(long, default_value_t = 5.0)]
    replica_down: f64,
    /// `maxWorkspacesPerUser`.
    #[arg(long, default_value_t = 1)]
    max_per_user: usize,
    /// Seconds after the API server is ready again during which errors are still expected.
    #[arg(long, default_value_t = 15.0)]
    grace: f64,
    /// Seconds a launch is given to turn ready before it is deleted anyway.
    #[arg(long, default_value_t = 90.0)]
    ready_wait: f64,
    /// Seconds the cluster is given, after the last delete, to hold nothing of the backend's.
    #[arg(long, default_value_t = 180.0)]
    settle: f64,
    /// The backends' `storageGracePeriod` in seconds: how long a user's storage outlives their
    /// last workspace before the sweep removes it (the backend's default, 60, unless set).
    #[arg(long, default_value_t = 60)]
    storage_grace: u64,
    #[command(flatten)]
    places: harness::Places,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    ensure!(args.users > 0, "--users must be positive");
    ensure!(args.replicas > 0, "--replicas must be positive");
    ensure!(args.max_per_user > 0, "--max-per-user must be positive");
    let (work, outfit) = args.places.resolve("outfit-workspaces-soak")?;
    let plane = ControlPlane::start_or_reuse(args.places.state_dir.as_deref(), &work, 1)?;
    let result = soak(&args, &plane, &outfit, &work).await;
    plane.stop();
    println!("work directory (workspaces.log, config): {}", work.display());
    match result {
        Ok(true) => Ok(()),
        Ok(false) => bail!("the soak found violations or orphans (above)"),
        Err(error) => Err(error),
    }
}

async fn soak(
    args: &Args,
    plane: &ControlPlane,
    outfit: &std::path::Path,
    work: &std::path::Path,
) -> Result<bool> {
    let client = plane.try_admin_client().await?;
    harness::install_workspace_crd(&client, outfit).await?;
    let namespace = format!("soak-workspaces-{}", std::process::id());
    harness::make_namespace(&client, &namespace).await?;
    let manifests = harness::serve_manifests(cluster::manifest).await?;
    let tokens = harness::service_account_tokens(&client, &namespace, "soak", args.users).await?;
    let backends = (0..args.replicas)
        .map(|replica| {
            start_backend(
                plane,
                outfit,
                work,
                &namespace,
                manifests,
                replica,
                (args.max_per_user, args.storage_grace),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let replicas = Arc::new(Replicas::new(backends));

    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.minutes * 60.0);
    let outages = Arc::new(Outages::default());
    let stop = CancellationToken::new();
    let tally = Arc::new(Tally::default());
    let rss = tokio::spawn(sample_rss(replicas.clone(), started, stop.clone()));
    let limits = tokio::spawn(check_limits(
        client.clone(),
        namespace.clone(),
        args.max_per_user,
        tally.clone(),
        stop.clone(),
    ));
    let scheduler = tokio::spawn(keep_running(
        plane.daemon("kube-scheduler")?,
        work.join("kube-scheduler-restarted.log"),
        started,
        stop.clone(),
    ));
    let replica_killer = (args.replica_kill_every > 0.0).then(|| {
        tokio::spawn(kill_loop(
            replicas.clone(),
            started,
            Duration::from_secs_f64(args.replica_kill_every),
            Duration::from_secs_f64(args.replica_down),
            deadline,
            outages.clone(),
        ))
    });
    let killer = tokio::spawn(outage_loop(
        started,
        plane.state_dir.clone(),
        work.join("kube-apiserver-restarted.log"),
        Duration::from_secs_f64(args.outage_every),
        Duration::from_secs_f64(args.outage_seconds),
        deadline,
        outages.clone(),
    ));
    let workers: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(index, token)| {
            tokio::spawn(user_loop(users::User {
                started,
                index,
                token,
                replicas: replicas.clone(),
                deadline,
                ready_wait: Duration::from_secs_f64(args.ready_wait),
                grace: Duration::from_secs_f64(args.grace),
                outages: outages.clone(),
                tally: tally.clone(),
                sent: AtomicUsize::new(index),
            }))
        })
        .collect();
    let mut live = Vec::new();
    for worker in workers {
        live.extend(worker.await?);
    }
    let downtimes = killer.await??;
    let kills = match replica_killer {
        Some(killer) => killer.await??,
        None => Vec::new(),
    };
    let loop_time = started.elapsed();
    stop.cancel();
    limits.await?;
    println!("kube-scheduler restarts: {}", scheduler.await?);
    match cluster::culls(&client, &namespace).await {
        Ok((culls, twice)) => {
            println!("culls: {culls} (Culled Events), culled twice: {}", twice.len());
            for pod in twice {
                tally.violation(pod);
            }
        }
        Err(error) => tally.violation(format!("could not list the Culled Events: {error:#}")),
    }
    println!(
        "replica kills: {} ({} of the leader), {:.1} s down in all",
        kills.len(),
        kills.iter().filter(|k| k.leader).count(),
        kills.iter().map(|k| k.down.as_secs_f64()).sum::<f64>()
    );
    for kill in &kills {
        println!(
            "  replica {}{}: {:.1} s down",
            kill.replica,
            if kill.leader { " (leader)" } else { "" },
            kill.down.as_secs_f64()
        );
    }

    let mut ok = tally.report(loop_time, &downtimes);
    let ghosts = cluster::ghosts(&client, &namespace, &live).await?;
    if !ghosts.is_empty() {
        println!(
            "pods that exist although their launch was answered an error: {}",
            ghosts.join(", ")
        );
    }
    let cleanup = users::delete_everything(&replicas, &tally.tokens(), &outages).await;
    let orphans = cluster::wait_empty(&client, &namespace, Duration::from_secs_f64(args.settle)).await?;
    let samples = rss.await?;
    let tsv: String = samples
        .iter()
        .map(|(t, kib)| format!("{t:.1}\t{kib}\n"))
        .collect();
    std::fs::write(work.join("rss.tsv"), format!("seconds\tkib\n{tsv}"))?;
    println!(
        "Events in the namespace at the end (the backend caches them; they expire after an hour): {}",
        cluster::event_count(&client, &namespace).await.unwrap_or(0)
    );
    let alive = replicas.alive();
    drop(replicas);
    ok &= report_end(&cleanup, &orphans, &samples, alive);
    println!("{}", if ok { "PASS" } else { "FAIL" });
    if orphans.is_empty() {
        let _ = cluster::delete_namespace(&client, &namespace).await;
    }
    Ok(ok)
}

fn report_end(cleanup: &Result<usize>, orphans: &[String], rss: &[(f64, u64)], alive: bool) -> bool {
    let mut ok = alive;
    if !alive {
        println!("VIOLATION: a replica of outfit workspaces is no longer running");
    }
    match cleanup {
        Ok(count) => println!("cleanup: {count} workspaces left at the end deleted through the API"),
        Err(error) => {
            ok = false;
            println!("VIOLATION: the cleanup through the API failed: {error:#}");
        }
    }
    if orphans.is_empty() {
        println!("orphans: none (no pod, Service, Ingress, NetworkPolicy, claim or volume left)");
    } else {
        ok = false;
        println!("ORPHANS: {}", orphans.join(", "));
    }
    if let (Some(first), Some(last)) = (rss.first(), rss.last()) {
        let peak = rss.iter().map(|s| s.1).max().unwrap_or(0);
        let at = |q: usize| rss[(rss.len() - 1) * q / 4].1 as f64 / 1024.0;
        println!(
            "RSS of the first replica (restarted when killed): start {:.1} MiB, then {:.1} / {:.1} / {:.1} MiB at each quarter, \
             peak {:.1} MiB, end {:.1} MiB ({} samples)",
            first.1 as f64 / 1024.0,
            at(1),
            at(2),
            at(3),
            peak as f64 / 1024.0,
            last.1 as f64 / 1024.0,
            rss.len()
        );
    }
    ok
}

/// Starts replica `replica` of the backend with the manifest server's catalogue and an admin
/// port (its metrics say whether it leads); its log goes to `workspaces-<replica>.log`.
fn start_backend(
    plane: &ControlPlane,
    outfit: &std::path::Path,
    work: &std::path::Path,
    namespace: &str,
    manifests: u16,
    replica: usize,
    (max_per_user, storage_grace): (usize, u64),
) -> Result<Backend> {
    let pod_cidr = plane.try_env("POD_CIDR")?;
    let settings = format!(
        "namespace: {namespace}\nwhitelistManifestRegex: 'http://127\\.0\\.0\\.1:{manifests}/'\n\
         ingressDomain: pods.soak\npodSubnetCidr: {pod_cidr}\ntimeoutCreate: 2m\n\
         storageGracePeriod: {storage_grace}s\n\
         maxWorkspacesPerUser: {max_per_user}\n\
         catalogue:\n- {{name: web, url: 'http://127.0.0.1:{manifests}/web.yaml'}}\n\
         - {{name: brief, url: 'http://127.0.0.1:{manifests}/brief.yaml'}}"
    );
    Backend::start(
        outfit,
        &plane.state_dir.join("kubeconfig"),
        &work.join(format!("workspaces-{replica}.yaml")),
        &settings,
        Some((&work.join(format!("workspaces-{replica}.log")), "info")),
        AdminPort::Loopback,
    )
}

/// Starts `daemon` again whenever it exits, until `stop`; returns how many times. kube-scheduler
/// exits on its own some seconds after an API server kill ("Scheduler cache is corrupted"): in a
/// cluster its kubelet would start it again; here nothing else would, and no pod would be
/// scheduled after the first outage.
async fn keep_running(
    daemon: outfit_test_support::control_plane::Daemon,
    log: PathBuf,
    started: Instant,
    stop: CancellationToken,
) -> usize {
    let mut restarts = 0;
    loop {
        tokio::select! {
            () = stop.cancelled() => return restarts,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if daemon.running() {
            continue;
        }
        restarts += 1;
        println!(
            "{} exited; started again at t={:.0}s",
            daemon.name(),
            started.elapsed().as_secs_f64()
        );
        if let Err(error) = daemon.start_again(&log) {
            println!("{}: {error}", daemon.name());
        }
    }
}

/// Checks every second until `stop` that no user has more than `max` workspaces; a check the API
/// server cannot answer (an outage) is skipped.
async fn check_limits(
    client: kube::Client,
    namespace: String,
    max: usize,
    tally: Arc<Tally>,
    stop: CancellationToken,
) {
    let mut checks = 0u64;
    loop {
        if let Ok(over) = cluster::over_limit(&client, &namespace, max).await {
            checks += 1;
            for over in over {
                tally.violation(format!("maxWorkspacesPerUser {max} exceeded: {over}"));
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    println!("limit checks: {checks} (maxWorkspacesPerUser {max})");
}

/// Kills and restarts kube-apiserver every `every` until `deadline`; returns each downtime.
async fn outage_loop(
    started: Instant,
    state_dir: PathBuf,
    log: PathBuf,
    every: Duration,
    down: Duration,
    deadline: Instant,
    outages: Arc<Outages>,
) -> Result<Vec<Duration>> {
    let plane = ControlPlane::at(&state_dir);
    let mut downtimes = Vec::new();
    let mut next = Instant::now() + every;
    // An outage must end, and the users see the cluster again, before the loop does.
    while next + down + Duration::from_secs(30) < deadline {
        tokio::time::sleep_until(next.into()).await;
        next += every;
        let outage = tokio::task::block_in_place(|| plane.kill_apiserver())?;
        outages.begin(outage.killed);
        println!(
            "outage: kube-apiserver (pid {}) killed at t={:.0}s",
            outage.pid,
            outage.killed.duration_since(started).as_secs_f64()
        );
        tokio::time::sleep(down).await;
        let downtime = outage.restart(&plane, &log).await?;
        outages.end(Instant::now());
        println!(
            "outage: kube-apiserver ready again at t={:.0}s, after {:.1} s down",
            started.elapsed().as_secs_f64(),
            downtime.as_secs_f64()
        );
        downtimes.push(downtime);
    }
    Ok(downtimes)
}

/// Samples the first replica's RSS every 2 s until `stop`: (seconds since start, KiB).
async fn sample_rss(replicas: Arc<Replicas>, started: Instant, stop: CancellationToken) -> Vec<(f64, u64)> {
    let mut samples = Vec::new();
    loop {
        if let Some(kib) = vm_rss_kib(replicas.pids()[0]) {
            samples.push((started.elapsed().as_secs_f64(), kib));
        }
        tokio::select! {
            () = stop.cancelled() => return samples,
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}
