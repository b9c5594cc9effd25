//! The snapshot of a stopped Workspace's home (issue 32, `snapshotClassName`), taken by the
//! leader's controller once the stop is seen through (its pod gone, culls included): the claim
//! it used, snapshotted, waited for no longer than `snapshotTimeout`, the outcome recorded on the
//! Workspace (its annotations, which its status turns into the `HomeSnapshot` condition; a
//! failure also as an Event), the oldest past `snapshotsKept` let go. The stop itself is never
//! held: its status says `Stopped` whatever the snapshot does.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        self,
        config::StorageStrategy,
        names,
        user::{UserId, belongs_to},
    },
    resource::{
        Workspace,
        reconcile::{self, SNAPSHOT_NO_HOME, SNAPSHOT_PENDING, SNAPSHOT_READY},
    },
    workspace::{self, home, snapshot::Occasion},
};
use tokio::{sync::Semaphore, time::Instant};

use super::Backend;
use crate::{
    backend::cluster_workspaces::{ClusterWorkspaces, snapshots::Outcome},
    io::calls::ClusterCalls,
};

/// The snapshots the controller of one cluster is taking, and the stop each Workspace's last one
/// was for: one task per Workspace, and none again for a stop whose marks the cache does not
/// show yet. Holds the Workspaces the cache holds, no more ([`Snapshotting::retain`]).
#[derive(Clone)]
pub(super) struct Snapshotting {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    /// Snapshots taken and waited for at once: a leader that finds thousands of stopped
    /// Workspaces to snapshot (snapshots just configured, a morning's culls) asks the API server
    /// for a few at a time; the rest queue.
    at_once: Arc<Semaphore>,
}

/// How many snapshots one cluster's controller takes and waits for at once.
const SNAPSHOTS_AT_ONCE: usize = 16;

impl Default for Snapshotting {
    fn default() -> Self {
        Snapshotting {
            seen: Arc::default(),
            at_once: Arc::new(Semaphore::new(SNAPSHOTS_AT_ONCE)),
        }
    }
}

/// Where a Workspace's snapshot stands in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A task takes it or waits for it.
    Running,
    /// Done for this stop (`stopped.at`).
    Done(String),
}

impl Snapshotting {
    /// Takes `name`'s turn for the stop `stop`: `false` while a task runs or when it was done.
    fn begin(&self, name: &str, stop: &str) -> bool {
        let mut seen = self.seen.lock().expect("snapshotting");
        match seen.get(name) {
            Some(Seen::Running) => false,
            Some(Seen::Done(done)) if done == stop => false,
            _ => {
                seen.insert(name.to_owned(), Seen::Running);
                true
            }
        }
    }

    fn end(&self, name: &str, stop: String) {
        self.seen
            .lock()
            .expect("snapshotting")
            .insert(name.to_owned(), Seen::Done(stop));
    }

    /// Forgets the Workspaces `keep` says are gone (a task running keeps its own).
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.seen
            .lock()
            .expect("snapshotting")
            .retain(|name, seen| *seen == Seen::Running || keep(name));
    }
}

impl<C: ClusterCalls> Backend<C> {
    /// Starts what `record` (on the cluster `index`, its pod `pod`) needs of a snapshot, unless a
    /// task does it already: one taken for a stop seen through, or one still being waited for
    /// (a leader that died waiting leaves it to the next).
    pub(super) fn snapshot_step(
        &self,
        index: usize,
        record: &Arc<Workspace>,
        pod: Option<&Pod>,
        snapshotting: &Snapshotting,
    ) {
        let member = &self.members[index];
        let due = reconcile::snapshot_due(record, pod, &member.config);
        let pending = reconcile::snapshot_pending(record).map(str::to_owned);
        let stop = match (&due, &pending) {
            (Some(stop), _) => stop.clone(),
            (None, Some(_)) => record
                .annotations()
                .get(model::keys::ANNOTATION_SNAPSHOT_FOR)
                .cloned()
                .unwrap_or_default(),
            (None, None) => return,
        };
        let name = record.name_any();
        if !snapshotting.begin(&name, &stop) {
            return;
        }
        let (this, record, snapshotting) = (self.clone(), record.clone(), snapshotting.clone());
        tokio::spawn(async move {
            let member = &this.members[index];
            let _turn = snapshotting.at_once.clone().acquire_owned().await;
            match pending {
                Some(snapshot) if due.is_none() => {
                    finish(member, &record, (&snapshot, &stop), Instant::now()).await;
                }
                _ => snapshot_stop(member, &record, &stop).await,
            }
            snapshotting.end(&name, stop);
        });
    }
}

/// Takes the snapshot of `record`'s home for its stop `stop` and sees it through.
async fn snapshot_stop<C: ClusterCalls>(member: &ClusterWorkspaces<C>, record: &Workspace, stop: &str) {
    let home = UserId::parse(&record.spec.owner)
        .ok()
        .and_then(|user| Some((home_claim(member, record, &user)?, user)));
    let Some((claim, user)) = home else {
        mark(
            member,
            record,
            reconcile::snapshot_marks(None, stop, SNAPSHOT_NO_HOME),
        )
        .await;
        return;
    };
    let since = Instant::now();
    let name = record.name_any();
    let taken = member
        .take_snapshot((&claim, &user), (Occasion::Stop, Some(&name)))
        .await;
    let snapshot = match taken {
        Ok(snapshot) => snapshot,
        Err(error) => {
            tracing::warn!(workspace = name, %error, "could not take the snapshot of a stopped workspace's home");
            let why = format!("Failed: {}", error.public_message());
            let salt = crate::backend::cluster_workspaces::snapshots::salt32();
            let snapshot = workspace::snapshot::snapshot_name(&claim, jiff::Timestamp::now(), salt);
            mark(
                member,
                record,
                reconcile::snapshot_marks(Some(&snapshot), stop, &why),
            )
            .await;
            member
                .cluster
                .workspace_event(record, "SnapshotFailed", why)
                .await;
            return;
        }
    };
    mark(
        member,
        record,
        reconcile::snapshot_marks(Some(&snapshot), stop, SNAPSHOT_PENDING),
    )
    .await;
    finish(member, record, (&snapshot, stop), since).await;
    member.prune_snapshots(&claim, &user).await;
}

/// Waits for `snapshot` (taken at `since` for the stop `stop`) and records how it ended.
async fn finish<C: ClusterCalls>(
    member: &ClusterWorkspaces<C>,
    record: &Workspace,
    (snapshot, stop): (&str, &str),
    since: Instant,
) {
    let outcome = member.await_snapshot(snapshot, since).await;
    let state = match &outcome {
        Outcome::Ready => SNAPSHOT_READY.to_owned(),
        Outcome::Failed(why) => format!("Failed: {why}"),
        Outcome::TimedOut(why) => format!("TimedOut: {why}"),
    };
    let name = record.name_any();
    match &outcome {
        Outcome::Ready => tracing::info!(
            workspace = name,
            snapshot,
            "the stopped workspace's home is saved"
        ),
        Outcome::Failed(why) | Outcome::TimedOut(why) => {
            tracing::warn!(
                workspace = name,
                snapshot,
                why,
                "the snapshot of a stopped workspace's home is not ready"
            );
            let reason = if matches!(outcome, Outcome::Failed(_)) {
                "SnapshotFailed"
            } else {
                "SnapshotTimedOut"
            };
            member
                .cluster
                .workspace_event(record, reason, format!("snapshot {snapshot} of the home: {why}"))
                .await;
        }
    }
    mark(
        member,
        record,
        reconcile::snapshot_marks(Some(snapshot), stop, &state),
    )
    .await;
}

/// Sets `marks` on `record` (a Workspace gone or replaced meanwhile is left alone).
async fn mark<C: ClusterCalls>(
    member: &ClusterWorkspaces<C>,
    record: &Workspace,
    marks: std::collections::BTreeMap<&str, Option<String>>,
) {
    let name = record.name_any();
    let uid = record.uid().unwrap_or_default();
    match member.cluster.annotate_workspace(&name, &uid, marks).await {
        Ok(_) => {}
        Err(error) if error.is_gone() || error.is_not_found() => {}
        Err(error) => {
            tracing::warn!(workspace = name, %error, "could not record the snapshot of a workspace's home")
        }
    }
}

/// The claim holding `record`'s home, as the cache shows it: its own (`per-workspace`), else its
/// owner's `per-user` one; none for an `nfs` or `ephemeral` home.
fn home_claim<C: ClusterCalls>(
    member: &ClusterWorkspaces<C>,
    record: &Workspace,
    user: &UserId,
) -> Option<String> {
    if let Some(own) = member.own_home(record) {
        return Some(own);
    }
    let mut claims: Vec<String> = member
        .cache
        .claims()
        .iter()
        .filter(|claim| belongs_to(claim.as_ref(), user))
        .filter(|claim| home::strategy_of(claim) == StorageStrategy::PerUser)
        .filter(|claim| claim.metadata.deletion_timestamp.is_none())
        .map(|claim| claim.name_any())
        .collect();
    // deic-dk's name before the one with a hash, as a create tries them.
    claims.sort_by_key(|name| (name != &names::storage_name(user), name.clone()));
    claims.into_iter().next()
}
