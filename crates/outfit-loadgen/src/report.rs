//! Figures and the printed report: a measured phase with its percentiles, the table, the spill and
//! the ratio lines.

use std::time::Duration;

use crate::{interleave::Interleaved, phase::Phase, target::Target};

/// Prints the closed-loop table and figures, then the open-loop row; fails if any request failed.
pub(crate) fn print(
    targets: &[Target; 3],
    closed: &Interleaved,
    (open_name, open): &(String, Phase),
) -> anyhow::Result<()> {
    println!();
    println!(
        "Closed loop, interleaved: {} cycles of one {} ms slice per configuration, order shuffled per cycle, \
         after a discarded warm-up of {} slices. A request counts for the slice it was sent in; req/s = counted \
         requests / the configuration's total slice time; latency percentiles over all counted requests. \
         Open loop: one run.",
        closed.cycles.len(),
        closed.slice.as_millis(),
        closed.warmup_slices
    );
    println!(
        "| configuration                              |  requests |   req/s   |   p50    |   p99    |  p99.9   | errors |"
    );
    println!(
        "|--------------------------------------------|-----------|-----------|----------|----------|----------|--------|"
    );
    for (target, phase) in targets.iter().zip(&closed.phases) {
        println!("{}", row(&target.name, phase));
    }
    println!("{}", row(open_name, open));
    println!();
    print_spill(targets, closed);
    print_cycles(targets, closed);
    print_ratios(targets, closed);
    println!(
        "{open_name}: p99 {:.0} µs at {:.0} req/s achieved",
        open.percentile(99.0).as_secs_f64() * 1e6,
        open.throughput()
    );
    let failed: u64 = closed.phases.iter().chain([open]).map(|p| p.errors).sum();
    anyhow::ensure!(failed == 0, "{failed} requests failed");
    Ok(())
}

/// Active time per configuration and the requests that completed after their slice had ended.
fn print_spill(targets: &[Target; 3], closed: &Interleaved) {
    let counted: u64 = closed.phases.iter().map(|p| p.requests).sum();
    let active: Vec<String> = (targets.iter().zip(&closed.phases))
        .map(|(t, p)| format!("{} {:.2} s", t.short, p.elapsed.as_secs_f64()))
        .collect();
    println!("active time: {}", active.join(", "));
    println!(
        "spill: {} counted requests ({}) completed after their slice had ended ({} slice ends, at most {} each)",
        thousands(closed.spill as f64),
        percent(closed.spill as f64 / counted.max(1) as f64),
        3 * closed.cycles.len(),
        closed.connections
    );
}

/// How much each configuration's throughput moved from cycle to cycle: the machine's drift.
fn print_cycles(targets: &[Target; 3], closed: &Interleaved) {
    let spreads: Vec<String> = (0..3)
        .map(|t| {
            let rates = sorted(closed.cycles.iter().map(|c| c[t]).collect());
            format!(
                "{} {} / {} / {}",
                targets[t].short,
                thousands(quantile(&rates, 10.0)),
                thousands(median(&rates)),
                thousands(quantile(&rates, 90.0))
            )
        })
        .collect();
    println!("per-cycle req/s, p10 / median / p90: {}", spreads.join("; "));
}

/// Outfit's throughput against the ceiling's: pooled over all slices, then per cycle.
fn print_ratios(targets: &[Target; 3], closed: &Interleaved) {
    let ceiling = closed.phases[0].throughput();
    for t in 1..3 {
        let ratios = sorted(closed.cycles.iter().map(|c| c[t] / c[0]).collect());
        println!(
            "{}: {} of the ceiling (all slices pooled; per-cycle ratios median {}, p10 {}, p90 {})",
            targets[t].name,
            percent(closed.phases[t].throughput() / ceiling),
            percent(median(&ratios)),
            percent(quantile(&ratios, 10.0)),
            percent(quantile(&ratios, 90.0))
        );
    }
}

fn row(name: &str, phase: &Phase) -> String {
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    format!(
        "| {:<42} | {:>9} | {:>9.0} | {:>8} | {:>8} | {:>8} | {:>6} |",
        name,
        phase.requests,
        phase.throughput(),
        us(phase.percentile(50.0)),
        us(phase.percentile(99.0)),
        us(phase.percentile(99.9)),
        phase.errors
    )
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// The median of sorted values; for an even count, the mean of the middle two.
fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[mid],
        _ => (sorted[mid - 1] + sorted[mid]) / 2.0,
    }
}

/// The nearest-rank `p`th percentile of sorted values.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn percent(ratio: f64) -> String {
    format!("{:.1}%", 100.0 * ratio)
}

/// `150123.4` as `150,123`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
