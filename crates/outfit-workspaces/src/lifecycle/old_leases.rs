//! The sweep of the per-user Leases earlier versions took turns on (this one decides every limit
//! in the leader's controller): one no replica has held or released for [`STALE_AFTER`] is
//! deleted, so none is left behind by an upgrade. A replica of an earlier version taking the Lease
//! meanwhile (a rolling upgrade) changes its version, and the delete, made only at the version
//! seen, is refused.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;

use crate::io::calls::ClusterCalls;

/// How long a per-user Lease is kept after it was last written (a holder renewed it every few
/// seconds, so one this old is held by no one).
pub(super) const STALE_AFTER: Duration = Duration::from_secs(600);
/// How often the leader sweeps them (a LIST of the Leases).
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Whether `lease` was last written more than [`STALE_AFTER`] before `now` (by the writer's clock:
/// replicas' clocks disagree by far less).
pub(super) fn is_stale(lease: &Lease, now: Timestamp) -> bool {
    let written = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref());
    written.is_none_or(|at| {
        let age = now.duration_since(at.0).as_secs();
        u64::try_from(age).is_ok_and(|age| age >= STALE_AFTER.as_secs())
    })
}

/// Deletes the per-user Leases gone stale.
pub(super) async fn sweep<C: ClusterCalls>(cluster: &C) {
    let leases = match cluster.old_turn_leases().await {
        Ok(leases) => leases,
        Err(error) => {
            tracing::warn!(%error, "could not list the per-user Leases; sweeping them later");
            return;
        }
    };
    let now = Timestamp::now();
    for lease in leases.iter().filter(|lease| is_stale(lease, now)) {
        let (name, seen) = (lease.name_any(), lease.resource_version().unwrap_or_default());
        match cluster.delete_lease(&name, &seen).await {
            Ok(()) => tracing::debug!(lease = name, "removed a stale per-user Lease"),
            Err(error) if error.is_conflict() => {}
            Err(error) => tracing::warn!(%error, "could not remove a stale per-user Lease"),
        }
    }
}
