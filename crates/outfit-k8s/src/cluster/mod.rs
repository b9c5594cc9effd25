//! Policies read from the API server: one watch per policy kind plus Namespaces (for their
//! labels), merged into [`Snapshot`]s of raw documents that the server compiles off the request
//! path. `watches`: what is watched and how each watch turns into updates; `aggregate`: the
//! updates merged into snapshots, and the watches of listed names started and stopped.
//!
//! - A kind whose CRD is not installed (Gatekeeper absent, say) counts as synced and empty, and is
//!   retried with backoff, so its later installation is picked up.
//! - While the API server is unreachable the last snapshot stays in force; the watches retry with
//!   backoff and a relist replaces each kind's objects whole, so deletions made meanwhile are seen.
//! - `synced` turns true once every kind has listed once; readiness waits for it.
//! - Built-in kinds a family reads (the filer injector's ConfigMaps and Secrets) are watched only
//!   for the objects it reads, one watch per name. The Secrets' names are those `filers-list`
//!   lists (`<svm>-conn-secret`): their watches start and stop as it changes, and of each Secret
//!   only whether its S3 keys are set is kept, unless plain values are asked for.

mod aggregate;
#[cfg(test)]
mod tests;
mod watches;

use std::sync::Arc;

use kube::Client;
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

pub use aggregate::{CLUSTER_ORIGIN, Snapshot};
pub use watches::{WatchOptions, Watched, watched_resources};

use aggregate::{Aggregator, Spawn, aggregate};
use watches::watch_kind;

/// Running watches; dropping it stops them.
#[derive(Debug)]
pub struct ClusterSource {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    aggregator: JoinHandle<()>,
}

impl ClusterSource {
    /// Starts watching. Must run inside a tokio runtime.
    pub fn start(client: Client, options: WatchOptions) -> Self {
        let (updates_tx, updates_rx) = mpsc::unbounded_channel();
        let (snapshot_tx, snapshots) = watch::channel(Arc::new(Snapshot::default()));
        let spawn: Spawn = Box::new(move |index, watched| {
            tokio::spawn(watch_kind(client.clone(), index, watched, updates_tx.clone()))
        });
        let aggregator = Aggregator::new(&options, spawn);
        let aggregator = tokio::spawn(aggregate(aggregator, updates_rx, snapshot_tx));
        Self {
            snapshots,
            aggregator,
        }
    }

    /// A receiver of snapshots; the current one is available at once.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.snapshots.clone()
    }
}

impl Drop for ClusterSource {
    /// Stops the aggregator, whose slots stop their watches as they drop.
    fn drop(&mut self) {
        self.aggregator.abort();
    }
}
