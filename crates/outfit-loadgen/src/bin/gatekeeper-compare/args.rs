//! The command line.

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    args_override_self = true,
    about = "Time outfit's Gatekeeper engine against Gatekeeper's own, and diff their results"
)]
pub(crate) struct Args {
    /// The gatekeeper-baseline binary (`hack/gatekeeper-baseline/build.sh` prints its path).
    #[arg(long, env = "GATEKEEPER_BASELINE")]
    pub(crate) baseline: PathBuf,
    /// Numbers of mutators [default: 10,100,1000,10000; with --quick 10,100,1000].
    #[arg(long, value_delimiter = ',')]
    pub(crate) sizes: Option<Vec<usize>>,
    /// Mixes: first-admission (a), already-mutated (b), not-matching (c).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "first-admission,already-mutated,not-matching"
    )]
    pub(crate) mixes: Vec<String>,
    /// Workloads: env (the criterion bench's), mixed (every kind).
    #[arg(long, value_delimiter = ',', default_value = "env,mixed")]
    pub(crate) workloads: Vec<String>,
    /// Timed budget per cell and engine, in milliseconds [default: 1500; with --quick 300]. At
    /// least 3 calls are timed (1 when one call takes more than a third of the budget).
    #[arg(long)]
    pub(crate) budget_ms: Option<u64>,
    /// Smaller sizes and budgets (about a minute).
    #[arg(long)]
    pub(crate) quick: bool,
    /// GOMAXPROCS for Gatekeeper (0: Go's default, one per core).
    #[arg(long, default_value_t = 1)]
    pub(crate) go_maxprocs: usize,
    /// Write a log-log SVG plot of µs per object against N here.
    #[arg(long)]
    pub(crate) plot: Option<PathBuf>,
    /// Write each workload's YAML and objects here (to replay with `gatekeeper-baseline mutate`
    /// and `outfit mutate`).
    #[arg(long)]
    pub(crate) dump: Option<PathBuf>,
}
