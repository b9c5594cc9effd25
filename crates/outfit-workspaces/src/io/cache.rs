//! The watch caches the backend answers from: its pods, its users' storage claims, the
//! namespace's Workspaces and Events (and snapshots, [`SnapshotWatch`], where they are taken),
//! each kept current by a reflector, and a counter that moves on every change so that long polls
//! and progress streams wake on changes instead of polling the API server.

#[cfg(test)]
mod feed;

use std::{future::Future, sync::Arc, time::Duration};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::{
    Api, Client, ResourceExt,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use outfit_workspaces_core::{
    model::{self, keys, user::UserId},
    resource::Workspace,
    workspace::{self, snapshot::VolumeSnapshot},
};
use tokio::{sync::watch, time::Instant};

#[cfg(test)]
pub(crate) use self::feed::CacheFeed;
use super::{
    changed_pods::ChangedPods,
    index::{EventIndex, OwnerIndex},
    own_writes::OwnWrites,
    snapshot_watch::SnapshotWatch,
};

/// The backend's view of the cluster, as its watches last saw it.
#[derive(Clone)]
pub struct Cache {
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    workspaces: Store<Workspace>,
    events: Store<Event>,
    /// The namespace's snapshots, on a cluster that takes them.
    snapshots: Option<SnapshotWatch>,
    /// The cached Events by the uid of the pod they are about.
    event_index: EventIndex,
    /// The cached pods by their owner.
    owner_index: OwnerIndex,
    namespace: Arc<str>,
    changes: Arc<watch::Sender<u64>>,
    synced: Arc<watch::Sender<bool>>,
    /// `None` while the watches answer; why not, since the last failed one.
    unreachable: Arc<watch::Sender<Option<String>>>,
    /// What this process wrote and the watches may not show yet.
    own_writes: OwnWrites,
    /// The pods changed since the lifecycle last looked.
    changed_pods: ChangedPods,
    /// The names whose Workspace or pod changed since the Workspace controller last looked.
    changed_records: ChangedPods,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// Retries of a failed watch: 250 ms doubling to 4 s, reset by the next event. kube's default
/// (client-go's: 0.8 s doubling to 30 s) left the cache up to ~35 s behind the API server after an
/// outage in the soak (RELIABILITY.md), and a stale cache answers "no such workspace" for one that
/// exists. One backend, three watches: a retry every 4 s costs the API server nothing.
fn watch_backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(4))
        .with_factor(2.0)
        .without_max_times()
        .into()
}

impl Cache {
    /// The cache of `namespace`, and the task that keeps it current (run it until shutdown); its
    /// snapshots watched too when `snapshots` (the cluster takes them).
    pub fn new(
        client: &Client,
        namespace: &str,
        snapshots: bool,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        Self::with_changes(client, namespace, snapshots, Arc::new(watch::channel(0u64).0))
    }

    /// The cache of `namespace` on another cluster than `beside`'s, whose changes wake what
    /// waits on `beside` (and the other way round), so that one progress stream or long poll
    /// follows every cluster.
    pub fn new_beside(
        client: &Client,
        namespace: &str,
        snapshots: bool,
        beside: &Cache,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        Self::with_changes(client, namespace, snapshots, beside.changes.clone())
    }

    fn with_changes(
        client: &Client,
        namespace: &str,
        snapshots: bool,
        changes: Arc<watch::Sender<u64>>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let selector = format!("{}={}", keys::LABEL_MANAGED_BY, keys::MANAGED_BY);
        let own_writes = OwnWrites::default();
        let changed_pods = ChangedPods::default();
        let changed_records = ChangedPods::default();
        let event_index = EventIndex::events();
        let owner_index = OwnerIndex::owners();
        let (pods, pod_writer) = reflector::store();
        let (claims, claim_writer) = reflector::store();
        let (workspaces, workspace_writer) = reflector::store();
        let (events, event_writer) = reflector::store();
        let pod_stream = reflector::reflector(
            pod_writer,
            watcher(
                Api::<Pod>::namespaced(client.clone(), namespace),
                watcher::Config::default().labels(&selector),
            )
            .backoff(watch_backoff())
            .modify(|pod: &mut Pod| pod.metadata.managed_fields = None),
        )
        .inspect_ok({
            let (own_writes, changed_pods) = (own_writes.clone(), changed_pods.clone());
            let (owner_index, changed_records) = (owner_index.clone(), changed_records.clone());
            move |event| {
                owner_index.observe(event);
                match event {
                    watcher::Event::Apply(pod) | watcher::Event::Delete(pod) => {
                        let name = pod.name_any();
                        own_writes.shown(&name, pod.uid().as_deref());
                        changed_pods.mark(&name);
                        changed_records.mark(&name);
                    }
                    watcher::Event::InitApply(pod) => own_writes.shown(&pod.name_any(), pod.uid().as_deref()),
                    // A (re)list is in the store only now, and pods gone meanwhile left no Delete to
                    // name them: look at every pod.
                    watcher::Event::InitDone => {
                        changed_pods.mark_all();
                        changed_records.mark_all();
                    }
                    watcher::Event::Init => {}
                }
            }
        });
        let claim_stream = reflector::reflector(
            claim_writer,
            watcher(
                Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace),
                watcher::Config::default().labels(&selector),
            )
            .backoff(watch_backoff())
            .modify(|claim: &mut PersistentVolumeClaim| claim.metadata.managed_fields = None),
        );
        // Every Workspace of the namespace is outfit's: no selector.
        let workspace_stream = reflector::reflector(
            workspace_writer,
            watcher(
                Api::<Workspace>::namespaced(client.clone(), namespace),
                watcher::Config::default(),
            )
            .backoff(watch_backoff())
            .modify(|workspace: &mut Workspace| workspace.metadata.managed_fields = None),
        )
        .inspect_ok({
            let changed_records = changed_records.clone();
            move |event| match event {
                watcher::Event::Apply(record) | watcher::Event::Delete(record) => {
                    changed_records.mark(&record.name_any());
                }
                watcher::Event::InitDone => changed_records.mark_all(),
                watcher::Event::InitApply(_) | watcher::Event::Init => {}
            }
        });
        // The namespace's pod Events: the scheduler's and kubelet's say where a start stands.
        // The namespace holds workspaces only, and Events expire (an hour by default), so the
        // cache grows with the launches of the last hour; each is kept with only what a
        // progress report reads (about a third of an Event as the API server sends it).
        let event_stream = reflector::reflector(
            event_writer,
            watcher(
                Api::<Event>::namespaced(client.clone(), namespace),
                watcher::Config::default().fields("involvedObject.kind=Pod"),
            )
            .backoff(watch_backoff())
            .modify(slim_event),
        )
        .inspect_ok({
            let event_index = event_index.clone();
            move |event| event_index.observe(event)
        });
        let notify = changes.clone();
        let unreachable = Arc::new(watch::channel(None::<String>).0);
        let health = unreachable.clone();
        let synced = Arc::new(watch::channel(false).0);
        // kube's `Store::wait_until_ready` wakes only its last waiter; one waiter here tells all.
        let (first_pods, first_claims, first_events, tell) =
            (pods.clone(), claims.clone(), events.clone(), synced.clone());
        let first_workspaces = workspaces.clone();
        let sync = async move {
            let _ = first_pods.wait_until_ready().await;
            let _ = first_claims.wait_until_ready().await;
            let _ = first_workspaces.wait_until_ready().await;
            let _ = first_events.wait_until_ready().await;
            tell.send_replace(true);
        };
        let watching = async move {
            let events = futures::stream::select(
                futures::stream::select(
                    pod_stream.map(|e| e.map(|_| ())),
                    futures::stream::select(
                        claim_stream.map(|e| e.map(|_| ())),
                        workspace_stream.map(|e| e.map(|_| ())),
                    ),
                ),
                event_stream.map(|e| e.map(|_| ())),
            );
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(()) => {
                        if health.send_if_modified(|why| why.take().is_some()) {
                            tracing::info!("watches answer again");
                        }
                        notify.send_modify(|n| *n = n.wrapping_add(1));
                    }
                    // The watcher retries with backoff; the cache keeps its last view meanwhile,
                    // and says the cluster can't be reached until a watch answers again.
                    Err(error) => {
                        tracing::warn!(%error, "watch failed; retrying");
                        let why = format!("its API server does not answer ({error})");
                        if health.send_if_modified(|was| was.replace(why).is_none()) {
                            notify.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    }
                }
            }
        };
        let probe = probe(client.clone(), unreachable.clone(), changes.clone());
        let (snapshots, snapshot_task) = if snapshots {
            let (watch, task) = SnapshotWatch::new(client, namespace, watch_backoff(), changes.clone());
            (Some(watch), Some(task))
        } else {
            (None, None)
        };
        let snapshot_task = futures::future::OptionFuture::from(snapshot_task);
        let task = async move {
            futures::join!(sync, watching, probe, snapshot_task);
        };
        let cache = Self {
            pods,
            claims,
            workspaces,
            events,
            snapshots,
            event_index,
            owner_index,
            namespace: namespace.into(),
            changes,
            synced,
            unreachable,
            own_writes,
            changed_pods,
            changed_records,
        };
        (cache, task)
    }

    /// Waits until every watch has listed everything once.
    pub async fn synced(&self) {
        let _ = self.synced.subscribe().wait_for(|synced| *synced).await;
    }

    /// Why the cluster can't be reached (its last watch failed and none has answered since);
    /// `None` while it answers. Meanwhile the cache shows what it last saw.
    pub fn unreachable(&self) -> Option<String> {
        self.unreachable.borrow().clone()
    }

    /// The pod called `name`.
    pub fn pod(&self, name: &str) -> Option<Arc<Pod>> {
        self.pods.get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// The pod called `name` as the cache shows it, else as a create of this process made it
    /// (the watch may lag): whether the name is taken.
    pub fn pod_or_made(&self, name: &str) -> Option<Arc<Pod>> {
        match self.pod(name) {
            Some(pod) => {
                self.own_writes.shown(name, pod.uid().as_deref());
                Some(pod)
            }
            None => self.own_writes.made_pod(name),
        }
    }

    /// What this process wrote and the watches may not show yet.
    pub fn own_writes(&self) -> &OwnWrites {
        &self.own_writes
    }

    /// The pods changed since the lifecycle last looked: it takes them.
    pub fn changed_pods(&self) -> &ChangedPods {
        &self.changed_pods
    }

    /// The names whose Workspace or pod changed since the Workspace controller last looked: it
    /// takes them.
    pub fn changed_records(&self) -> &ChangedPods {
        &self.changed_records
    }

    /// `user`'s pod called `name`; `None` when there is none or it is someone else's. Ownership is
    /// the exact user id, never the labels two ids can share.
    pub fn owned_pod(&self, user: &UserId, name: &str) -> Option<Arc<Pod>> {
        self.pod(name)
            .filter(|pod| model::user::belongs_to(pod.as_ref(), user))
    }

    /// Every pod of `user`, in name order.
    pub fn pods_of(&self, user: &UserId) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self
            .owner_index
            .refs_of(user.as_str())
            .iter()
            .filter_map(|pod| self.pods.get(pod))
            // The index follows the watch, a step behind the store: the store has the last word.
            .filter(|pod| model::user::belongs_to(pod.as_ref(), user))
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// Every pod the backend made.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.pods.state()
    }

    /// The storage claim called `name`.
    pub fn claim(&self, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// Every storage claim the backend made.
    pub fn claims(&self) -> Vec<Arc<PersistentVolumeClaim>> {
        self.claims.state()
    }

    /// The Workspace called `name`.
    pub fn workspace(&self, name: &str) -> Option<Arc<Workspace>> {
        self.workspaces.get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// The Workspaces' store itself, which the controller's applier reads.
    pub fn workspace_store(&self) -> Store<Workspace> {
        self.workspaces.clone()
    }

    /// The reference to the Workspace called `name` in the store.
    pub fn workspace_ref(&self, name: &str) -> ObjectRef<Workspace> {
        ObjectRef::new(name).within(&self.namespace)
    }

    /// Every Workspace of the namespace.
    pub fn workspaces(&self) -> Vec<Arc<Workspace>> {
        self.workspaces.state()
    }

    /// Every Workspace of `user`.
    pub fn workspaces_of(&self, user: &UserId) -> Vec<Arc<Workspace>> {
        let mut owned: Vec<Arc<Workspace>> = self
            .workspaces
            .state()
            .into_iter()
            .filter(|ws| ws.spec.owner == user.as_str())
            .collect();
        owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        owned
    }

    /// How many of the Workspaces of the owner `owner` are stopped
    /// (`maxStoppedWorkspacesPerUser` counts them).
    pub fn stopped_of(&self, owner: &str) -> usize {
        self.workspaces
            .state()
            .iter()
            .filter(|ws| ws.spec.owner == owner && !ws.spec.started)
            .count()
    }

    /// `user`'s snapshots as the watch last saw them; `None` where snapshots are not watched or
    /// the watch can't say (not listed yet, or failed since): the API server has them.
    pub fn snapshots_of(&self, user: &UserId) -> Option<Vec<Arc<VolumeSnapshot>>> {
        self.snapshots.as_ref()?.of(user)
    }

    /// The snapshot `name` as the watch last saw it (`None` where snapshots are not watched).
    pub fn snapshot(&self, name: &str) -> Option<Arc<VolumeSnapshot>> {
        self.snapshots.as_ref()?.get(name)
    }

    /// Whether this cache watches snapshots.
    pub fn watches_snapshots(&self) -> bool {
        self.snapshots.is_some()
    }

    /// The Events about the object with `uid`, oldest first.
    pub fn events_of(&self, uid: &str) -> Vec<Arc<Event>> {
        let mut events: Vec<Arc<Event>> = self
            .event_index
            .refs_of(uid)
            .iter()
            .filter_map(|event| self.events.get(event))
            .collect();
        events.sort_by_key(|e| workspace::progress::event_time(e));
        events
    }

    /// A receiver that sees every change of the cache.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Evaluates `check` now and after every change until it gives an answer or `deadline`
    /// passes (then `None`).
    pub async fn wait_for<T>(
        &self,
        deadline: Instant,
        mut check: impl FnMut(&Self) -> Option<T>,
    ) -> Option<T> {
        let mut changes = self.changes();
        loop {
            changes.borrow_and_update();
            if let Some(answer) = check(self) {
                return Some(answer);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The watch task is gone (shutdown): nothing will change any more.
                Ok(Err(_)) => return check(self),
                Err(_) => return None,
            }
        }
    }
}

/// How often the API server is asked whether it answers, and how long it has to answer.
const PROBE_EVERY: Duration = Duration::from_secs(3);
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the API server's `/livez` every [`PROBE_EVERY`]: a watch that merely goes quiet
/// (a partition drops packets, nothing resets the connection) reports no error, and a watch
/// that resumes reports nothing until something changes, so its errors alone can't say
/// whether the cluster answers. `/livez`, not `/version`: API Priority and Fairness exempts it
/// (the `probes` FlowSchema), where `/version` queues with the backend's own requests, and at
/// 10,000 workspaces on a saturated API server it waited past the timeout 22 times while the
/// cluster answered (BENCHMARKS.md).
async fn probe(
    client: Client,
    unreachable: Arc<watch::Sender<Option<String>>>,
    changes: Arc<watch::Sender<u64>>,
) {
    loop {
        let livez = async {
            let request = hyper::Request::get("/livez")
                .body(Vec::new())
                .expect("a GET of a fixed path is a valid request");
            client.request_text(request).await
        };
        let why = match tokio::time::timeout(PROBE_TIMEOUT, livez).await {
            Ok(Ok(_)) => None,
            Ok(Err(error)) => Some(format!("its API server does not answer ({error})")),
            Err(_) => Some(format!(
                "its API server did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            )),
        };
        let changed = unreachable.send_if_modified(|was| match (&why, was.is_some()) {
            (None, true) => {
                tracing::info!("the API server answers again");
                *was = None;
                true
            }
            (Some(why), false) => {
                tracing::warn!(why, "the API server can't be reached");
                *was = Some(why.clone());
                true
            }
            _ => false,
        });
        if changed {
            changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
}

/// Drops what a progress report never reads from an Event before it is cached.
fn slim_event(event: &mut Event) {
    let meta = &mut event.metadata;
    meta.managed_fields = None;
    meta.annotations = None;
    meta.labels = None;
    event.related = None;
    event.reporting_instance = None;
    event.source = None;
    event.action = None;
    let object = &mut event.involved_object;
    object.api_version = None;
    object.resource_version = None;
    object.namespace = None;
}

/// How long a handler waits for a change the backend made itself to show in the cache.
pub const OWN_WRITE_VISIBLE: Duration = Duration::from_secs(10);
