//! A user's stops take turns across replicas, through a per-user `coordination.k8s.io/v1` Lease
//! that the default cluster's API server arbitrates: a stop, which any replica writes, takes the
//! Lease (creates it, or writes itself in as holder at the `resourceVersion` it read, so of two
//! replicas at most one wins), checks `maxStoppedWorkspacesPerUser` and writes the stop, then
//! releases the Lease, so that two stops at once can't both pass the limit. (Creates need no
//! Lease: only the leader's controller makes pods, in its own per-user turns.) A holder that dies
//! is taken over once its Lease has not changed for [`LEASE_DURATION`], by
//! [`outfit_k8s::lease::decide`]'s rule; the lifecycle's sweep deletes Leases long released.
//!
//! A take costs one write when it can: at the version this process released the Lease at (kept
//! in [`Released`]: unchanged since, it is free), or a create when this process never saw it
//! (none there: it is free). A 409 or 404 says someone else wrote it since; then it is read
//! and decided on as it stands.

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
};
use kube::ResourceExt;
use outfit_k8s::{
    election::record,
    lease::{Record, Step, decide},
};
use tokio::{sync::Mutex, task::JoinHandle, time::Instant};

use crate::{
    backend::request::RequestError,
    io::calls::ClusterCalls,
    model::{keys, user::UserId},
};

/// How long a holder's Lease keeps other replicas' stops of the user waiting after it stopped
/// renewing it (its replica died): then one takes it over.
pub(crate) const LEASE_DURATION: Duration = Duration::from_secs(10);
/// How often a holder renews its Lease while its stop goes on.
const RENEW_EVERY: Duration = Duration::from_secs(3);
/// How long a stop waits for its turn: past a dead holder's [`LEASE_DURATION`], so only a
/// live holder slower than this refuses it.
const WAIT_LIMIT: Duration = Duration::from_secs(25);
/// The first and the longest pause between looks at a Lease another create holds.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const LONGEST_PAUSE: Duration = Duration::from_millis(400);

/// The per-user Leases as this process last released them, by name, so that the user's next
/// stop takes its Lease with one write at that version instead of reading it first.
/// Bounded: past [`RELEASED_KEPT`] Leases it starts over (a Lease not kept costs a read).
#[derive(Clone, Default)]
pub(crate) struct Released(Arc<std::sync::Mutex<std::collections::HashMap<String, Lease>>>);

/// How many released Leases [`Released`] keeps (each under a KiB).
const RELEASED_KEPT: usize = 4096;

impl Released {
    fn leases(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Lease>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Lease `name` as this process released it last, forgotten here (a turn uses it once).
    fn take(&self, name: &str) -> Option<Lease> {
        self.leases().remove(name)
    }

    /// `lease`, as the API server stored this process's release of it.
    fn keep(&self, lease: Lease) {
        let mut leases = self.leases();
        if leases.len() >= RELEASED_KEPT {
            leases.clear();
        }
        leases.insert(lease.name_any(), lease);
    }
}

/// The per-user Lease's name: a hash of the exact user id (ids may be longer than a name, or
/// hold characters a name may not).
pub(crate) fn lease_name(user: &UserId) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, user.as_str().as_bytes());
    let hex: String = digest.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("outfit-user-{hex}")
}

/// A holder name of this hold's own: the replica's identity and a count, so that two stops,
/// even on one replica, never take each other's Lease for their own.
fn holder_name() -> String {
    static REPLICA: OnceLock<String> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let replica = REPLICA.get_or_init(outfit_k8s::election::identity);
    format!("{replica}_{}", COUNT.fetch_add(1, Ordering::Relaxed))
}

/// The user's turn to stop: the per-user Lease, held (and renewed) until [`UserTurn::release`].
/// Dropped without a release (the request was abandoned), it is left to expire.
pub(crate) struct UserTurn<C: ClusterCalls> {
    cluster: C,
    /// Where the release is kept for the user's next take.
    released: Released,
    lease: Arc<Mutex<Lease>>,
    renewer: JoinHandle<()>,
}

/// Takes `user`'s turn, waiting (up to [`WAIT_LIMIT`]) while another stop holds it. `None`
/// when RBAC grants no Leases (an installation from before the per-user turns): stops then take
/// turns per replica only, and a warning says so once.
pub(crate) async fn take<C: ClusterCalls>(
    cluster: &C,
    released: &Released,
    user: &UserId,
) -> Result<Option<UserTurn<C>>, RequestError> {
    let name = lease_name(user);
    let holder = holder_name();
    // Unread: at the version this process released it at, or made anew when it never saw it.
    let unread = match released.take(&name) {
        Some(mut lease) => {
            lease.spec = Some(held(lease.spec.take(), &holder));
            cluster.replace_lease(&lease).await
        }
        None => cluster.create_lease(&fresh(&name, &holder)).await,
    };
    match unread {
        Ok(lease) => return Ok(Some(UserTurn::new(cluster.clone(), released.clone(), lease))),
        // Written (or deleted by the sweep) since this process saw it: read it.
        Err(error) if error.is_conflict() || error.is_not_found() => {}
        Err(error) if error.is_forbidden() => return Ok(no_grant(&error)),
        Err(error) => return Err(error.into()),
    }
    let started = Instant::now();
    // The Lease's record as last seen, and since when by our clock (clocks of replicas may differ).
    let mut observed: Option<(Record, Instant)> = None;
    let mut pause = FIRST_PAUSE;
    loop {
        let current = match cluster.get_lease(&name).await {
            Ok(current) => current,
            Err(error) if error.is_forbidden() => return Ok(no_grant(&error)),
            Err(error) => return Err(error.into()),
        };
        let record = current.as_ref().map(record);
        if let Some(record) = &record
            && observed.as_ref().is_none_or(|(seen, _)| seen != record)
        {
            observed = Some((record.clone(), Instant::now()));
        }
        let unchanged_for = observed.as_ref().map_or(Duration::ZERO, |(_, at)| at.elapsed());
        let written = match (decide(record.as_ref(), &holder, unchanged_for), current) {
            (Step::Create, _) => Some(cluster.create_lease(&fresh(&name, &holder)).await),
            (Step::Take { .. }, Some(mut lease)) => {
                lease.spec = Some(held(lease.spec.take(), &holder));
                Some(cluster.replace_lease(&lease).await)
            }
            // Held by another create; or gone since it was read.
            _ => None,
        };
        match written {
            Some(Ok(lease)) => return Ok(Some(UserTurn::new(cluster.clone(), released.clone(), lease))),
            // Another create wrote first (or the sweep deleted it): look again.
            Some(Err(error)) if error.is_conflict() || error.is_not_found() => {}
            Some(Err(error)) => return Err(error.into()),
            None => {}
        }
        if started.elapsed() >= WAIT_LIMIT {
            return Err(RequestError::Busy(format!(
                "another stop of user {user}'s has been under way for over {} s; try again",
                WAIT_LIMIT.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// No turn across replicas: RBAC grants no Leases. Says so once.
fn no_grant<C: ClusterCalls>(error: &crate::io::cluster::ClusterError) -> Option<UserTurn<C>> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(%error, "no grant for Leases: maxStoppedWorkspacesPerUser holds per replica only; re-apply `outfit manifests --workspaces`");
    });
    None
}

impl<C: ClusterCalls> UserTurn<C> {
    fn new(cluster: C, released: Released, lease: Lease) -> Self {
        let lease = Arc::new(Mutex::new(lease));
        let renewer = tokio::spawn(renew(cluster.clone(), lease.clone()));
        Self {
            cluster,
            released,
            lease,
            renewer,
        }
    }

    /// Gives the turn up. A failed release is left to expire.
    pub(crate) async fn release(self) {
        let held = self.lease.lock().await;
        // The renewer waits for the lock or sleeps, so it is not halfway through a write; aborted
        // while the lock is held here, it never makes another.
        self.renewer.abort();
        let mut lease = held.clone();
        drop(held);
        let name = lease.name_any();
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.renew_time = Some(now());
        match self.cluster.replace_lease(&lease).await {
            Ok(stored) => self.released.keep(stored),
            Err(error) => {
                tracing::warn!(lease = name, %error, "could not release the user's Lease; their next stop waits until it expires");
            }
        }
    }
}

impl<C: ClusterCalls> Drop for UserTurn<C> {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Renews the held Lease until aborted.
async fn renew<C: ClusterCalls>(cluster: C, lease: Arc<Mutex<Lease>>) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut held = lease.lock().await;
        let mut renewed = held.clone();
        renewed.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now());
        match cluster.replace_lease(&renewed).await {
            Ok(stored) => *held = stored,
            Err(error) => {
                tracing::warn!(lease = held.name_any(), %error, "could not renew the user's Lease");
                if error.is_conflict() || error.is_not_found() {
                    return;
                }
            }
        }
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// `spec` with `holder` in it, renewed now.
fn held(spec: Option<LeaseSpec>, holder: &str) -> LeaseSpec {
    let mut spec = spec.unwrap_or_default();
    spec.holder_identity = Some(holder.to_owned());
    spec.lease_duration_seconds = Some(LEASE_DURATION.as_secs() as i32);
    spec.acquire_time = Some(now());
    spec.renew_time = Some(now());
    spec
}

/// A new Lease `name`, held by `holder`.
fn fresh(name: &str, holder: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([(keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(held(None, holder)),
    }
}
