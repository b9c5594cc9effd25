//! The printed tables and the SVG plot of one run.

use std::{fmt::Write as _, time::Duration};

use crate::{
    args::Args,
    plot::{self, thousands},
    timing::Timing,
    workload::{Mix, Workload},
};

/// One cell: an engine pair timed on one workload, size and mix.
pub(crate) struct Row {
    pub(crate) workload: Workload,
    pub(crate) size: usize,
    pub(crate) mix: Mix,
    pub(crate) outfit: Timing,
    pub(crate) gatekeeper: Timing,
}

/// How long each engine took to load one workload and size.
pub(crate) struct LoadRow {
    pub(crate) workload: Workload,
    pub(crate) size: usize,
    pub(crate) outfit: Duration,
    pub(crate) gatekeeper: Duration,
    pub(crate) warnings: usize,
}

pub(crate) fn micros(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 100.0 {
        format!("{us:.1}")
    } else {
        thousands(us.round() as u64)
    }
}

pub(crate) fn ratio(gatekeeper: Duration, outfit: Duration) -> String {
    let r = gatekeeper.as_secs_f64() / outfit.as_secs_f64();
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

pub(crate) fn report(
    rows: &[Row],
    loads: &[LoadRow],
    differences: &[String],
    compared: usize,
    args: &Args,
    budget: Duration,
) -> String {
    let mut s = String::new();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let _ = writeln!(
        s,
        "\nGatekeeper (System.Mutate, GOMAXPROCS={}) vs outfit (PolicySet::apply + admitted object), µs per object; budget {} ms per cell and engine (a call longer than that is timed once); load average at the end {}\n",
        if args.go_maxprocs == 0 {
            "default".to_owned()
        } else {
            args.go_maxprocs.to_string()
        },
        budget.as_millis(),
        load.join(" ")
    );
    let _ = writeln!(
        s,
        "| workload | mutators | mix | outfit CPU µs | Gatekeeper CPU µs | Gatekeeper / outfit (CPU) | outfit wall µs | Gatekeeper wall µs | calls timed (outfit / GK) | GK input copy µs (untimed) |"
    );
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            row.workload.name(),
            thousands(row.size as u64),
            row.mix.name(),
            micros(row.outfit.cpu),
            micros(row.gatekeeper.cpu),
            ratio(row.gatekeeper.cpu, row.outfit.cpu),
            micros(row.outfit.per_iter),
            micros(row.gatekeeper.per_iter),
            thousands(row.outfit.iters),
            thousands(row.gatekeeper.iters),
            row.gatekeeper.copy.map(micros).unwrap_or_else(|| "–".to_owned()),
        );
    }
    let _ = writeln!(s, "\nLoading the mutators (YAML text to a usable engine), ms:\n");
    let _ = writeln!(
        s,
        "| workload | mutators | outfit | Gatekeeper | outfit load warnings |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for l in loads {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {:.2} | {} |",
            l.workload.name(),
            thousands(l.size as u64),
            l.outfit.as_secs_f64() * 1e3,
            l.gatekeeper.as_secs_f64() * 1e3,
            l.warnings
        );
    }
    let _ = writeln!(
        s,
        "\nDifferential: {compared} inputs admitted by both engines, {} difference(s).",
        differences.len()
    );
    for d in differences {
        let _ = writeln!(s, "- {d}");
    }
    s
}

pub(crate) fn plot_svg(rows: &[Row], workloads: &[Workload], mixes: &[Mix]) -> String {
    const COLOURS: [&str; 3] = ["#d62728", "#1f77b4", "#2ca02c"];
    let panels: Vec<plot::Panel> = workloads
        .iter()
        .map(|&workload| {
            let mut series = Vec::new();
            for (m, &mix) in mixes.iter().enumerate() {
                for gatekeeper in [false, true] {
                    let points = rows
                        .iter()
                        .filter(|r| r.workload == workload && r.mix == mix)
                        .map(|r| {
                            let t = if gatekeeper {
                                r.gatekeeper.cpu
                            } else {
                                r.outfit.cpu
                            };
                            (r.size as f64, t.as_secs_f64() * 1e6)
                        })
                        .collect();
                    series.push(plot::Series {
                        label: format!(
                            "{} {}",
                            if gatekeeper { "Gatekeeper" } else { "outfit" },
                            mix.name()
                        ),
                        colour: COLOURS[m % COLOURS.len()],
                        dashed: gatekeeper,
                        points,
                    });
                }
            }
            plot::Panel {
                title: format!("{} workload", workload.name()),
                series,
            }
        })
        .collect();
    plot::svg(
        "Gatekeeper mutators: outfit (solid) vs Gatekeeper (dashed), CPU µs per object",
        &panels,
    )
}
