//! outfit's Gatekeeper engine side by side with Gatekeeper's own, in the same run, on the same
//! mutators and objects. Run it with `hack/bench-gatekeeper.sh` (builds both), or:
//!
//! ```text
//! bin=$(hack/gatekeeper-baseline/build.sh)
//! cargo run --release -p outfit-loadgen --bin gatekeeper-compare -- --baseline "$bin" [--quick]
//! ```
//!
//! For each workload (`env`: the criterion bench's N Assigns on a globbed env path; `mixed`: every
//! kind under three kinds of `match`), each size N and each mix (`first-admission`,
//! `already-mutated`, `not-matching`), it:
//!
//! 1. loads the same YAML stream into both engines (Gatekeeper through its controllers' decoding
//!    and `System.Upsert`, outfit through `PolicySet::builder`);
//! 2. runs one admission of the object through each and compares the results (semantic JSON
//!    equality, and whether each says it mutated): the differential test;
//! 3. times each engine on the object for a time budget: Gatekeeper's `System.Mutate` on fresh
//!    deep copies made outside the clock (it mutates in place), outfit's `PolicySet::apply` plus
//!    the admitted object (its input is borrowed, so there is nothing to copy first). Both clocks
//!    run around batches of calls; garbage (Go) and drops (Rust) fall inside them. Wall-clock and
//!    CPU time are both kept; the table's ratio is of CPU time (Go: the whole process; outfit: its
//!    one thread), which a shared machine disturbs less. A call longer than the whole budget is
//!    not repeated: the differential call's own timing is the figure.
//!
//! Gatekeeper runs in a child process (`gatekeeper-baseline serve`) with GOMAXPROCS=1 by default,
//! so that both engines are measured on one core (Go's collector would otherwise also use the
//! second core of this 2-core machine); `--go-maxprocs 0` leaves Go's default.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use serde_json::Value;

mod args;
mod baseline;
mod diff;
mod outfit;
mod plot;
mod report;
mod timing;
mod workload;

use self::{
    args::Args,
    baseline::{Baseline, Budget},
    report::{LoadRow, Row, micros, plot_svg, ratio, report},
    timing::Timing,
    workload::{Mix, Workload, namespace_of},
};

// The allocator `outfit` ships with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let args = Args::parse();
    let sizes = args.sizes.clone().unwrap_or_else(|| {
        if args.quick {
            vec![10, 100, 1_000]
        } else {
            vec![10, 100, 1_000, 10_000]
        }
    });
    let mixes = args
        .mixes
        .iter()
        .map(|m| Mix::parse(m).with_context(|| format!("unknown mix {m:?}")))
        .collect::<Result<Vec<_>>>()?;
    let workloads = args
        .workloads
        .iter()
        .map(|w| Workload::parse(w).with_context(|| format!("unknown workload {w:?}")))
        .collect::<Result<Vec<_>>>()?;
    let budget = Duration::from_millis(args.budget_ms.unwrap_or(if args.quick { 300 } else { 1_500 }));
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }

    let mut go = Baseline::start(&args.baseline, args.go_maxprocs)?;
    let mut rows = Vec::new();
    let mut loads = Vec::new();
    let mut differences: Vec<String> = Vec::new();
    let mut compared = 0usize;
    let mut cell = 0usize;
    for &workload in &workloads {
        for &size in &sizes {
            let yaml = workload.yaml(size);
            let loaded = go.load(&yaml)?;
            let (set, outfit_load, warnings) = outfit::load(&yaml)?;
            if loaded.mutators != size as u64 {
                bail!("Gatekeeper loaded {} mutators, expected {size}", loaded.mutators);
            }
            if !loaded.conflicts.is_empty() {
                differences.push(format!(
                    "{} N={size}: Gatekeeper disabled conflicting mutators {:?} (outfit loaded them all)",
                    workload.name(),
                    loaded.conflicts
                ));
            }
            loads.push(LoadRow {
                workload,
                size,
                outfit: outfit_load,
                gatekeeper: loaded.load,
                warnings,
            });
            let fresh = workload.fresh();
            // The already-mutated input: outfit's first admission (compared with Gatekeeper's
            // below when that mix is run).
            let mutated = outfit::mutate(&set, &fresh, namespace_of(&fresh))
                .0
                .map_err(|e| anyhow::anyhow!("outfit denied the first admission: {e}"))?
                .0;
            let (unmatched, _) = workload.unmatched();
            if let Some(dir) = &args.dump {
                let base = dir.join(format!("{}-{size}", workload.name()));
                std::fs::write(base.with_extension("mutators.yaml"), &yaml)?;
                let objects = [&fresh, &mutated, &unmatched]
                    .iter()
                    .map(|o| serde_json::to_string(o).map(|s| s + "\n"))
                    .collect::<Result<String, _>>()?;
                std::fs::write(base.with_extension("objects.json"), objects)?;
            }
            for &mix in &mixes {
                let object = match mix {
                    Mix::First => &fresh,
                    Mix::Mutated => &mutated,
                    Mix::None => &unmatched,
                };
                let namespace = namespace_of(object);
                let label = format!("{} N={size} {}", workload.name(), mix.name());

                // The differential test, and a first call of each (which sizes the budgets).
                let (theirs, their_call) = go.mutate(object, namespace)?;
                let (ours, our_call) = outfit::mutate(&set, object, namespace);
                compared += 1;
                differences.extend(compare(&label, mix, &ours, &theirs));
                let Some(their_call) = their_call.filter(|_| ours.is_ok()) else {
                    eprintln!("{label}: an engine refused the object; not timed");
                    continue;
                };

                // A call longer than the whole budget is not repeated: the differential call,
                // timed the same way, is the measurement.
                let mut run_gatekeeper = || -> Result<Timing> {
                    if their_call.per_iter > budget {
                        Ok(their_call)
                    } else {
                        go.bench(object, namespace, budget_for(their_call.per_iter, budget))
                    }
                };
                let run_outfit = || {
                    if our_call.per_iter > budget {
                        our_call
                    } else {
                        outfit::bench(&set, object, namespace, budget_for(our_call.per_iter, budget))
                    }
                };
                // Alternate which engine goes first, so neither always runs in the other's wake.
                let (gatekeeper, outfit) = if cell.is_multiple_of(2) {
                    let g = run_gatekeeper()?;
                    (g, run_outfit())
                } else {
                    let o = run_outfit();
                    (run_gatekeeper()?, o)
                };
                cell += 1;
                eprintln!(
                    "{label}: outfit {} µs CPU ({} wall, {} calls), Gatekeeper {} µs CPU ({} wall, {} calls), ratio {}",
                    micros(outfit.cpu),
                    micros(outfit.per_iter),
                    outfit.iters,
                    micros(gatekeeper.cpu),
                    micros(gatekeeper.per_iter),
                    gatekeeper.iters,
                    ratio(gatekeeper.cpu, outfit.cpu)
                );
                rows.push(Row {
                    workload,
                    size,
                    mix,
                    outfit,
                    gatekeeper,
                });
            }
        }
    }
    drop(go);

    print!("{}", report(&rows, &loads, &differences, compared, &args, budget));
    if let Some(path) = &args.plot {
        std::fs::write(path, plot_svg(&rows, &workloads, &mixes))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("plot written to {}", path.display());
    }
    Ok(())
}

/// At least 3 timed calls, or 1 when a call takes more than a third of the budget; batches
/// of about a fiftieth of the budget, so the clock is read rarely.
fn budget_for(first_call: Duration, time: Duration) -> Budget {
    let first = first_call.max(Duration::from_nanos(100));
    let min_iters = if first * 3 <= time { 3 } else { 1 };
    let batch = (time.as_secs_f64() / first.as_secs_f64() / 50.0).clamp(1.0, 1_000.0) as u64;
    Budget {
        min_iters,
        max_iters: 10_000_000,
        time,
        batch,
    }
}

/// The differences between outfit's and Gatekeeper's admissions of one input, as report lines.
fn compare(
    label: &str,
    mix: Mix,
    ours: &Result<(Value, bool), String>,
    theirs: &baseline::Mutated,
) -> Vec<String> {
    let mut out = Vec::new();
    match (ours, theirs) {
        (Ok((ours, our_mutated)), Ok((theirs, their_mutated))) => {
            if our_mutated != their_mutated {
                out.push(format!(
                    "{label}: outfit says mutated={our_mutated}, Gatekeeper mutated={their_mutated}"
                ));
            }
            let expected = mix == Mix::First;
            if *their_mutated != expected {
                out.push(format!(
                    "{label}: Gatekeeper says mutated={their_mutated}, the workload expects {expected}"
                ));
            }
            out.extend(
                diff::differences(ours, theirs)
                    .into_iter()
                    .map(|d| format!("{label}: {d}")),
            );
        }
        (Err(ours), Err(theirs)) => {
            out.push(format!(
                "{label}: both refuse (outfit: {ours}; Gatekeeper: {theirs})"
            ));
        }
        (Err(ours), Ok(_)) => out.push(format!("{label}: outfit denies ({ours}), Gatekeeper admits")),
        (Ok(_), Err(theirs)) => out.push(format!("{label}: Gatekeeper fails ({theirs}), outfit admits")),
    }
    out
}
