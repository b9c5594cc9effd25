//! The work that follows a create, driven by what the cache shows rather than by the request that
//! started it, so a restarted backend (or a second replica) carries on where the last one stopped:
//!
//! - a pod that turned Ready gets what its [`StartPlan`] says (NetworkPolicy, Services, Ingress,
//!   tokens), then is marked started;
//! - a pod past its deadline (stored on the pod), or that ended, is marked failed with the phase
//!   it was stuck in and its last Warning event, reported in an Event, and removed; the Services
//!   and Ingress it owns go with it (deleted with it, and by the garbage collector);
//! - a started workspace past its lifetime or idle too long is culled: an Event says why, and it
//!   is deleted;
//! - user storage that no pod uses and no create wants any more is removed (deic-dk removes it
//!   with the user's last pod; the NFS data stays, the volume's reclaim policy is Retain);
//! - Services, Ingresses and NetworkPolicies whose pod is gone are removed ([`orphans`]: a
//!   replica killed between a pod's delete and theirs leaves them);
//! - the configured number of placeholder pods is kept ([`placeholders`]);
//! - the catalogue's images are pulled ahead onto the nodes ([`pre_pull`], a task of its own).

pub mod activity;
mod cull;
mod old_leases;
mod orphans;
mod placeholders;
pub mod pre_pull;
mod storage;

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{self, config::Config, duration, keys},
    policy::culling::{self, Cull},
    resource::{
        StopReason,
        reconcile::{self, record_of},
    },
    workspace::{
        placeholder,
        progress::{self, Phase, deadline, failure, storage_claim_of},
        start::{self, StartPlan, TokenRead},
    },
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::io::{
    cache::Cache,
    calls::ClusterCalls,
    cluster::{self, Cluster},
    metrics::Metrics,
};

/// Token reads are retried this often, this far apart, as deic-dk does.
const TOKEN_TRIES: usize = 10;
const TOKEN_RETRY: Duration = Duration::from_secs(1);
/// How often the lifecycle looks again when nothing changed (deadlines pass without events).
const TICK: Duration = Duration::from_secs(1);
/// The longest rest after a pass (see [`Lifecycle::run`]).
const MAX_REST: Duration = Duration::from_millis(500);
/// How often the leader sweeps unused storage.
const STORAGE_SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Finishes and fails creates, and sweeps unused storage.
#[derive(Clone)]
pub struct Lifecycle<C = Cluster> {
    /// The cluster's name (`placeholders.clusters` keys).
    name: String,
    config: Arc<Config>,
    cluster: C,
    cache: Cache,
    metrics: Arc<Metrics>,
    /// Pods a task is working on, so one pass never starts a second task for the same pod.
    busy: Arc<Mutex<HashSet<String>>>,
    /// Whether this replica holds the Lease: only the leader acts, so with several replicas
    /// nothing is finished, failed, culled or swept twice.
    leading: watch::Receiver<bool>,
}

impl<C> std::fmt::Debug for Lifecycle<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle").finish_non_exhaustive()
    }
}

/// What to do with a creating pod now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Nothing yet.
    Wait,
    /// It is ready: make its Services, Ingress and tokens.
    Finish,
    /// It will never be ready: remove it, saying why.
    Fail(Phase, String),
    /// It was marked failed but is still there (the delete did not go through): delete again.
    Remove,
    /// Its time is up: delete it, saying why.
    Cull(Cull),
}

/// Why a start was not finished.
#[derive(Debug)]
enum Unfinished {
    /// The pod was deleted, or replaced by another of its name, meanwhile.
    Gone,
    /// The API server could not be reached or failed: the next pass tries again (the pod
    /// stays ready, and the steps done are not done twice).
    Later(cluster::ClusterError),
    /// A step failed: the start has failed.
    Failed(Phase, String),
}

/// Decides what a creating pod needs, from the pod, its storage claim's state, the Events about
/// it and the time.
pub fn next_step(
    pod: &Pod,
    claim: Option<&k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    events: &[Arc<Event>],
    now: Timestamp,
) -> Next {
    // Failed or culled: only the delete is left to do (again, if it did not go through).
    if failure(pod).is_some() || pod.annotations().contains_key(keys::ANNOTATION_CULLED) {
        return if pod.metadata.deletion_timestamp.is_none() {
            Next::Remove
        } else {
            Next::Wait
        };
    }
    if progress::stage(pod) != progress::Stage::Creating {
        return Next::Wait;
    }
    if progress::is_ready(pod) {
        return Next::Finish;
    }
    let deadline = deadline(pod);
    let past = deadline.is_none_or(|d| now >= d);
    if past || progress::has_ended(pod) {
        let (phase, why) = progress::stuck(pod, claim);
        let why = if past {
            format!("{why} (not ready by the create deadline)")
        } else {
            why
        };
        return Next::Fail(phase, why);
    }
    // Placed on a node that can never run it: failed now rather than at the deadline.
    if let Some(why) = progress::permanent_failure(events) {
        return Next::Fail(Phase::Scheduling, why);
    }
    Next::Wait
}

impl<C: ClusterCalls> Lifecycle<C> {
    /// The lifecycle of the pods in `cache`, acting while `leading` is true.
    pub fn new(
        config: Arc<Config>,
        cluster: C,
        cache: Cache,
        metrics: Arc<Metrics>,
        leading: watch::Receiver<bool>,
    ) -> Self {
        Self {
            name: config.default_cluster.clone(),
            config,
            cluster,
            cache,
            metrics,
            busy: Arc::default(),
            leading,
        }
    }

    /// The same, for the cluster `name` (the default cluster's otherwise).
    #[must_use]
    pub fn named(self, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..self
        }
    }

    /// Runs until `shutdown`: a look at the pods that changed on every change of the cache, and
    /// at every pod every second (deadlines and culls come due without a change).
    pub async fn run(self, shutdown: CancellationToken) {
        self.cache.synced().await;
        tracing::debug!("lifecycle started");
        let mut changes = self.cache.changes();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut storage_swept = tokio::time::Instant::now();
        let mut leases_swept: Option<tokio::time::Instant> = None;
        let mut made_swept: Option<tokio::time::Instant> = None;
        let mut placeholders_kept: Option<tokio::time::Instant> = None;
        let mut unused_storage = storage::Unused::default();
        let mut peak = placeholder::Peak::default();
        let mut looked_at_all = false;
        loop {
            let ticked = tokio::select! {
                () = shutdown.cancelled() => return,
                _ = changes.changed() => false,
                _ = tick.tick() => true,
            };
            // Taken while another replica leads too, so the set holds only what is news.
            let changed = self.cache.changed_pods().take();
            if !*self.leading.borrow() {
                // On taking the lead, look at every pod and sweep at once: the last leader may
                // have died mid-start or mid-delete.
                looked_at_all = false;
                made_swept = None;
                placeholders_kept = None;
                // Another leader may have seen the storage used meanwhile: count afresh.
                unused_storage = storage::Unused::default();
                continue;
            }
            let started = tokio::time::Instant::now();
            if ticked || changed.all || !looked_at_all {
                looked_at_all = true;
                let running = self.count_running();
                let now = Timestamp::now().as_second().max(0) as u64;
                peak.record(now, running, self.config.placeholders.peak_window);
                self.pass(self.cache.pods());
            } else {
                self.pass(
                    changed
                        .names
                        .iter()
                        .filter_map(|name| self.cache.pod(name))
                        .collect(),
                );
            }
            // At 10,000 workspaces a pass over every pod takes a few milliseconds (BENCHMARKS.md).
            // Resting as long as the pass took keeps the lifecycle to half a core at most, at the
            // cost of that much delay.
            tokio::time::sleep(started.elapsed().min(MAX_REST)).await;
            // Storage changes rarely; every few seconds is soon enough.
            if storage_swept.elapsed() >= STORAGE_SWEEP_EVERY {
                storage_swept = tokio::time::Instant::now();
                let now = storage_swept;
                storage::sweep(&self.cluster, &self.cache, &self.config, &mut unused_storage, now).await;
            }
            if leases_swept.is_none_or(|at| at.elapsed() >= old_leases::SWEEP_EVERY) {
                old_leases::sweep(&self.cluster).await;
                leases_swept = Some(tokio::time::Instant::now());
            }
            if made_swept.is_none_or(|at| at.elapsed() >= orphans::SWEEP_EVERY) {
                orphans::sweep(&self.cluster, &self.cache).await;
                made_swept = Some(tokio::time::Instant::now());
            }
            let every = if self.config.placeholders.any() {
                placeholders::SWEEP_EVERY
            } else {
                placeholders::SWEEP_EVERY_IDLE
            };
            if placeholders_kept.is_none_or(|at| at.elapsed() >= every) {
                let want = self.config.placeholders.wanted(&self.name, peak.most());
                placeholders::keep(&self.cluster, &self.config.placeholders, want, &self.metrics).await;
                placeholders_kept = Some(tokio::time::Instant::now());
            }
        }
    }

    /// Counts the started workspaces for the metrics (and the placeholders' peak).
    fn count_running(&self) -> usize {
        let running = self
            .cache
            .pods()
            .iter()
            .filter(|p| {
                progress::stage(p) == progress::Stage::Settled
                    && p.annotations().contains_key(keys::ANNOTATION_STARTED)
            })
            .count();
        self.metrics.set_running(running);
        running
    }

    /// One pass over `pods`: what each needs now, each done in a task of its own.
    fn pass(&self, pods: Vec<Arc<Pod>>) {
        for (pod, next) in self.due(pods, Timestamp::now()) {
            let name = pod.name_any();
            tracing::debug!(pod = name, ?next, "next step");
            if !self.busy.lock().expect("busy set").insert(name.clone()) {
                continue;
            }
            let this = self.clone();
            tokio::spawn(async move {
                this.act(&pod, next).await;
                // Wait for the cache to show what the task wrote before the pod may be picked
                // again, so a pass never repeats the work on a stale copy.
                let version = pod.resource_version();
                let deadline = tokio::time::Instant::now() + crate::io::cache::OWN_WRITE_VISIBLE;
                this.cache
                    .wait_for(deadline, |cache| {
                        let current = cache.pod(&pod.name_any());
                        (current.is_none_or(|p| p.resource_version() != version)).then_some(())
                    })
                    .await;
                this.busy.lock().expect("busy set").remove(&name);
                // A change seen while the task ran was passed over: look again.
                this.cache.changed_pods().mark(&name);
            });
        }
    }

    /// Those of `pods` that need something done at `now`, and what.
    fn due(&self, pods: Vec<Arc<Pod>>, now: Timestamp) -> Vec<(Arc<Pod>, Next)> {
        let mut due = Vec::new();
        for pod in pods {
            let claim = storage_claim_of(&pod).and_then(|name| self.cache.claim(name));
            // Only a start under way reads its Events (next_step asks them of no other pod), so
            // the pass over every pod each second collects and sorts none for the started ones.
            let events = match pod.uid() {
                Some(uid) if progress::stage(&pod) == progress::Stage::Creating => self.cache.events_of(&uid),
                _ => Vec::new(),
            };
            let next = match next_step(&pod, claim.as_deref(), &events, now) {
                Next::Wait => match culling::due(&pod, &self.config, now) {
                    Some(cull) => Next::Cull(cull),
                    None => continue,
                },
                next => next,
            };
            due.push((pod, next));
        }
        due
    }

    /// Does what `pod` needs.
    async fn act(&self, pod: &Pod, next: Next) {
        let name = pod.name_any();
        match next {
            Next::Finish => match self.finish(pod).await {
                Ok(()) => {}
                Err(Unfinished::Gone) => {
                    tracing::debug!(
                        pod = name,
                        "deleted (or made anew) while its start was being finished"
                    );
                    // Its delete may have cleaned up before these were made.
                    if let Some(uid) = pod.uid() {
                        self.cluster.delete_made_for(&name, &uid).await;
                    }
                }
                Err(Unfinished::Later(error)) => tracing::warn!(
                    pod = name,
                    %error,
                    "could not finish the start; retrying on the next pass"
                ),
                Err(Unfinished::Failed(phase, why)) => self.fail(pod, phase, why).await,
            },
            Next::Fail(phase, why) => self.fail(pod, phase, why).await,
            Next::Remove => self.finish_removal(pod).await,
            Next::Cull(_) => self.cull(pod).await,
            Next::Wait => {}
        }
    }

    /// The start jobs: what the pod's [`StartPlan`] says, applied.
    async fn finish(&self, pod: &Pod) -> Result<(), Unfinished> {
        let plan =
            start::plan(pod, &self.config).map_err(|e| Unfinished::Failed(Phase::Services, e.to_string()))?;
        self.apply(pod, &plan).await?;
        let elapsed = since_created(pod);
        self.metrics.spawned(&manifest_name(pod), None, elapsed);
        let took = duration::format(elapsed);
        tracing::info!(
            pod = pod.name_any(),
            user = model::user::owner_of(pod),
            took,
            "workspace ready"
        );
        self.cluster
            .event(pod, false, "WorkspaceReady", format!("ready after {took}"))
            .await;
        Ok(())
    }

    /// Makes the plan's NetworkPolicy, Services and Ingress, reads its tokens, and marks the pod
    /// started with what they gave.
    async fn apply(&self, pod: &Pod, plan: &StartPlan) -> Result<(), Unfinished> {
        let refused = |e: cluster::ClusterError| {
            if e.is_transient() {
                Unfinished::Later(e)
            } else {
                // The reason is shown to the user: the API server's verdict, the dump in the log.
                tracing::warn!(pod = pod.name_any(), error = %e, "a start job was refused");
                Unfinished::Failed(Phase::Services, e.public_message())
            }
        };
        tracing::debug!(pod = pod.name_any(), "pod ready; making its services");
        let ssh_node_port = self.make_objects(plan).await.map_err(refused)?;
        tracing::debug!(pod = pod.name_any(), "services made; reading tokens");
        let tokens = match &plan.tokens {
            Some(read) => self.read_tokens(pod, read).await,
            None => BTreeMap::new(),
        };
        let marks = plan.marks(ssh_node_port, &tokens, Timestamp::now());
        // Gone: the user deleted it meanwhile (the Services and Ingress made for it go with it,
        // by their owner reference); not a failed start.
        self.cluster
            .annotate_pod(pod, marks)
            .await
            .map_err(|e| if e.is_gone() { Unfinished::Gone } else { refused(e) })?;
        Ok(())
    }

    /// Makes the plan's objects, each owned by the pod; answers the ssh Service's node port.
    async fn make_objects(&self, plan: &StartPlan) -> Result<Option<i32>, cluster::ClusterError> {
        // Made at create; made here only when this process's create did not make it (another
        // replica's did, or the backend restarted between the create and now).
        if let Some(policy) = &plan.network_policy
            && !self.cache.own_writes().take_isolated(&plan.owner.uid).await
        {
            self.cluster.ensure_network_policy(policy, &plan.owner).await?;
        }
        let mut node_port = None;
        if let Some(service) = &plan.ssh_service {
            let made = self.cluster.ensure_service(service, &plan.owner).await?;
            node_port = made
                .spec
                .and_then(|s| s.ports)
                .and_then(|p| p.first().and_then(|p| p.node_port));
        }
        if let Some((service, ingress)) = &plan.http {
            self.cluster.ensure_service(service, &plan.owner).await?;
            self.cluster.ensure_ingress(ingress, &plan.owner).await?;
        }
        Ok(node_port)
    }

    /// The tokens `read` names, each from `/tmp/<key>` of its container. A token that can't be
    /// read is left out (deic-dk does the same) and logged; no retry starts past the create's
    /// deadline, so a missing token never holds up the answer.
    async fn read_tokens(&self, pod: &Pod, read: &TokenRead) -> BTreeMap<String, String> {
        let deadline = deadline(pod);
        let mut tokens = BTreeMap::new();
        for key in &read.keys {
            let mut last_error = String::new();
            for attempt in 0..TOKEN_TRIES {
                if attempt > 0 {
                    if deadline.is_some_and(|d| Timestamp::now() + TOKEN_RETRY >= d) {
                        break;
                    }
                    tokio::time::sleep(TOKEN_RETRY).await;
                }
                match self
                    .cluster
                    .read_token(
                        &pod.name_any(),
                        &read.container,
                        key,
                        self.config.token_byte_limit,
                    )
                    .await
                {
                    Ok(value) => {
                        tokens.insert(key.clone(), value);
                        break;
                    }
                    Err(error) => {
                        tracing::debug!(pod = pod.name_any(), key, attempt, error, "token not read yet");
                        last_error = error;
                    }
                }
            }
            if !tokens.contains_key(key) {
                tracing::warn!(pod = pod.name_any(), key, error = last_error, "token not read");
            }
        }
        tokens
    }

    /// Marks the create failed, reports it, and removes the pod (and so what it owns).
    async fn fail(&self, pod: &Pod, phase: Phase, why: String) {
        let name = pod.name_any();
        let warning = match pod.uid() {
            Some(uid) => self.cluster.last_warning(&uid).await,
            None => None,
        };
        let reason = match warning {
            Some(warning) => format!("{phase}: {why}; last warning: {warning}"),
            None => format!("{phase}: {why}"),
        };
        tracing::warn!(
            pod = name,
            user = model::user::owner_of(pod),
            reason,
            "create failed; removing the pod"
        );
        // The mark first: a leader killed after it leaves the survivor only the stop or the
        // delete (`Next::Remove`), so the Event and the count are never made twice. Then the
        // Event: the controller may delete the pod the moment its Workspace is stopped, and
        // whoever sees it gone must find why.
        let mark = BTreeMap::from([(keys::ANNOTATION_FAILED, Some(reason.clone()))]);
        if let Err(error) = self.cluster.annotate_pod(pod, mark).await
            && !error.is_gone()
        {
            tracing::warn!(%error, "could not mark the failed pod");
        }
        self.metrics
            .spawned(&manifest_name(pod), Some(phase.as_str()), since_created(pod));
        self.cluster.event(pod, true, "CreateFailed", reason).await;
        // Its Workspace stops, or the controller would make the pod again and again; the
        // controller then deletes the pod.
        let stopped = self.stop_record(pod, StopReason::Failed).await;
        if !stopped {
            self.remove(pod).await;
        }
    }

    /// Stops the Workspace `pod` belongs to, if any, for `reason`: it keeps its record (and
    /// storage) for a start, the controller does not make its pod again, and the controller
    /// deletes this one (`true`). A Workspace gone or replaced meanwhile is left alone; any other
    /// failure is logged. Either way (`false`) the caller deletes the pod itself.
    async fn stop_record(&self, pod: &Pod, reason: StopReason) -> bool {
        let Some(owner) = record_of(pod) else { return false };
        let marks = reconcile::stop_marks(reason, Timestamp::now());
        match self
            .cluster
            .set_started(&owner.name, &owner.uid, false, marks)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    workspace = owner.name,
                    reason = reason.as_str(),
                    "workspace stopped"
                );
                true
            }
            Err(error) if error.is_gone() => false,
            Err(error) => {
                tracing::warn!(workspace = owner.name, %error, "could not stop the workspace");
                false
            }
        }
    }

    /// The end of a failed or culled pod (marked so) whose removal did not go through: a stopped
    /// Workspace's pod is the controller's to delete; a started one's (a leader killed between
    /// the mark and the stop) is stopped as the mark says, or the controller would make the pod
    /// again; a pod without one is deleted.
    async fn finish_removal(&self, pod: &Pod) {
        let record = record_of(pod).and_then(|owner| {
            self.cache
                .workspace(&owner.name)
                .filter(|r| r.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                .filter(|r| r.metadata.deletion_timestamp.is_none())
        });
        match record {
            Some(record) if !record.spec.started => {}
            Some(_) if self.stop_record(pod, marked_stop_reason(pod)).await => {}
            _ => self.remove(pod).await,
        }
    }

    async fn remove(&self, pod: &Pod) {
        if let Err(error) = self
            .cluster
            .delete_pod(&pod.name_any(), pod.uid().as_deref())
            .await
        {
            tracing::warn!(%error, pod = pod.name_any(), "could not remove the failed pod; retrying on the next pass");
        }
    }
}

/// Why a pod marked failed or culled was stopped, from its mark (the cull's text says which).
fn marked_stop_reason(pod: &Pod) -> StopReason {
    match pod.annotations().get(keys::ANNOTATION_CULLED) {
        Some(why) if why.starts_with(culling::IDLE_PREFIX) => StopReason::Idle,
        Some(_) => StopReason::Lifetime,
        None => StopReason::Failed,
    }
}

/// The manifest a pod was made from, for the spawn metrics.
fn manifest_name(pod: &Pod) -> String {
    pod.annotations()
        .get(keys::ANNOTATION_MANIFEST_NAME)
        .cloned()
        .unwrap_or_else(|| "unknown".to_owned())
}

/// How long ago the pod was created.
fn since_created(pod: &Pod) -> Duration {
    pod.creation_timestamp()
        .map(|t| Duration::from_secs(Timestamp::now().duration_since(t.0).as_secs().max(0) as u64))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
