//! The command line.

use clap::Parser;
use outfit_loadgen::harness::BenchCluster;

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) cluster: BenchCluster,
    /// Pods created in the create-to-ready measurement (each way).
    #[arg(long, default_value_t = 50)]
    pub(crate) creates: usize,
    /// Creates in flight at once.
    #[arg(long, default_value_t = 10)]
    pub(crate) parallel: usize,
    /// Users in the get_pods measurement.
    #[arg(long, default_value_t = 100)]
    pub(crate) users: usize,
    /// Pods of each user in the get_pods measurement.
    #[arg(long, default_value_t = 10)]
    pub(crate) pods_per_user: usize,
    /// get_pods requests.
    #[arg(long, default_value_t = 2000)]
    pub(crate) requests: usize,
}
