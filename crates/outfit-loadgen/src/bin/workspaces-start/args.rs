//! The command line: the model (nodes, bandwidth, sizes, latency), the trace and the arms.

use std::{path::PathBuf, time::Duration};

use clap::Parser;
use outfit_loadgen::harness::BenchCluster;

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
pub(crate) struct Args {
    /// The cluster (`hack/control-plane/up.sh --nodes 1`: its kwok node is not used) and the
    /// outfit binary.
    #[command(flatten)]
    pub(crate) cluster: BenchCluster,
    /// The arms, one after the other: `none` (no pre-pull), `everywhere` (a DaemonSet pulling
    /// every catalogue image on every node), `planner` (the backend's `prePull`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,everywhere,planner"
    )]
    pub(crate) arms: Vec<Arm>,
    /// Run on the cluster's real node (`up.sh --real-nodes 1`) instead of the image kubelet's
    /// nodes: the catalogue's images are built at the table's sizes and pulled for real from the
    /// node's registry (at `OUTFIT_CP_REGISTRY_MBPS`, the script's `--registry-mbps`); one node,
    /// none added, so `--nodes`, `--add-nodes`, `--bandwidth` and `--latency-ms` do not apply.
    #[arg(long)]
    pub(crate) real_node: bool,
    /// The image kubelet's nodes at the start of each arm.
    #[arg(long, default_value_t = 4)]
    pub(crate) nodes: u32,
    /// Nodes added at 40 % of the trace.
    #[arg(long, default_value_t = 2)]
    pub(crate) add_nodes: u32,
    /// Catalogue entries (`e0` the most launched, Zipf-like; the last one's launches begin at
    /// 60 % of the trace).
    #[arg(long, default_value_t = 6)]
    pub(crate) entries: usize,
    /// Launches in the trace.
    #[arg(long, default_value_t = 60)]
    pub(crate) launches: usize,
    /// Distinct users (launch `k` is user `k % users`'s).
    #[arg(long, default_value_t = 30)]
    pub(crate) users: usize,
    /// The trace's length in seconds (a morning ramp: the arrival rate rises linearly from 0).
    #[arg(long, default_value_t = 60.0)]
    pub(crate) seconds: f64,
    /// Seconds between the backend's start (and the DaemonSet's) and the first launch: the
    /// pre-pulls' head start.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) warm_up: f64,
    /// Each node's download bandwidth, MB/s (10^6 bytes), shared by its pulls running at once.
    #[arg(long, default_value_t = 180)]
    pub(crate) bandwidth: u64,
    /// Each pull's fixed latency, milliseconds.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) latency_ms: u64,
    /// Image sizes are the built-in table's (0.3 to 3 GB) times this.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) size_scale: f64,
    /// The backend's `timeoutCreate`, seconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) timeout_create: u64,
    /// The seed of the trace's choice of entries.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Working directory for the backends' configurations and logs.
    #[arg(long)]
    pub(crate) work: Option<PathBuf>,
}

impl Args {
    pub(crate) fn timeout_create(&self) -> Duration {
        Duration::from_secs(self.timeout_create)
    }
}

/// How images get onto the nodes ahead of launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Arm {
    /// No pre-pull: every image is pulled by the first launch that needs it on a node.
    None,
    /// The anchors' way: a DaemonSet whose init containers pull every catalogue image, on every
    /// node (new ones too).
    Everywhere,
    /// outfit's planner: `prePull: {enabled: true}`.
    Planner,
}

impl Arm {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Everywhere => "everywhere",
            Self::Planner => "planner",
        }
    }
}
