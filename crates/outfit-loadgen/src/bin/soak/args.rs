//! The soak's command line.

use clap::Parser;
use outfit_loadgen::harness;

#[derive(Debug, Parser)]
#[command(
    args_override_self = true,
    about = "Soak outfit serve --from-cluster under load, policy changes, cert rotation and API server outages"
)]
pub(crate) struct Args {
    /// Length of the soak.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) minutes: f64,
    /// Requests per second of the review mix (open loop).
    #[arg(long, default_value_t = 200)]
    pub(crate) rate: u32,
    /// Keep-alive connections the mix is spread over.
    #[arg(long, default_value_t = 8)]
    pub(crate) connections: u32,
    /// Requests after which a connection is closed and a new one (new TLS handshake) opened.
    #[arg(long, default_value_t = 500)]
    pub(crate) requests_per_connection: u32,
    /// PodDefaults in files, spread over `--namespaces`.
    #[arg(long, default_value_t = 100)]
    pub(crate) policies: usize,
    /// Namespaces of the file PodDefaults.
    #[arg(long, default_value_t = 10)]
    pub(crate) namespaces: usize,
    /// Static PodDefaults created in the cluster (besides the one that changes).
    #[arg(long, default_value_t = 20)]
    pub(crate) cluster_policies: usize,
    /// Seconds between policy changes (one file rewrite and one cluster change each time).
    #[arg(long, default_value_t = 3.0)]
    pub(crate) policy_every: f64,
    /// Seconds between certificate rotations.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) rotate_every: f64,
    /// Seconds between API server kills (the first after this long).
    #[arg(long, default_value_t = 180.0)]
    pub(crate) outage_every: f64,
    /// Seconds the API server stays down.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) outage_seconds: f64,
    /// Seconds a change may take to show (policies, certificates) before a stale answer counts
    /// as a violation.
    #[arg(long, default_value_t = 5.0)]
    pub(crate) window: f64,
    /// `outfit serve --poll-interval` (policy and certificate files).
    #[arg(long, default_value_t = 2)]
    pub(crate) poll_interval: u64,
    #[command(flatten)]
    pub(crate) places: harness::Places,
}
