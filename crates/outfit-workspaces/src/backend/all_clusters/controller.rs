//! The Workspace controller: on the replica that holds a cluster's Lease, every Workspace of that
//! cluster is brought to what its spec says by kube-runtime's applier, one reconcile per
//! Workspace at a time, started by a change of the Workspace or its pod, and by the time something
//! falls due: a started one without a pod gets one (every start, the API's or kubectl's; a launch
//! that died between its record and its pod), one not started loses its pod (every stop), and its
//! status says where it stands. What to do is decided in `resource::reconcile` (pure); here it is
//! done. A start is made as the owner's launch would be (`records.rs`: entry, values, limits, the
//! snapshot it names); one refused for good is written to the status, where the start's request
//! reads it, and not tried again until the spec changes; one that failed for a passing reason is
//! tried again after a wait that doubles per Workspace. A user's stop request is decided here too
//! (`maxStoppedWorkspacesPerUser`), so every limit is counted in one process. A Workspace stopped
//! longer than `stoppedRetention` is deleted, with an Event, when that falls due.

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{Stream, StreamExt, stream};
use jiff::Timestamp;
use kube::{
    ResourceExt,
    runtime::{
        controller::{self, Action},
        reflector::ObjectRef,
    },
};
use outfit_workspaces_core::{
    model::user::UserId,
    policy::limits,
    resource::{
        Workspace, WorkspaceStatus,
        finalize::{self, Finalize},
        reconcile::{self, Next},
    },
};
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{Backend, home_snapshots::Snapshotting};
use crate::{
    backend::{cluster_workspaces::ClusterWorkspaces, request::RequestError},
    io::{cache::Cache, calls::ClusterCalls, cluster::ClusterError, metrics::Metrics},
};

/// How long a changed status waits before it is written: a start that is over within it costs
/// one write (`Running`), not one per step (at 10,000 workspaces the API server is what runs out:
/// BENCHMARKS.md).
const STATUS_SETTLES: Duration = Duration::from_secs(1);
/// How often a Workspace nothing happened to is looked at anyway.
const RESYNC: Duration = Duration::from_secs(300);
/// The first wait after a failed reconcile of a Workspace; it doubles with each failure in a row,
/// up to [`BACK_OFF_MOST`].
const BACK_OFF_FIRST: Duration = Duration::from_millis(500);
const BACK_OFF_MOST: Duration = Duration::from_secs(30);

/// Why a reconcile of a Workspace failed; it is tried again after a wait ([`Controlled::back_off`]).
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("reading the Workspace: {0}")]
    Read(ClusterError),
    #[error("making its pod: {0}")]
    Start(RequestError),
    #[error("deleting its pod: {0}")]
    Stop(ClusterError),
    #[error("deleting it past stoppedRetention: {0}")]
    Expire(ClusterError),
    #[error("its home's finalizer: {0}")]
    Finalize(ClusterError),
    #[error("writing its status: {0}")]
    Status(ClusterError),
    #[error("writing the decision on its stop: {0}")]
    Decide(ClusterError),
}

impl ReconcileError {
    /// The step that failed, as the metric names it.
    fn step(&self) -> &'static str {
        match self {
            Self::Read(_) => "read",
            Self::Start(_) => "start",
            Self::Stop(_) => "stop",
            Self::Expire(_) => "expire",
            Self::Finalize(_) => "finalize",
            Self::Status(_) => "status",
            Self::Decide(_) => "decide",
        }
    }
}

/// What the controller of one cluster keeps while it leads, per Workspace the cache holds.
struct Controlled<C> {
    backend: Backend<C>,
    index: usize,
    metrics: Arc<Metrics>,
    /// The status last written for each Workspace, so that a status is written once even while
    /// the cache has not shown it yet.
    written: Mutex<HashMap<String, WorkspaceStatus>>,
    /// Since when each Workspace's status differs from what was written ([`STATUS_SETTLES`]).
    unwritten_since: Mutex<HashMap<String, Instant>>,
    /// The failed reconciles in a row of each Workspace: its wait before the next.
    failures: Mutex<HashMap<String, u32>>,
    /// The snapshots of stopped homes under way: beside the reconciles, so that neither a start
    /// nor the status waits on a snapshot.
    snapshotting: Snapshotting,
}

impl<C: ClusterCalls> Backend<C> {
    /// Runs the controller of the cluster `index` (of [`Backend::members`]) until `shutdown`,
    /// acting while `leading` (that cluster's Lease) is held: a replica that loses the Lease
    /// drops its reconciles at once, and the next leader looks at every Workspace afresh.
    pub async fn control(
        self,
        (index, metrics): (usize, Arc<Metrics>),
        mut leading: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        let cache = self.members[index].cache.clone();
        cache.synced().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                led = leading.wait_for(|leads| *leads) => if led.is_err() { return },
            }
            let controlled = Arc::new(Controlled {
                backend: self.clone(),
                index,
                metrics: metrics.clone(),
                written: Mutex::default(),
                unwritten_since: Mutex::default(),
                failures: Mutex::default(),
                snapshotting: Snapshotting::default(),
            });
            let applied = controller::applier(
                |record, controlled: Arc<Controlled<C>>| {
                    Box::pin(async move { controlled.reconcile(record).await })
                },
                |record, error, controlled| controlled.back_off(&record, error),
                controlled.clone(),
                cache.workspace_store(),
                requests(cache.clone(), controlled),
                controller::Config::default(),
            )
            .for_each(|applied| async move {
                if let Err(error) = applied {
                    // A change of a Workspace gone by the time its turn came: nothing to do.
                    tracing::debug!(%error, "Workspace not reconciled");
                }
            });
            // A Lease no one tends any more (its sender gone) is never lost.
            let lost = async {
                if leading.wait_for(|leads| !*leads).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = lost => tracing::info!("lease lost: the controller stops"),
                () = applied => return,
            }
        }
    }
}

/// The Workspaces to reconcile: every one at first, then each whose Workspace or pod the cache
/// shows changed. What it names and the cache no longer holds is forgotten.
fn requests<C: ClusterCalls>(
    cache: Cache,
    controlled: Arc<Controlled<C>>,
) -> impl Stream<Item = Result<ObjectRef<Workspace>, Infallible>> {
    // Changes from before this lead are in the first look at every Workspace.
    cache.changed_records().take();
    let changes = cache.changes();
    let names = stream::unfold(
        (cache.clone(), changes, true),
        |(cache, mut changes, first)| async move {
            let changed = if first {
                None
            } else {
                changes.changed().await.ok()?;
                Some(cache.changed_records().take())
            };
            let names: Vec<String> = match changed {
                Some(changed) if !changed.all => changed.names.into_iter().collect(),
                _ => cache
                    .workspaces()
                    .iter()
                    .map(|record| record.name_any())
                    .collect(),
            };
            Some((stream::iter(names), (cache, changes, false)))
        },
    )
    .flatten();
    names.filter_map(move |name| {
        let request = match cache.workspace(&name) {
            Some(_) => Some(Ok(cache.workspace_ref(&name))),
            None => {
                controlled.forget(&name);
                None
            }
        };
        std::future::ready(request)
    })
}

impl<C: ClusterCalls> Controlled<C> {
    fn member(&self) -> &ClusterWorkspaces<C> {
        &self.backend.members[self.index]
    }

    /// Brings `record` one step towards its spec; when to look again.
    async fn reconcile(&self, record: Arc<Workspace>) -> Result<Action, ReconcileError> {
        let member = self.member();
        let name = record.name_any();
        let snapshots = member.config.snapshot_class_name.is_some();
        let pod = member.cache.pod_or_made(&name);
        // The home's finalizer first: a Workspace being deleted needs nothing else.
        let owns_home = member.own_home(&record).is_some();
        let step = finalize::finalize(&record, pod.as_deref(), owns_home, snapshots);
        if step != Finalize::Nothing {
            let after = self
                .backend
                .finalize(member, &record, step)
                .await
                .map_err(ReconcileError::Finalize)?;
            return Ok(self.succeeded(&name, after.map_or_else(Action::await_change, Action::requeue)));
        }
        if record.metadata.deletion_timestamp.is_some() {
            return Ok(self.succeeded(&name, Action::await_change()));
        }
        if let Some(at) = reconcile::stop_requested(&record) {
            self.decide_stop(&record, at).await?;
            return Ok(self.succeeded(&name, Action::await_change()));
        }
        let retention = (member.config.stopped_retention, snapshots);
        let now = Timestamp::now();
        if reconcile::expired(&record, retention, now) {
            expire(member, &record).await?;
            return Ok(self.succeeded(&name, Action::await_change()));
        }
        match reconcile::next(&record, pod.as_deref()) {
            Next::Wait => self
                .backend
                .snapshot_step(self.index, &record, pod.as_deref(), &self.snapshotting),
            next => {
                self.act(&record, next).await?;
                return Ok(self.succeeded(&name, Action::await_change()));
            }
        }
        let status = reconcile::status(&record, pod.as_deref(), &member.config, now);
        let settling = self.write_status(&record, status).await?;
        // Looked at again when its status is to be written, when it expires, or at the resync.
        let expires = reconcile::expires_at(&record, retention)
            .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or_default());
        let again = [settling, expires]
            .into_iter()
            .flatten()
            .fold(RESYNC, Duration::min);
        Ok(self.succeeded(&name, Action::requeue(again)))
    }

    /// Starts or stops `record` as `next` says.
    async fn act(&self, record: &Workspace, next: Next) -> Result<(), ReconcileError> {
        let member = self.member();
        let name = record.name_any();
        // The pod watch and the Workspace watch are two streams: the cache can show a start's new
        // pod before that start's `spec.started: true`, or a stop's gone pod before its `false`
        // (the 10,000 benchmark caught the first deleting five fresh starts). So the decision is
        // checked against the Workspace as the API server has it now: one GET, only when there
        // is a pod to make or delete.
        let record = match member.cluster.get_workspace(&name).await {
            Ok(Some(fresh)) if fresh.metadata.uid == record.metadata.uid => fresh,
            Ok(_) => return Ok(()),
            Err(error) => return Err(ReconcileError::Read(error)),
        };
        let pod = member.cache.pod_or_made(&name);
        if reconcile::next(&record, pod.as_deref()) != next {
            tracing::debug!(
                workspace = name,
                "the cache was behind the Workspace; nothing to do"
            );
            return Ok(());
        }
        match next {
            Next::MakePod => match self
                .backend
                .start_pod(member, &record, reconcile::restore_from(&record))
                .await
            {
                Ok(pod) => {
                    tracing::info!(
                        workspace = name,
                        pod = pod.name_any(),
                        "controller started the workspace"
                    );
                    Ok(())
                }
                Err(error) if error.is_transient() => Err(ReconcileError::Start(error)),
                Err(error) => {
                    tracing::warn!(workspace = name, %error, "start refused");
                    let status = reconcile::refused(
                        &record,
                        error.condition_reason(),
                        error.public_message(),
                        Timestamp::now(),
                    );
                    member
                        .cluster
                        .workspace_status(&name, &status)
                        .await
                        .map_err(ReconcileError::Status)
                }
            },
            Next::RemovePod(uid) => {
                member
                    .cluster
                    .delete_pod(&name, Some(&uid))
                    .await
                    .map_err(ReconcileError::Stop)?;
                tracing::info!(workspace = name, "controller stopped the workspace");
                Ok(())
            }
            Next::Wait => Ok(()),
        }
    }

    /// Decides on the user's stop of `record` requested at `at`: stopped, unless that would pass
    /// the owner's `maxStoppedWorkspacesPerUser` (each stopped workspace keeps its record and
    /// storage); then refused, and the request answers the refusal. In the owner's turn, and
    /// counted once the cache shows the last decision, so two requests at once, on any replicas,
    /// can't both pass the limit.
    async fn decide_stop(&self, record: &Workspace, at: Timestamp) -> Result<(), ReconcileError> {
        let member = self.member();
        let (name, uid) = (record.name_any(), record.uid().unwrap_or_default());
        let owner = record.spec.owner.as_str();
        let _turn = match UserId::parse(owner) {
            Ok(user) => Some(self.backend.turns.take(&user).await),
            Err(_) => None,
        };
        let stopped = self
            .backend
            .members
            .iter()
            .map(|member| member.cache.stopped_of(owner))
            .sum();
        let refused = limits::check_stopped(&member.config.limits, stopped)
            .err()
            .map(|exceeded| RequestError::from(exceeded).public_message());
        let (started, marks) = reconcile::stop_decision(at, refused.as_deref());
        // A refusal writes the answer only: `spec.started` written with it could undo a cull's
        // stop made meanwhile.
        let written = match started {
            false => member.cluster.set_started(&name, &uid, false, marks).await,
            true => member.cluster.annotate_workspace(&name, &uid, marks).await,
        };
        match written {
            Ok(written) if !started => {
                tracing::info!(
                    workspace = name,
                    "controller stopped the workspace as its owner asked"
                );
                member.await_record_stopped(&written).await;
                Ok(())
            }
            Ok(_) => {
                tracing::info!(workspace = name, refused, "stop refused");
                Ok(())
            }
            // Changed or gone since: the change brings it back as it is now.
            Err(error) if error.is_conflict() || error.is_gone() => Ok(()),
            Err(error) => Err(ReconcileError::Decide(error)),
        }
    }

    /// Writes `status` as `record`'s once it has differed from the record's (and the last written)
    /// for [`STATUS_SETTLES`]; until then, how long it has left.
    async fn write_status(
        &self,
        record: &Workspace,
        status: WorkspaceStatus,
    ) -> Result<Option<Duration>, ReconcileError> {
        let name = record.name_any();
        let unchanged = record
            .status
            .as_ref()
            .is_some_and(|s| reconcile::same(s, &status))
            || lock(&self.written)
                .get(&name)
                .is_some_and(|s| reconcile::same(s, &status));
        if unchanged {
            lock(&self.unwritten_since).remove(&name);
            return Ok(None);
        }
        let since = *lock(&self.unwritten_since)
            .entry(name.clone())
            .or_insert_with(Instant::now);
        let settled = since.elapsed();
        if settled < STATUS_SETTLES {
            return Ok(Some(STATUS_SETTLES - settled));
        }
        match self.member().cluster.workspace_status(&name, &status).await {
            Ok(()) => {
                lock(&self.unwritten_since).remove(&name);
                lock(&self.written).insert(name, status);
                Ok(None)
            }
            Err(error) if error.is_gone() => Ok(None),
            Err(error) => Err(ReconcileError::Status(error)),
        }
    }

    /// `action`, after a reconcile of `name` that did not fail: its next failure waits the least.
    fn succeeded(&self, name: &str, action: Action) -> Action {
        lock(&self.failures).remove(name);
        action
    }

    /// The error policy: `record`'s reconcile failed with `error`; it is tried again after a wait
    /// that doubles with each failure in a row.
    fn back_off(&self, record: &Workspace, error: &ReconcileError) -> Action {
        let name = record.name_any();
        let failures = {
            let mut failures = lock(&self.failures);
            let failed = failures.entry(name.clone()).or_default();
            *failed = failed.saturating_add(1);
            *failed
        };
        let wait = BACK_OFF_FIRST
            .saturating_mul(1 << (failures - 1).min(16))
            .min(BACK_OFF_MOST);
        self.metrics.reconcile_failed(error.step());
        tracing::info!(
            workspace = name,
            %error,
            failures,
            retry_in_ms = wait.as_millis() as u64,
            "reconcile failed; trying again"
        );
        Action::requeue(wait)
    }

    /// Forgets what is kept of `name`, whose Workspace is gone.
    fn forget(&self, name: &str) {
        lock(&self.written).remove(name);
        lock(&self.unwritten_since).remove(name);
        lock(&self.failures).remove(name);
        self.snapshotting.retain(|seen| seen != name);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().expect("controller state")
}

/// Deletes `record`, stopped longer than `stoppedRetention`, with an Event that says so (its
/// storage then goes as after any delete).
async fn expire<C: ClusterCalls>(
    member: &ClusterWorkspaces<C>,
    record: &Workspace,
) -> Result<(), ReconcileError> {
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
        Ok(_) => {
            tracing::info!(
                workspace = name,
                "deleted a workspace stopped past stoppedRetention"
            );
            Ok(())
        }
        Err(error) if error.is_conflict() => Ok(()),
        Err(error) => Err(ReconcileError::Expire(error)),
    }
}
