//! The Workspace controller: on the replica that holds a cluster's Lease, every Workspace of that
//! cluster is brought to what its spec says, from the watch cache, as any controller does: a
//! started one without a pod gets one (every start, the API's or kubectl's; a launch that died
//! between its record and its pod), one not started loses its pod (every stop), and its status
//! says where it stands. What to do is decided in `resource::reconcile` (pure); here it is done.
//! A start is made as the owner's launch would be (`records.rs`: entry, values, limits, the
//! snapshot it names); one refused for good is written to the status, where the start's request
//! reads it, and not tried again until the spec changes. A Workspace stopped
//! longer than `stoppedRetention` is deleted, with an Event.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use jiff::Timestamp;
use kube::ResourceExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Backend, home_snapshots::Snapshotting};
use crate::{
    backend::cluster::ClusterBackend,
    io::calls::ClusterCalls,
    resource::{
        Workspace, WorkspaceStatus,
        finalize::{self, Finalize},
        reconcile::{self, Next},
    },
};

/// How often every Workspace is looked at when nothing changed.
const TICK: Duration = Duration::from_secs(1);
/// How long a start that failed for a passing reason (the API server or the manifest's server
/// away, the user's turn taken) waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// The longest rest after a pass (a pass over 10,000 Workspaces takes milliseconds).
const MAX_REST: Duration = Duration::from_millis(500);

/// What the controller of one cluster keeps between passes.
#[derive(Default)]
struct Controlled {
    /// Workspaces a task is starting or stopping: one at a time each.
    busy: Mutex<HashSet<String>>,
    /// The status last written for each Workspace, so that a status is written once even while
    /// the cache has not shown it yet. Holds the Workspaces the cache holds, no more.
    written: Mutex<HashMap<String, WorkspaceStatus>>,
    /// Workspaces whose home's snapshot a task is taking: beside `busy`, so that neither a start
    /// nor the status waits on a snapshot.
    snapshotting: Snapshotting,
}

impl<C: ClusterCalls> Backend<C> {
    /// Runs the controller of the cluster `index` (of [`Backend::members`]) until `shutdown`,
    /// acting while `leading` (that cluster's Lease) is held.
    pub async fn control(self, index: usize, leading: watch::Receiver<bool>, shutdown: CancellationToken) {
        let member = &self.members[index];
        member.cache.synced().await;
        let controlled = Arc::new(Controlled::default());
        let mut changes = member.cache.changes();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut looked_at_all = false;
        loop {
            let ticked = tokio::select! {
                () = shutdown.cancelled() => return,
                _ = changes.changed() => false,
                _ = tick.tick() => true,
            };
            // Taken while another replica leads too, so the set holds only what is news.
            let changed = member.cache.changed_records().take();
            if !*leading.borrow() {
                // A new leader looks at every Workspace and writes what it sees afresh.
                looked_at_all = false;
                controlled.written.lock().expect("written").clear();
                continue;
            }
            let started = tokio::time::Instant::now();
            // A change is looked at at once, for its name only; every Workspace each second (a
            // retention comes due, a launch's mark lapses, without a change), and statuses are
            // written then only: a start that is over within the second costs one write
            // (`Running`), not one per step (at 10,000 workspaces the API server is what runs
            // out: BENCHMARKS.md).
            let full = ticked || changed.all || !looked_at_all;
            let records = if full {
                looked_at_all = true;
                controlled
                    .written
                    .lock()
                    .expect("written")
                    .retain(|name, _| member.cache.workspace(name).is_some());
                controlled
                    .snapshotting
                    .retain(|name| member.cache.workspace(name).is_some());
                member.cache.workspaces()
            } else {
                changed
                    .names
                    .iter()
                    .filter_map(|name| member.cache.workspace(name))
                    .collect()
            };
            self.pass(index, records, full, &controlled).await;
            tokio::time::sleep(started.elapsed().min(MAX_REST)).await;
        }
    }

    /// One look at `records`, Workspaces of the cluster `index`; their statuses written when
    /// `write` says.
    async fn pass(
        &self,
        index: usize,
        records: Vec<Arc<Workspace>>,
        write: bool,
        controlled: &Arc<Controlled>,
    ) {
        let member = &self.members[index];
        let now = Timestamp::now();
        for record in records {
            let name = record.name_any();
            if controlled.busy.lock().expect("busy").contains(&name) {
                continue;
            }
            let snapshots = member.config.snapshot_class_name.is_some();
            let pod = member.cache.pod_or_made(&name);
            // The home's finalizer first: a Workspace being deleted needs nothing else.
            let owns_home = member.own_home(&record).is_some();
            let step = finalize::finalize(&record, pod.as_deref(), owns_home, snapshots);
            if step != Finalize::Nothing {
                controlled.busy.lock().expect("busy").insert(name.clone());
                let (this, controlled) = (self.clone(), controlled.clone());
                tokio::spawn(async move {
                    let member = &this.members[index];
                    if let super::finalizer::After::Retry(wait) = this.finalize(member, &record, step).await {
                        tokio::time::sleep(wait).await;
                    }
                    controlled.busy.lock().expect("busy").remove(&record.name_any());
                    member.cache.changed_records().mark(&record.name_any());
                });
                continue;
            }
            if record.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if reconcile::expired(&record, (member.config.stopped_retention, snapshots), now) {
                controlled.busy.lock().expect("busy").insert(name.clone());
                let (this, controlled) = (self.clone(), controlled.clone());
                tokio::spawn(async move {
                    this.expire(&this.members[index], &record).await;
                    controlled.busy.lock().expect("busy").remove(&record.name_any());
                });
                continue;
            }
            match reconcile::next(&record, pod.as_deref()) {
                Next::Wait => self.snapshot_step(index, &record, pod.as_deref(), &controlled.snapshotting),
                next => {
                    controlled.busy.lock().expect("busy").insert(name.clone());
                    let (this, controlled) = (self.clone(), controlled.clone());
                    tokio::spawn(async move {
                        let member = &this.members[index];
                        let retry = this.act(member, &record, next).await;
                        if retry {
                            tokio::time::sleep(RETRY).await;
                        }
                        controlled.busy.lock().expect("busy").remove(&record.name_any());
                        // A change seen while it was busy was passed over: look again.
                        member.cache.changed_records().mark(&record.name_any());
                    });
                    continue;
                }
            }
            if write {
                let status = reconcile::status(&record, pod.as_deref(), &member.config, now);
                self.write_status(member, &record, status, controlled).await;
            }
        }
    }

    /// Starts or stops `record` as `next` says; whether to wait before trying again.
    async fn act(&self, member: &ClusterBackend<C>, record: &Workspace, next: Next) -> bool {
        let name = record.name_any();
        // The pod watch and the Workspace watch are two streams: the cache can show a start's new
        // pod before that start's `spec.started: true`, or a stop's gone pod before its `false`
        // (the 10,000 benchmark caught the first deleting five fresh starts). So the decision is
        // checked against the Workspace as the API server has it now: one GET, only when there
        // is a pod to make or delete.
        let record = match member.cluster.get_workspace(&name).await {
            Ok(Some(fresh)) if fresh.metadata.uid == record.metadata.uid => fresh,
            Ok(_) => return false,
            Err(error) => {
                tracing::info!(workspace = name, %error, "could not read the Workspace; trying again");
                return true;
            }
        };
        let pod = member.cache.pod_or_made(&name);
        if reconcile::next(&record, pod.as_deref()) != next {
            tracing::debug!(
                workspace = name,
                "the cache was behind the Workspace; nothing to do"
            );
            return false;
        }
        let record = &record;
        match next {
            Next::MakePod => match self
                .start_pod(member, record, reconcile::restore_from(record))
                .await
            {
                Ok(pod) => {
                    tracing::info!(
                        workspace = name,
                        pod = pod.name_any(),
                        "controller started the workspace"
                    );
                    false
                }
                Err(error) if error.is_transient() => {
                    tracing::info!(workspace = name, %error, "start not made; trying again");
                    true
                }
                Err(error) => {
                    tracing::warn!(workspace = name, %error, "start refused");
                    let status = reconcile::refused(
                        record,
                        error.condition_reason(),
                        error.public_message(),
                        Timestamp::now(),
                    );
                    if let Err(error) = member.cluster.workspace_status(&name, &status).await {
                        tracing::warn!(workspace = name, %error, "could not write the refusal");
                    }
                    false
                }
            },
            Next::RemovePod(uid) => match member.cluster.delete_pod(&name, Some(&uid)).await {
                Ok(_) => {
                    tracing::info!(workspace = name, "controller stopped the workspace");
                    false
                }
                Err(error) => {
                    tracing::warn!(workspace = name, %error, "could not delete a stopped workspace's pod");
                    true
                }
            },
            Next::Wait => false,
        }
    }

    /// Deletes `record`, stopped longer than `stoppedRetention`, with an Event that says so (its
    /// storage then goes as after any delete).
    async fn expire(&self, member: &ClusterBackend<C>, record: &Workspace) {
        let name = record.name_any();
        let since = record.status.as_ref().and_then(|s| s.stopped.as_ref());
        let note = format!(
            "deleted: stopped since {} ({}), longer than stoppedRetention",
            since.map(|s| s.at.0.to_string()).unwrap_or_default(),
            since.map_or("user", |s| s.reason.as_str()),
        );
        member
            .cluster
            .workspace_event(record, "StoppedRetention", note)
            .await;
        match member
            .cluster
            .delete_workspace(&name, record.metadata.uid.as_deref())
            .await
        {
            Ok(_) => tracing::info!(
                workspace = name,
                "deleted a workspace stopped past stoppedRetention"
            ),
            Err(error) if error.is_conflict() => {}
            Err(error) => tracing::warn!(workspace = name, %error, "could not delete an expired workspace"),
        }
    }

    /// Writes `status` as `record`'s unless it says what the record's (or the last written) does.
    async fn write_status(
        &self,
        member: &ClusterBackend<C>,
        record: &Workspace,
        status: WorkspaceStatus,
        controlled: &Controlled,
    ) {
        let name = record.name_any();
        let current = record.status.as_ref();
        let unchanged = current.is_some_and(|s| reconcile::same(s, &status))
            || controlled
                .written
                .lock()
                .expect("written")
                .get(&name)
                .is_some_and(|s| reconcile::same(s, &status));
        if unchanged {
            return;
        }
        match member.cluster.workspace_status(&name, &status).await {
            Ok(()) => {
                controlled.written.lock().expect("written").insert(name, status);
            }
            Err(error) if error.is_gone() => {}
            Err(error) => tracing::warn!(workspace = name, %error, "could not write a Workspace's status"),
        }
    }
}
