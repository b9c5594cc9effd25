//! The command line: every number defaults to issue 25's scale and can be turned down.

use std::path::PathBuf;

use clap::Parser;
use outfit_loadgen::harness::BenchCluster;

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
pub(crate) struct Args {
    /// The cluster (`hack/control-plane/up.sh --nodes K`: K simulated nodes, the script's
    /// `--nodes`, 200 by default) and the outfit binary.
    #[command(flatten)]
    pub(crate) cluster: BenchCluster,
    /// Workspaces live at the end of the fill.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) workspaces: usize,
    /// Users owning them (workspace `i` is user `i % users`'s).
    #[arg(long, default_value_t = 2_000)]
    pub(crate) users: usize,
    /// Creates started per second during the fill, half through `create_pod`, half through
    /// `POST /api/v1/workspaces`.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) rate: f64,
    /// Bare creates (the admin's pod, no backend) timed at `--rate` before the fill.
    #[arg(long, default_value_t = 400)]
    pub(crate) bare_creates: usize,
    /// One user in this many (a different one in each round of users) also launches one more
    /// workspace through the other API and deletes it once ready (0: no churn).
    #[arg(long, default_value_t = 20)]
    pub(crate) churn_every: usize,
    /// Lists per second (`get_pods` and `GET /api/v1/workspaces` in turn) during the fill.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) list_rate: f64,
    /// Timed requests of each list, one keep-alive connection each, once the fill is done.
    #[arg(long, default_value_t = 2_000)]
    pub(crate) list_requests: usize,
    /// Record the backend's RSS and CPU (and the cluster's CPU) every this many workspaces.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) sample_every: usize,
    /// Progress streams held open at once (one workspace each, one per user in turn) on
    /// workspaces that cannot be scheduled until the nodes are opened (0: skip).
    #[arg(long, default_value_t = 2_000)]
    pub(crate) streams: usize,
    /// Stopped workspaces started again once every native workspace (half of them) has been
    /// stopped (0: stop none, start none).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) starts: usize,
    /// kube-apiserver's audit log, written with hack/bench-workspaces-scale.sh's policy (the
    /// backend's requests only); without it the requests per create are not counted.
    #[arg(long)]
    pub(crate) audit_log: Option<PathBuf>,
    /// Leave the backend's requests in the `service-accounts` FlowSchema (priority level
    /// `workload-low`, shared with every ServiceAccount) instead of the FlowSchema and priority
    /// level `outfit manifests --workspaces` ships.
    #[arg(long)]
    pub(crate) without_flow_schema: bool,
    /// Every workspace of the run mounts its user's home, which the backend makes as its
    /// `storageStrategy` says: `nfs` (outfit writes a PersistentVolume and a claim per user),
    /// `per-user` (a claim per user of the test cluster's stand-in provisioner's class, which
    /// makes its volume), `per-workspace` (a claim of that class per workspace) or `ephemeral`
    /// (an `emptyDir`, no claim). Without it the backend has its default (`nfs`) and the
    /// workspaces mount no home, so none is made, as in the runs before issue 32.
    #[arg(long, value_enum)]
    pub(crate) storage_strategy: Option<StorageStrategy>,
    /// Working directory for the backends' configurations and logs.
    #[arg(long)]
    pub(crate) work: Option<PathBuf>,
}

/// What a catalogue entry's name ends with when its manifest mounts the user's home.
pub(crate) const HOME: &str = "home";

impl Args {
    /// The catalogue entry of manifest `base` the run launches: `base` with [`HOME`] when the
    /// workspaces mount their homes (`--storage-strategy`).
    pub(crate) fn entry(&self, base: &str) -> String {
        if self.storage_strategy.is_some() {
            format!("{base}{HOME}")
        } else {
            base.to_owned()
        }
    }
}

/// The backend's `storageStrategy` (docs/workspaces/configuration.md, "Homes on any storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StorageStrategy {
    Nfs,
    PerUser,
    PerWorkspace,
    Ephemeral,
}

impl StorageStrategy {
    /// As the backend's config writes it.
    pub(crate) fn as_config(self) -> &'static str {
        match self {
            Self::Nfs => "nfs",
            Self::PerUser => "per-user",
            Self::PerWorkspace => "per-workspace",
            Self::Ephemeral => "ephemeral",
        }
    }

    /// Whether its claims need a provisioner (the test cluster has none of its own).
    pub(crate) fn provisioned(self) -> bool {
        matches!(self, Self::PerUser | Self::PerWorkspace)
    }
}
