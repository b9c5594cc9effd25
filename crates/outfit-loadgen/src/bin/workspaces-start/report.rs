//! What the benchmark prints: the model, then one row per arm.

use std::time::Duration;

use anyhow::Result;
use outfit_test_support::{
    control_plane::ControlPlane,
    kubelet::{PAUSE_IMAGE, Percentiles},
};

use crate::{
    args::{Args, Arm},
    arm::{Measured, Outcome},
    trace::{self, NEW_IMAGE_AT, NODES_ADDED_AT},
};

/// The model and the trace, said before anything runs.
pub(crate) fn model(args: &Args) {
    let sizes: Vec<String> = (0..args.entries)
        .map(|i| format!("{} {:.2} GB", trace::entry(i), trace::size(args, i) as f64 / 1e9))
        .collect();
    if args.real_node {
        let plane = ControlPlane::at(&args.cluster.state_dir);
        let rate = plane.env("REGISTRY_PULL_MBPS");
        let rate = if rate.is_empty() {
            "no limit".to_owned()
        } else {
            format!("{rate} MB/s in all")
        };
        println!(
            "real node: the cluster's ({}), its pulls from its registry at {rate}, none of the catalogue's images on it at each arm's start; no nodes added",
            plane.env("REAL_NODE_NAMES")
        );
    } else {
        println!(
            "model: {} nodes (+{} at {:.0} % of the trace), each {} MB/s shared by its pulls at once, {} ms per pull, only {PAUSE_IMAGE} on a node at first",
            args.nodes,
            args.add_nodes,
            NODES_ADDED_AT * 100.0,
            args.bandwidth,
            args.latency_ms,
        );
    }
    println!(
        "catalogue: {} entries, launched Zipf-like (e0 most), the last one a new image launched from {:.0} % of the trace: {}",
        args.entries,
        NEW_IMAGE_AT * 100.0,
        sizes.join(", ")
    );
    println!(
        "trace: {} launches of {} users over {} s, the rate rising linearly from 0 (a morning ramp), after a {} s warm-up; timeoutCreate {} s; seed {}",
        args.launches, args.users, args.seconds, args.warm_up, args.timeout_create, args.seed
    );
}

fn secs(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

/// One row per arm (an arm that could not run says why).
pub(crate) fn table(args: &Args, rows: &[(Arm, Result<Measured>)]) {
    println!(
        "\n| arm | launches | p50 / p95 / p99 to ready (s) | waited for a pull | past timeoutCreate | other failures | pulls ahead overlapping a start | pulls (ahead) | GB pulled |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (arm, measured) in rows {
        let Ok(measured) = measured else {
            println!("| {} | could not run | | | | | | | |", arm.name());
            continue;
        };
        let times: Vec<Duration> = measured
            .outcomes
            .iter()
            .filter_map(|o| match o {
                Outcome::Ready(d) | Outcome::Failed(d) => Some(*d),
                Outcome::Error => None,
            })
            .collect();
        let past = measured
            .outcomes
            .iter()
            .filter(
                |o| matches!(o, Outcome::Failed(d) if *d + Duration::from_secs(1) >= args.timeout_create()),
            )
            .count();
        let failed = measured
            .outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Failed(_) | Outcome::Error))
            .count()
            - past;
        let quantiles = Percentiles::of(times).map_or_else(
            || "-".to_owned(),
            |p| format!("{} / {} / {}", secs(p.p50), secs(p.p95), secs(p.p99)),
        );
        let records = &measured.records;
        let waited = records
            .waited_share()
            .map_or_else(|| "-".to_owned(), |s| format!("{:.0} %", s * 100.0));
        let ahead = records.pulls.iter().filter(|p| p.ahead()).count();
        let bytes: u64 = records
            .pulls
            .iter()
            .filter(|p| p.finished.is_some())
            .map(|p| p.bytes)
            .sum();
        println!(
            "| {} | {} | {quantiles} | {waited} | {past} | {failed} | {} | {} ({ahead}) | {:.2} |",
            arm.name(),
            measured.outcomes.len(),
            records.overlapping_pulls(),
            records.pulls.len(),
            bytes as f64 / 1e9,
        );
    }
    for (arm, measured) in rows {
        if let Ok(measured) = measured
            && let Some(p) = measured.records.bound_to_ready()
        {
            println!(
                "{}: {} bound-to-ready of the workspaces' pods: p50 {} s, p95 {} s, p99 {} s (n = {})",
                arm.name(),
                if args.real_node {
                    "the kubelet's"
                } else {
                    "the stand-in's"
                },
                secs(p.p50),
                secs(p.p95),
                secs(p.p99),
                p.count
            );
        }
    }
}
