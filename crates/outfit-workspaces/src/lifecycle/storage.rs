//! The sweep of user storage (claim and volume) that no pod uses, no Workspace keeps (a stopped
//! workspace keeps its owner's storage for its next start) and no create wants, once it has been
//! so for `storageGracePeriod`. deic-dk removes it with the user's last pod; the grace
//! keeps it for a user who launches again at once, who would otherwise wait for the claim's
//! delete to finish (minutes when kube-controller-manager is slow to drop the claim's protection
//! finalizer, as after an API server restart: the two-replica soak found it). The NFS data stays
//! either way: the volume's reclaim policy is Retain. A `per-user` claim (`storageStrategy`) is
//! never swept: its class may reclaim with `Delete`, and it is the user's home.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        config::{Config, StorageStrategy},
        keys,
        user::owner_of,
    },
    workspace::home,
};
use tokio::time::Instant;

use crate::io::{cache::Cache, calls::ClusterCalls};

/// Claim name → since when the leader has seen it unused, in a row. Only unused claims are kept,
/// so it holds at most the claims the cache holds. A new leader starts it empty: it can only
/// keep storage longer than the grace, never shorter.
#[derive(Debug, Default)]
pub(super) struct Unused {
    since: HashMap<String, Instant>,
}

/// Whether `claim` is unused now: not being deleted, outfit's, of a user not among
/// `users_with_pods` (or with Workspaces), and not marked wanted by a create (`outfit.dev/wanted-until`) past `now`.
fn is_unused(claim: &PersistentVolumeClaim, users_with_pods: &HashSet<&str>, now: Timestamp) -> bool {
    if claim.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(owner) = owner_of(claim) else {
        return false;
    };
    if users_with_pods.contains(owner) {
        return false;
    }
    // A `per-user` home is kept after its user's last workspace, as zero-to-jupyterhub keeps
    // its claims: removed only when asked. A `per-workspace` home goes with its owner (the
    // garbage collector's doing).
    if home::strategy_of(claim) != StorageStrategy::Nfs {
        return false;
    }
    claim
        .annotations()
        .get(keys::ANNOTATION_STORAGE_WANTED_UNTIL)
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_none_or(|until| until <= now)
}

impl Unused {
    /// Records which of `claims` are unused at `at`, forgets the others, and gives those unused
    /// for `grace` or longer.
    fn due<'a>(
        &mut self,
        claims: impl IntoIterator<Item = (&'a str, bool)>,
        at: Instant,
        grace: std::time::Duration,
    ) -> Vec<&'a str> {
        let mut seen = HashMap::with_capacity(self.since.len());
        let mut due = Vec::new();
        for (name, unused) in claims {
            if !unused {
                continue;
            }
            let since = self.since.get(name).copied().unwrap_or(at);
            if at.duration_since(since) >= grace {
                due.push(name);
            }
            seen.insert(name.to_owned(), since);
        }
        self.since = seen;
        due
    }
}

/// Removes the storage unused for `storageGracePeriod` (deleting only the version the cache
/// shows: a create that has just marked it wanted makes the delete fail).
pub(super) async fn sweep<C: ClusterCalls>(
    cluster: &C,
    cache: &Cache,
    config: &Config,
    unused: &mut Unused,
    at: Instant,
) {
    let now = Timestamp::now();
    let pods = cache.pods();
    let records = cache.workspaces();
    let users_with_pods: HashSet<&str> = pods
        .iter()
        .filter_map(|pod| owner_of(pod.as_ref()))
        .chain(records.iter().map(|record| record.spec.owner.as_str()))
        .collect();
    let claims = cache.claims();
    let by_name: HashMap<String, &PersistentVolumeClaim> = claims
        .iter()
        .map(|claim| (claim.name_any(), claim.as_ref()))
        .collect();
    let states = by_name
        .iter()
        .map(|(name, claim)| (name.as_str(), is_unused(claim, &users_with_pods, now)));
    for name in unused.due(states, at, config.storage_grace_period) {
        let claim = by_name[name];
        let owner = owner_of(claim).unwrap_or_default();
        // The cache may be behind a create that has just marked the claim as wanted: delete
        // only the version seen here (the soak caught a launch losing its claim this way).
        let seen = claim.resource_version();
        match cluster.delete_storage(name, seen.as_deref()).await {
            Ok(()) => tracing::info!(storage = name, user = owner, "removed storage no pod uses"),
            Err(error) if error.is_conflict() => {
                tracing::info!(storage = name, user = owner, "unused storage wanted again; kept");
            }
            Err(error) => tracing::warn!(%error, "could not remove unused storage"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn storage_is_due_only_after_the_grace_of_being_unused_in_a_row() {
        let grace = Duration::from_secs(60);
        let mut unused = Unused::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);

        // (seconds, [(claim, unused now)], due): ann's relaunch at 50 s uses hers again, so her
        // count starts afresh when it is unused again.
        /// A sweep: when (seconds), each claim and whether it is unused then, and what is due.
        type Sweep<'a> = (u64, &'a [(&'a str, bool)], &'a [&'a str]);
        let sweeps: [Sweep<'_>; 6] = [
            (0, &[("ann", true), ("bob", false)], &[]),
            (30, &[("ann", true), ("bob", true)], &[]),
            (50, &[("ann", false), ("bob", true)], &[]),
            (70, &[("ann", true), ("bob", true)], &[]),
            (90, &[("ann", true), ("bob", true)], &["bob"]),
            (130, &[("ann", true)], &["ann"]),
        ];
        for (seconds, states, want) in sweeps {
            let due = unused.due(states.iter().copied(), at(seconds), grace);
            assert_eq!(due, want, "the sweep at {seconds} s");
        }
        // A claim gone from the cache is forgotten: the record holds only what is unused now.
        assert_eq!(unused.since.len(), 1);
    }

    #[test]
    fn a_zero_grace_removes_at_the_first_sweep_as_deic_dk_does() {
        let mut unused = Unused::default();
        let due = unused.due([("ann", true), ("bob", false)], Instant::now(), Duration::ZERO);
        assert_eq!(due, ["ann"]);
    }
}
