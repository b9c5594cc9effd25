//! The command line.

use std::path::PathBuf;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(args_override_self = true)]
pub(crate) struct Args {
    /// The state directory of `hack/control-plane/up.sh --nodes N`.
    #[arg(long)]
    pub(crate) state_dir: PathBuf,
    /// The outfit binary.
    #[arg(long, default_value = "target/release/outfit")]
    pub(crate) outfit: PathBuf,
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
