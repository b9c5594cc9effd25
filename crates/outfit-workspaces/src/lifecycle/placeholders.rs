//! Keeping `placeholders` (issue 35): the leader makes the placeholders a cluster is short of (one
//! preempted for a launch, or the count raised) and removes those past the count. Each sweep is a
//! LIST of them by their label (the watches leave them out).

use std::time::Duration;

use kube::ResourceExt;
use outfit_workspaces_core::{model::config::Placeholders, workspace::placeholder};

use crate::io::{calls::ClusterCalls, metrics::Metrics};

/// How often the leader looks while placeholders are configured: a preempted one is back within
/// this, so the next launch finds room again.
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// How often it looks while none are (for ones a lowered count left).
pub(super) const SWEEP_EVERY_IDLE: Duration = Duration::from_secs(60);

/// Makes the placeholders missing and removes the extra ones, so that `want` (sized and placed
/// as `config` says) are kept.
pub(super) async fn keep<C: ClusterCalls>(
    cluster: &C,
    config: &Placeholders,
    want: usize,
    metrics: &Metrics,
) {
    let existing = match cluster.placeholders().await {
        Ok(pods) => pods,
        Err(error) => {
            tracing::warn!(%error, "could not list the placeholders; trying later");
            return;
        }
    };
    let existing: Vec<(String, bool)> = existing
        .iter()
        .map(|pod| (pod.name_any(), pod.metadata.deletion_timestamp.is_some()))
        .collect();
    let plan = placeholder::plan(&existing, want);
    metrics.set_placeholders(existing.iter().filter(|(_, deleting)| !deleting).count());
    for name in plan.make {
        match cluster.create_pod(&placeholder::pod(&name, config)).await {
            Ok(_) => tracing::debug!(placeholder = name, "placeholder made"),
            Err(error) if error.is_conflict() => {}
            Err(error) => {
                tracing::warn!(%error, placeholder = name, "could not make a placeholder (is the PriorityClass outfit-workspace-placeholder installed?)");
                return;
            }
        }
    }
    for name in plan.remove {
        if let Err(error) = cluster.delete_pod(&name, None).await {
            tracing::warn!(%error, placeholder = name, "could not remove a placeholder");
        }
    }
}
