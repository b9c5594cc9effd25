//! What the benchmark prints: each measurement, the CPU and memory table, the backend's API
//! requests per create, and the goals met or missed.

use std::{path::Path, time::Duration};

use anyhow::Result;
use outfit_loadgen::workspaces::{ms, percentiles, quantile, report};

use crate::{
    args::{Args, StorageStrategy},
    at_scale::{Lists, Replica},
    cluster::{Homes, Processes, Snapshot, audit_requests},
    fill::{Created, Fill},
    launch::Way,
    streams::Streams,
};

const MIB: f64 = 1024.0 * 1024.0;

/// Where the homes live, said before anything is measured.
pub(crate) fn storage(args: &Args) {
    let provisioned = |whose: &str| {
        format!(
            "each {whose}'s home a claim of class {}, whose volume the test cluster's stand-in provisioner (in this process, polling every 200 ms) makes",
            outfit_test_support::provisioner::CLASS
        )
    };
    let Some(strategy) = args.storage_strategy else {
        println!(
            "storage strategy: none given: the backend's default (nfs), and the workspaces mount no home, so none is made (--storage-strategy mounts one)"
        );
        return;
    };
    let how = match strategy {
        StorageStrategy::Nfs => {
            "each user's home a PersistentVolume (NFS) and a claim pinned to it, both written by outfit"
                .to_owned()
        }
        StorageStrategy::PerUser => provisioned("user"),
        StorageStrategy::PerWorkspace => provisioned("workspace"),
        StorageStrategy::Ephemeral => "each workspace's home an emptyDir, no claim".to_owned(),
    };
    println!(
        "storage strategy: {} ({how}); every workspace mounts its home",
        strategy.as_config()
    );
}

/// The claims left once the fill is done.
pub(crate) fn homes(args: &Args, homes: &Homes) {
    println!(
        "homes after the fill (storage strategy {}): {} claims in the namespace, {} of them Bound",
        strategy(args),
        homes.claims,
        homes.bound
    );
}

pub(crate) fn fill(args: &Args, bare: &[Duration], fill: &Fill, processes: &Processes) {
    println!(
        "fill (storage strategy {}): {} workspaces of {} users, {} creates (with churn) and {} deletes in {:.1} s: {:.1} creates/s started at --rate {}",
        strategy(args),
        args.workspaces,
        args.users,
        fill.creates.len(),
        fill.deletes.len(),
        fill.took.as_secs_f64(),
        fill.creates.len() as f64 / fill.took.as_secs_f64(),
        args.rate
    );
    let refused = crate::launch::REFUSED_BUSY.load(std::sync::atomic::Ordering::Relaxed);
    if refused > 0 {
        println!(" creates answered 429 (maxCreatesInFlight) and tried again 1 s later: {refused}");
    }
    report(" bare create to Ready (the admin, no backend)", bare);
    let ready = |keep: &dyn Fn(&Created) -> bool| -> Vec<Duration> {
        fill.creates.iter().filter(|c| keep(c)).map(|c| c.ready).collect()
    };
    let last_tenth = args.workspaces - args.workspaces / 10;
    let all = ready(&|_| true);
    let late = ready(&|c| c.index >= last_tenth);
    report(" create to ready, all through outfit", &all);
    if !all.is_empty() {
        println!(
            "  p50 / p95 / p99: {:.2} / {:.2} / {:.2} ms",
            ms(quantile(&all, 0.5)),
            ms(quantile(&all, 0.95)),
            ms(quantile(&all, 0.99))
        );
    }
    report(
        "  through create_pod + watch_create_pod",
        &ready(&|c| c.way == Way::Compat),
    );
    report(
        "  through POST /api/v1/workspaces + progress",
        &ready(&|c| c.way == Way::Native),
    );
    report(&format!("  the last tenth (workspace {last_tenth} on)"), &late);
    for (label, through) in [("all", &all), ("the last tenth", &late)] {
        if let Some([p50, p99]) = added(bare, through) {
            println!(
                " added by outfit ({label}): p50 {:.1} ms, p99 {:.1} ms",
                ms(p50),
                ms(p99)
            );
        }
    }
    report(" delete answered (churn)", &fill.deletes);
    report(" get_pods during the fill", &fill.get_pods);
    report(" GET /api/v1/workspaces during the fill", &fill.native_list);
    for failure in fill.failures.iter().take(10) {
        println!(" FAILED: {failure}");
    }
    if fill.failures.len() > 10 {
        println!(" ... and {} more failures", fill.failures.len() - 10);
    }
    table(&fill.samples, processes);
}

/// p50 and p99 of `through` less those of `bare`.
fn added(bare: &[Duration], through: &[Duration]) -> Option<[Duration; 2]> {
    if bare.is_empty() || through.is_empty() {
        return None;
    }
    let [b50, b99, _] = percentiles(bare);
    let [t50, t99, _] = percentiles(through);
    Some([t50.saturating_sub(b50), t99.saturating_sub(b99)])
}

/// The backend's RSS and every process's CPU between samples (percent of one core).
fn table(samples: &[(usize, usize, Snapshot)], processes: &Processes) {
    let names: Vec<&str> = processes.pids.iter().map(|(name, _)| *name).collect();
    println!(
        " workspaces | in flight | outfit RSS MiB | outfit CPU s | CPU % of a core: {} | load average",
        names.join(" / ")
    );
    for pair in samples.windows(2) {
        let ((_, _, before), (count, in_flight, after)) = (&pair[0], &pair[1]);
        let percent: Vec<String> = Processes::cpu_percent(before, after)
            .iter()
            .map(|p| format!("{p:.0}"))
            .collect();
        println!(
            " {count:>10} | {in_flight:>9} | {:>14.1} | {:>12.2} | {} | {}",
            after.usage[0].rss as f64 / MIB,
            after.usage[0].cpu - before.usage[0].cpu,
            percent.join(" / "),
            after.load
        );
    }
}

pub(crate) fn lists(args: &Args, lists: &Lists) {
    println!(
        "lists at {} workspaces, one keep-alive connection each, users in turn:",
        args.workspaces
    );
    report(" get_pods", &lists.get_pods);
    report(" GET /api/v1/workspaces", &lists.native);
    report(
        &format!(" GET /api/v1/workspaces?all=true ({} items)", args.workspaces),
        &lists.all,
    );
}

pub(crate) fn replica(args: &Args, replica: &Replica) {
    println!(
        "a fresh replica with {} workspaces (and their Services, Ingresses, NetworkPolicies) present: API port listening after {:.0} ms, /readyz 200 after {:.0} ms, RSS then {:.1} MiB",
        args.workspaces,
        ms(replica.listening),
        ms(replica.ready),
        replica.rss as f64 / MIB
    );
}

/// Issue 31's half stopped: the stops, the lists and a fresh replica with them stopped, the
/// starts.
pub(crate) fn stopped(
    args: &Args,
    stops: &crate::stopped::Stops,
    after: &crate::cluster::Snapshot,
    lists: &Lists,
    fresh: &Replica,
    starts: &crate::stopped::Starts,
) {
    let stopped: usize = stops.per_user.values().sum();
    println!(
        "half stopped: {stopped} workspaces stopped at {}/s, every Workspace Stopped {:.1} s after the first stop; RSS of outfit then {:.1} MiB",
        args.rate,
        stops.settled.as_secs_f64(),
        after.usage[0].rss as f64 / MIB
    );
    report(" stop answered (202)", &stops.answered);
    report(" get_pods with half stopped", &lists.get_pods);
    report(
        " GET /api/v1/workspaces with half stopped (stopped ones listed)",
        &lists.native,
    );
    report(" GET /api/v1/workspaces?all=true with half stopped", &lists.all);
    println!(
        " a fresh replica with {stopped} of them stopped: /readyz 200 after {:.0} ms, RSS then {:.1} MiB",
        ms(fresh.ready),
        fresh.rss as f64 / MIB
    );
    let started = starts.api.len() + starts.controller.len();
    println!(
        "starts: {started} stopped workspaces started at {}/s in {:.1} s ({:.1} starts/s ready)",
        args.rate,
        starts.took.as_secs_f64(),
        started as f64 / starts.took.as_secs_f64()
    );
    report(
        " start to ready through the API (POST .../start, the progress stream)",
        &starts.api,
    );
    report(
        " start to Running through the controller (spec.started patched)",
        &starts.controller,
    );
    for failure in stops.failures.iter().chain(&starts.failures).take(20) {
        println!(" FAILED: {failure}");
    }
}

pub(crate) fn streams(held: &Streams, processes: &Processes) {
    let rss = held.open.usage[0].rss as f64 / MIB;
    println!(
        "{} progress streams open at once (RSS of outfit then: {rss:.1} MiB); after the release {} ended `ready`, {} events in all, the last {:.1} s after the release",
        held.opened,
        held.ready,
        held.events,
        held.release_to_last.as_secs_f64()
    );
    let now = processes.snapshot();
    println!(
        " RSS of outfit after the streams ended: {:.1} MiB",
        now.usage[0].rss as f64 / MIB
    );
    for failure in held.failures.iter().take(10) {
        println!(" FAILED: {failure}");
    }
}

/// The backend's requests during the fill per create, and during the whole run.
pub(crate) fn requests(
    log: &Path,
    fill_marks: (u64, u64),
    run_marks: (u64, u64),
    user: &str,
    fill: &Fill,
) -> Result<()> {
    let during = audit_requests(log, fill_marks.0, fill_marks.1, user)?;
    let run = audit_requests(log, run_marks.0, run_marks.1, user)?;
    let creates = fill.creates.len().max(1) as f64;
    println!(
        "the backend's API requests (kube-apiserver's audit log, user {user}); during the fill: {} creates, {} deletes:",
        fill.creates.len(),
        fill.deletes.len()
    );
    println!(
        " {:<40} | {:>8} | {:>10} | {:>8}",
        "verb resource", "fill", "per create", "whole run"
    );
    let keys: std::collections::BTreeSet<&String> = during.keys().chain(run.keys()).collect();
    for key in keys {
        let n = during.get(key).copied().unwrap_or(0);
        println!(
            " {key:<40} | {n:>8} | {:>10.2} | {:>8}",
            n as f64 / creates,
            run.get(key).copied().unwrap_or(0)
        );
    }
    let total: usize = during.values().sum();
    println!(
        " all: {total} during the fill, {:.2} per create",
        total as f64 / creates
    );
    Ok(())
}

/// The goals, each met or missed.
pub(crate) fn goals(
    bare: &[Duration],
    fill: &Fill,
    lists: &Lists,
    replica: &Replica,
    held: Option<&Streams>,
    processes: &Processes,
) {
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    let p99 = |s: &[Duration]| {
        if s.is_empty() {
            Duration::MAX
        } else {
            percentiles(s)[1]
        }
    };
    let list = p99(&lists.get_pods).max(p99(&lists.native));
    println!("goals:");
    println!(
        " list p99 < 5 ms: {:.2} ms, {}",
        ms(list),
        verdict(list < Duration::from_millis(5))
    );
    let all: Vec<Duration> = fill.creates.iter().map(|c| c.ready).collect();
    if let Some([_, added99]) = added(bare, &all) {
        println!(
            " added create-to-ready p99 < 100 ms: {:.1} ms, {}",
            ms(added99),
            verdict(added99 < Duration::from_millis(100))
        );
    }
    let peak = fill
        .samples
        .iter()
        .map(|(_, _, s)| s.usage[0].rss)
        .chain(held.map(|h| h.open.usage[0].rss))
        .chain([processes.snapshot().usage[0].rss])
        .max()
        .unwrap_or(0);
    println!(
        " RSS < 300 MiB: peak seen {:.1} MiB, {}",
        peak as f64 / MIB,
        verdict(peak < 300 * 1024 * 1024)
    );
    println!(
        " fresh replica ready < 10 s: {:.2} s, {}",
        replica.ready.as_secs_f64(),
        verdict(replica.ready < Duration::from_secs(10))
    );
}

/// `--storage-strategy` as the report names it.
fn strategy(args: &Args) -> &'static str {
    args.storage_strategy
        .map_or("none given, no home", StorageStrategy::as_config)
}
