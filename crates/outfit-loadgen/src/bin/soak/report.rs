//! The RSS samples, the final checks against the admin port and the cluster, and the report.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::Result;
use kube::{
    Api,
    api::{DynamicObject, ListParams},
};
use outfit_test_support::control_plane::vm_rss_kib;
use tokio_util::sync::CancellationToken;

use crate::{
    load::probe_once,
    policies::poddefault_resource,
    review::connect,
    shared::{Expected, Soak},
    webhook::http_get,
};

pub(crate) async fn sample_rss(
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
pub(crate) async fn final_checks(soak: &Soak) -> Result<bool> {
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

pub(crate) fn report(soak: &Soak, elapsed: Duration, rss: &[(f64, u64)], final_ok: bool) -> Result<bool> {
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
