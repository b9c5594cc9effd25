//! What feeds a cache in the unit tests: the fake cluster, in place of the watches.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::{
    ResourceExt,
    runtime::{reflector, watcher},
};
use outfit_workspaces_core::resource::Workspace;
use tokio::sync::watch;

use super::{
    super::{
        changed_pods::ChangedPods,
        index::{EventIndex, OwnerIndex},
        own_writes::OwnWrites,
        snapshot_watch::SnapshotWatch,
    },
    Cache,
};

/// What feeds a cache made by [`Cache::fed`]: the unit tests' fake cluster, in place of the
/// watches.
pub(crate) struct CacheFeed {
    pods: reflector::store::Writer<Pod>,
    own_writes: OwnWrites,
    owner_index: OwnerIndex,
    changed_pods: ChangedPods,
    changed_records: ChangedPods,
    claims: reflector::store::Writer<PersistentVolumeClaim>,
    workspaces: reflector::store::Writer<Workspace>,
    changes: Arc<watch::Sender<u64>>,
    unreachable: Arc<watch::Sender<Option<String>>>,
}

impl CacheFeed {
    fn apply<K>(
        writer: &mut reflector::store::Writer<K>,
        event: watcher::Event<K>,
        changes: &watch::Sender<u64>,
    ) where
        K: kube::Resource<DynamicType = ()> + Clone,
    {
        writer.apply_watcher_event(&event);
        changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `pod` was made or changed.
    pub(crate) fn pod(&mut self, pod: Pod) {
        self.changed_pods.mark(&pod.name_any());
        self.changed_records.mark(&pod.name_any());
        self.own_writes.shown(&pod.name_any(), pod.uid().as_deref());
        let event = watcher::Event::Apply(pod);
        self.owner_index.observe(&event);
        Self::apply(&mut self.pods, event, &self.changes);
    }

    /// `pod` is gone.
    pub(crate) fn pod_gone(&mut self, pod: Pod) {
        self.changed_pods.mark(&pod.name_any());
        self.changed_records.mark(&pod.name_any());
        self.own_writes.shown(&pod.name_any(), pod.uid().as_deref());
        let event = watcher::Event::Delete(pod);
        self.owner_index.observe(&event);
        Self::apply(&mut self.pods, event, &self.changes);
    }

    /// `claim` was made or changed.
    pub(crate) fn claim(&mut self, claim: PersistentVolumeClaim) {
        Self::apply(&mut self.claims, watcher::Event::Apply(claim), &self.changes);
    }

    /// `claim` is gone.
    pub(crate) fn claim_gone(&mut self, claim: PersistentVolumeClaim) {
        Self::apply(&mut self.claims, watcher::Event::Delete(claim), &self.changes);
    }

    /// `workspace` was made or changed.
    pub(crate) fn workspace(&mut self, workspace: Workspace) {
        self.changed_records.mark(&workspace.name_any());
        Self::apply(
            &mut self.workspaces,
            watcher::Event::Apply(workspace),
            &self.changes,
        );
    }

    /// `workspace` is gone.
    pub(crate) fn workspace_gone(&mut self, workspace: Workspace) {
        self.changed_records.mark(&workspace.name_any());
        Self::apply(
            &mut self.workspaces,
            watcher::Event::Delete(workspace),
            &self.changes,
        );
    }

    /// The watches fail with `why` (`Some`), or answer again (`None`).
    pub(crate) fn set_unreachable(&mut self, why: Option<String>) {
        self.unreachable.send_replace(why);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Cache {
    /// A synced, empty cache of `namespace` that shows what its feed is given.
    pub(crate) fn fed(namespace: &str) -> (Self, CacheFeed) {
        Self::fed_beside(namespace, None)
    }

    /// As [`Cache::fed`], sharing the changes of `beside` when given (another cluster's cache).
    pub(crate) fn fed_beside(namespace: &str, beside: Option<&Cache>) -> (Self, CacheFeed) {
        let pods = reflector::store::Writer::default();
        let claims = reflector::store::Writer::default();
        let mut workspaces = reflector::store::Writer::<Workspace>::default();
        // Listed (empty) at once, as a watch's first list would leave it: the controller's
        // applier waits for that.
        workspaces.apply_watcher_event(&watcher::Event::InitDone);
        let events = reflector::store::Writer::<Event>::default();
        let changes = beside.map_or_else(|| Arc::new(watch::channel(0u64).0), |c| c.changes.clone());
        let unreachable = Arc::new(watch::channel(None::<String>).0);
        let changed_pods = ChangedPods::default();
        let changed_records = ChangedPods::default();
        let owner_index = OwnerIndex::owners();
        let own_writes = OwnWrites::default();
        let cache = Self {
            pods: pods.as_reader(),
            claims: claims.as_reader(),
            workspaces: workspaces.as_reader(),
            events: events.as_reader(),
            snapshots: None,
            event_index: EventIndex::events(),
            owner_index: owner_index.clone(),
            namespace: namespace.into(),
            changes: changes.clone(),
            synced: Arc::new(watch::channel(true).0),
            unreachable: unreachable.clone(),
            own_writes: own_writes.clone(),
            changed_pods: changed_pods.clone(),
            changed_records: changed_records.clone(),
        };
        (
            cache,
            CacheFeed {
                pods,
                own_writes,
                owner_index,
                changed_pods,
                changed_records,
                claims,
                workspaces,
                changes,
                unreachable,
            },
        )
    }
}

impl Cache {
    /// This cache, its snapshots shown by `snapshots` (one [`SnapshotWatch::fed`]).
    pub(crate) fn watching_snapshots(mut self, snapshots: SnapshotWatch) -> Self {
        self.snapshots = Some(snapshots);
        self
    }
}
