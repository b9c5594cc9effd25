//! A unit-test fake of [`ClusterCalls`]: the objects as plain data, every call recorded, and what
//! it writes shown in a [`Cache`] the way the watches would show it. The end-to-end tests run the
//! same code against a real API server.

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service},
        networking::v1::{Ingress, NetworkPolicy},
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::OwnerReference},
};
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{
        config::Config,
        keys,
        user::{UserId, belongs_to},
    },
    resource::{Workspace, WorkspaceStatus},
    workspace::{self, snapshot::VolumeSnapshot},
};
use serde_json::json;

use super::{
    cache::{Cache, CacheFeed},
    calls::ClusterCalls,
    cluster::{ClusterError, made::MadeFor},
};

/// The namespace the fake's objects live in.
pub(crate) const NAMESPACE: &str = "sciencedata-dev";

/// What the backend's and the lifecycle's tests start from: the configuration `env` gives (the
/// `BACKEND_*` variables; a later pair wins over an earlier one), an empty cluster and its cache.
pub(crate) fn on_fake(env: &[(&str, &str)]) -> (Arc<Config>, FakeCluster, Cache) {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let config = Config::load(None, |var| env.get(var).cloned()).unwrap().0;
    let (fake, cache) = FakeCluster::new();
    (Arc::new(config), fake, cache)
}

/// What the fake holds.
#[derive(Default)]
pub(crate) struct State {
    pub pods: BTreeMap<String, Pod>,
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    pub volumes: BTreeMap<String, PersistentVolume>,
    pub leases: BTreeMap<String, Lease>,
    pub workspaces: BTreeMap<String, Workspace>,
    pub snapshots: BTreeMap<String, VolumeSnapshot>,
    /// The pods the namespace's Services, Ingresses and NetworkPolicies were made for.
    pub made: BTreeSet<MadeFor>,
    /// Every call, as "call name", in order.
    pub calls: Vec<String>,
    /// Storage whose delete is refused with 409 (it changed since it was seen).
    pub conflicts: HashSet<String>,
    /// How long a `set_started` takes before it is stored (an API server's round trip), so that
    /// requests at once interleave as they do on a real one.
    pub started_latency: std::time::Duration,
    /// The same for a `create_snapshot`.
    pub snapshot_latency: std::time::Duration,
    /// How many pod creates from now on the API server refuses with 503, as one whose storage or
    /// webhook is away does.
    pub pod_creates_refused: u32,
    /// When each pod create was asked for (the test clock's time).
    pub pod_creates_at: Vec<tokio::time::Instant>,
    versions: u64,
}

impl State {
    fn version(&mut self) -> String {
        self.versions += 1;
        self.versions.to_string()
    }
}

/// The fake cluster; clones share their state.
#[derive(Clone)]
pub(crate) struct FakeCluster {
    state: Arc<Mutex<State>>,
    feed: Arc<Mutex<CacheFeed>>,
}

/// An error as the API server answers it.
pub(crate) fn api_error(code: u16, reason: &str, action: &str) -> ClusterError {
    let status = json!({"status": "Failure", "code": code, "reason": reason, "message": reason});
    ClusterError {
        action: action.to_owned(),
        source: kube::Error::Api(serde_json::from_value(status).expect("a Status")),
    }
}

impl FakeCluster {
    /// An empty cluster, and the cache that watches it.
    pub(crate) fn new() -> (Self, Cache) {
        let (cache, feed) = Cache::fed(NAMESPACE);
        let fake = Self {
            state: Arc::default(),
            feed: Arc::new(Mutex::new(feed)),
        };
        (fake, cache)
    }

    /// An empty cluster beside the one whose cache is `other`: its cache's changes wake what
    /// waits on `other`'s, as the watches of several clusters do.
    pub(crate) fn beside(other: &Cache) -> (Self, Cache) {
        let (cache, feed) = Cache::fed_beside(NAMESPACE, Some(other));
        let fake = Self {
            state: Arc::default(),
            feed: Arc::new(Mutex::new(feed)),
        };
        (fake, cache)
    }

    /// The cluster's watches fail with `why` (`Some`), or answer again (`None`).
    pub(crate) fn set_unreachable(&self, why: Option<&str>) {
        self.feed
            .lock()
            .expect("feed")
            .set_unreachable(why.map(str::to_owned));
    }

    /// Reads or changes the state.
    pub(crate) fn with<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        change(&mut self.state.lock().expect("fake state"))
    }

    /// The calls so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.with(|s| s.calls.clone())
    }

    /// How many calls were made whose record starts with `prefix` (`"create_snapshot"`).
    pub(crate) fn count_calls(&self, prefix: &str) -> usize {
        self.with(|s| s.calls.iter().filter(|c| c.starts_with(prefix)).count())
    }

    /// Stores `pod` (in the namespace, with a version) as if made earlier.
    pub(crate) fn put_pod(&self, mut pod: Pod) {
        pod.metadata.namespace = Some(NAMESPACE.to_owned());
        let stored = self.with(|s| {
            pod.metadata.resource_version = Some(s.version());
            s.pods.insert(pod.name_any(), pod.clone());
            pod
        });
        self.feed.lock().expect("feed").pod(stored);
    }

    /// Stores `claim` (in the namespace, with a version) as if made earlier.
    pub(crate) fn put_claim(&self, mut claim: PersistentVolumeClaim) {
        claim.metadata.namespace = Some(NAMESPACE.to_owned());
        let stored = self.with(|s| {
            claim.metadata.resource_version = Some(s.version());
            s.claims.insert(claim.name_any(), claim.clone());
            claim
        });
        self.feed.lock().expect("feed").claim(stored);
    }

    /// Stores `workspace` (in the namespace, with a version and a generation) and shows it.
    pub(crate) fn put_workspace(&self, mut workspace: Workspace) -> Workspace {
        workspace.metadata.namespace = Some(NAMESPACE.to_owned());
        let name = workspace.metadata.name.clone().unwrap_or_default();
        workspace
            .metadata
            .uid
            .get_or_insert_with(|| format!("ws-uid-{name}"));
        let stored = self.with(|s| {
            workspace.metadata.resource_version = Some(s.version());
            let generation = s
                .workspaces
                .get(&name)
                .and_then(|w| w.metadata.generation)
                .unwrap_or(0);
            let spec_changed = s.workspaces.get(&name).is_none_or(|w| w.spec != workspace.spec);
            workspace.metadata.generation = Some(generation + i64::from(spec_changed));
            s.workspaces.insert(name, workspace.clone());
            workspace
        });
        self.feed.lock().expect("feed").workspace(stored.clone());
        stored
    }

    /// The Workspace `name` of `uid` with `marks` merged into its annotations (`None` removes
    /// one) and `change` made, stored as a merge patch would leave it; 404 when there is none.
    fn patch_workspace(
        &self,
        (name, uid): (&str, &str),
        doing: &str,
        marks: BTreeMap<&str, Option<String>>,
        change: impl FnOnce(&mut Workspace),
    ) -> Result<Workspace, ClusterError> {
        let stored = self.with(|s| {
            s.workspaces
                .get(name)
                .filter(|w| w.metadata.uid.as_deref() == Some(uid))
                .cloned()
        });
        let Some(mut workspace) = stored else {
            return Err(api_error(404, "NotFound", doing));
        };
        let annotations = workspace.metadata.annotations.get_or_insert_default();
        for (key, value) in marks {
            match value {
                Some(value) => annotations.insert(key.to_owned(), value),
                None => annotations.remove(key),
            };
        }
        change(&mut workspace);
        Ok(self.put_workspace(workspace))
    }

    fn record(&self, call: String) {
        self.with(|s| s.calls.push(call));
    }

    /// Deletes `workspace` as the API server does: gone at once without finalizers, else marked
    /// with a deletion timestamp until they are all removed.
    fn remove_workspace(&self, mut workspace: Workspace) {
        if workspace
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty())
        {
            if workspace.metadata.deletion_timestamp.is_none() {
                workspace.metadata.deletion_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
                );
                self.put_workspace(workspace);
            }
            return;
        }
        let name = workspace.metadata.name.clone().unwrap_or_default();
        if let Some(gone) = self.with(|s| s.workspaces.remove(&name)) {
            self.feed.lock().expect("feed").workspace_gone(gone);
        }
    }

    /// The pods labelled `label`.
    fn labelled(&self, label: &str) -> Vec<Pod> {
        self.with(|s| {
            s.pods
                .values()
                .filter(|pod| pod.labels().contains_key(label))
                .cloned()
                .collect()
        })
    }
}

impl ClusterCalls for FakeCluster {
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<Pod, ClusterError>> + Send {
        let name = pod.name_any();
        self.record(format!("create_pod {name}"));
        let (taken, refused) = self.with(|s| {
            s.pod_creates_at.push(tokio::time::Instant::now());
            let refused = s.pod_creates_refused > 0;
            s.pod_creates_refused = s.pod_creates_refused.saturating_sub(1);
            (s.pods.contains_key(&name), refused)
        });
        let mut pod = pod.clone();
        pod.metadata.uid = Some(format!("uid-{name}"));
        let result = if refused {
            Err(api_error(503, "ServiceUnavailable", "creating Pod"))
        } else if taken {
            Err(api_error(409, "AlreadyExists", "creating Pod"))
        } else {
            self.put_pod(pod);
            Ok(self.with(|s| s.pods[&name].clone()))
        };
        async move { result }
    }

    fn get_pod(&self, name: &str) -> impl Future<Output = Result<Option<Pod>, ClusterError>> + Send {
        self.record(format!("get_pod {name}"));
        let pod = self.with(|s| s.pods.get(name).cloned());
        async move { Ok(pod) }
    }

    fn delete_pod(
        &self,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send {
        self.record(format!("delete_pod {name}"));
        let result = self.with(|s| match s.pods.get(name) {
            None => Ok(None),
            Some(pod) if uid.is_some_and(|uid| pod.metadata.uid.as_deref() != Some(uid)) => {
                Err(api_error(409, "Conflict", "deleting Pod"))
            }
            Some(_) => Ok(s.pods.remove(name)),
        });
        let result = result.map(|gone| match gone {
            Some(pod) => {
                self.feed.lock().expect("feed").pod_gone(pod);
                true
            }
            None => false,
        });
        async move { result }
    }

    fn annotate_pod(
        &self,
        pod: &Pod,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Pod, ClusterError>> + Send {
        let name = pod.name_any();
        let marks: Vec<String> = annotations.keys().map(|k| (*k).to_owned()).collect();
        self.record(format!("annotate_pod {name} {}", marks.join(",")));
        let stored = self.with(|s| s.pods.get(&name).filter(|p| p.uid() == pod.uid()).cloned());
        let result = match stored {
            None => Err(api_error(404, "NotFound", "annotating Pod")),
            Some(mut stored) => {
                let current = stored.annotations_mut();
                for (key, value) in annotations {
                    match value {
                        Some(value) => current.insert(key.to_owned(), value),
                        None => current.remove(key),
                    };
                }
                self.put_pod(stored);
                Ok(self.with(|s| s.pods[&name].clone()))
            }
        };
        async move { result }
    }

    fn ensure_service(
        &self,
        object: &Service,
        _owner: &OwnerReference,
    ) -> impl Future<Output = Result<Service, ClusterError>> + Send {
        self.record(format!("ensure_service {}", object.name_any()));
        let mut made = object.clone();
        // The API server picks a NodePort Service's node port.
        let spec = made.spec.as_mut().expect("a Service spec");
        if spec.type_.as_deref() == Some("NodePort") {
            for port in spec.ports.iter_mut().flatten() {
                port.node_port = Some(30022);
            }
        }
        async move { Ok(made) }
    }

    fn ensure_ingress(
        &self,
        object: &Ingress,
        _owner: &OwnerReference,
    ) -> impl Future<Output = Result<Ingress, ClusterError>> + Send {
        self.record(format!("ensure_ingress {}", object.name_any()));
        let made = object.clone();
        async move { Ok(made) }
    }

    fn ensure_network_policy(
        &self,
        policy: &NetworkPolicy,
        _owner: &OwnerReference,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("ensure_network_policy {}", policy.name_any()));
        async { Ok(()) }
    }

    fn read_token(
        &self,
        pod: &str,
        container: &str,
        key: &str,
        _limit: usize,
    ) -> impl Future<Output = Result<String, String>> + Send {
        self.record(format!("read_token {pod}/{container} {key}"));
        let token = format!("token-{key}");
        async move { Ok(token) }
    }

    fn delete_made_for(&self, pod: &str, uid: &str) -> impl Future<Output = ()> + Send {
        self.record(format!("delete_made_for {pod}"));
        self.with(|s| {
            s.made
                .retain(|made| (made.pod.as_str(), made.uid.as_str()) != (pod, uid))
        });
        async {}
    }

    fn event(
        &self,
        pod: &Pod,
        _warning: bool,
        reason: &str,
        _note: String,
    ) -> impl Future<Output = ()> + Send {
        self.record(format!("event {} {reason}", pod.name_any()));
        async {}
    }

    async fn last_warning(&self, _uid: &str) -> Option<String> {
        None
    }

    fn claim(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<PersistentVolumeClaim>, ClusterError>> + Send {
        self.record(format!("claim {name}"));
        let claim = self.with(|s| s.claims.get(name).cloned());
        async move { Ok(claim) }
    }

    fn volume(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<PersistentVolume>, ClusterError>> + Send {
        self.record(format!("volume {name}"));
        let volume = self.with(|s| s.volumes.get(name).cloned());
        async move { Ok(volume) }
    }

    fn create_volume(
        &self,
        volume: &PersistentVolume,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let name = volume.name_any();
        self.record(format!("create_volume {name}"));
        let taken = self.with(|s| s.volumes.insert(name, volume.clone()).is_some());
        let result = match taken {
            true => Err(api_error(409, "AlreadyExists", "creating PersistentVolume")),
            false => Ok(()),
        };
        async move { result }
    }

    fn create_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let name = claim.name_any();
        self.record(format!("create_claim {name}"));
        let result = match self.with(|s| s.claims.contains_key(&name)) {
            true => Err(api_error(409, "AlreadyExists", "creating PersistentVolumeClaim")),
            false => {
                self.put_claim(claim.clone());
                Ok(())
            }
        };
        async move { result }
    }

    fn grow_claim(&self, name: &str, size: &str) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("grow_claim {name} {size}"));
        let grown = self.with(|s| {
            let claim = s.claims.get_mut(name)?;
            let spec = claim.spec.get_or_insert_with(Default::default);
            spec.resources
                .get_or_insert_with(Default::default)
                .requests
                .get_or_insert_with(Default::default)
                .insert("storage".to_owned(), Quantity(size.to_owned()));
            Some(claim.clone())
        });
        if let Some(claim) = grown {
            self.feed.lock().expect("feed").claim(claim);
        }
        async { Ok(()) }
    }

    fn claim_storage(
        &self,
        name: &str,
        _until: &str,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("claim_storage {name}"));
        async { Ok(()) }
    }

    fn mark_home_use(
        &self,
        name: &str,
        mark: &str,
        seen: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("mark_home_use {name} {mark}"));
        let marked = self.with(|s| {
            let version = s.version();
            let claim = s.claims.get_mut(name)?;
            if seen.is_some_and(|seen| claim.metadata.resource_version.as_deref() != Some(seen)) {
                return Some(Err(api_error(409, "Conflict", "marking PersistentVolumeClaim")));
            }
            claim
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(keys::ANNOTATION_HOME_USE.to_owned(), mark.to_owned());
            claim.metadata.resource_version = Some(version);
            Some(Ok(claim.clone()))
        });
        let result = match marked {
            None => Err(api_error(404, "NotFound", "marking PersistentVolumeClaim")),
            Some(Err(error)) => Err(error),
            Some(Ok(claim)) => {
                self.feed.lock().expect("feed").claim(claim);
                Ok(())
            }
        };
        async move { result }
    }

    fn delete_storage(
        &self,
        name: &str,
        seen: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("delete_storage {name}"));
        let result = self.with(|s| {
            let changed = s.claims.get(name).is_some_and(|c| {
                seen.is_some_and(|seen| c.metadata.resource_version.as_deref() != Some(seen))
            });
            if changed || s.conflicts.contains(name) {
                return Err(api_error(409, "Conflict", "deleting PersistentVolumeClaim"));
            }
            s.volumes.remove(name);
            Ok(s.claims.remove(name))
        });
        let result = result.map(|gone| {
            if let Some(claim) = gone {
                self.feed.lock().expect("feed").claim_gone(claim);
            }
        });
        async move { result }
    }

    fn wait_claim_gone(
        &self,
        name: &str,
        _limit: Duration,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send {
        let gone = self.with(|s| !s.claims.contains_key(name));
        async move { Ok(gone) }
    }

    fn old_turn_leases(&self) -> impl Future<Output = Result<Vec<Lease>, ClusterError>> + Send {
        self.record("old_turn_leases".to_owned());
        let leases = self.with(|s| s.leases.values().cloned().collect());
        async move { Ok(leases) }
    }

    fn delete_lease(&self, name: &str, seen: &str) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("delete_lease {name}"));
        let result = self.with(|s| match s.leases.get(name) {
            Some(lease) if lease.metadata.resource_version.as_deref() != Some(seen) => {
                Err(api_error(409, "Conflict", "deleting Lease"))
            }
            _ => {
                s.leases.remove(name);
                Ok(())
            }
        });
        async move { result }
    }

    fn made_for(&self) -> impl Future<Output = Result<BTreeSet<MadeFor>, ClusterError>> + Send {
        self.record("made_for".to_owned());
        let made = self.with(|s| s.made.clone());
        async move { Ok(made) }
    }

    fn get_workspace(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Workspace>, ClusterError>> + Send {
        self.record(format!("get_workspace {name}"));
        let found = self.with(|s| s.workspaces.get(name).cloned());
        async move { Ok(found) }
    }

    fn create_workspace(
        &self,
        workspace: &Workspace,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send {
        let name = workspace.metadata.name.clone().unwrap_or_default();
        self.record(format!("create_workspace {name}"));
        let result = if self.with(|s| s.workspaces.contains_key(&name)) {
            Err(api_error(409, "AlreadyExists", "creating Workspace"))
        } else {
            Ok(self.put_workspace(workspace.clone()))
        };
        async move { result }
    }

    fn set_started(
        &self,
        name: &str,
        uid: &str,
        started: bool,
        marks: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send {
        self.record(format!("set_started {name} {started}"));
        let latency = self.with(|s| s.started_latency);
        let (this, name, uid) = (self.clone(), name.to_owned(), uid.to_owned());
        let marks: BTreeMap<String, Option<String>> =
            marks.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let marks = marks.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            this.patch_workspace((&name, &uid), "setting started", marks, |workspace| {
                workspace.spec.started = started;
            })
        }
    }

    fn delete_workspace(
        &self,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send {
        self.record(format!("delete_workspace {name}"));
        let result = self.with(|s| match s.workspaces.get(name) {
            None => Ok(None),
            Some(ws) if uid.is_some_and(|uid| ws.metadata.uid.as_deref() != Some(uid)) => {
                Err(api_error(409, "Conflict", "deleting Workspace"))
            }
            Some(ws) => Ok(Some(ws.clone())),
        });
        let result = result.map(|found| match found {
            Some(workspace) => {
                self.remove_workspace(workspace);
                true
            }
            None => false,
        });
        async move { result }
    }

    fn set_workspace_finalizers(
        &self,
        name: &str,
        resource_version: &str,
        finalizers: Vec<String>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("set_workspace_finalizers {name} {finalizers:?}"));
        let stored = self.with(|s| s.workspaces.get(name).cloned());
        let result = match stored {
            None => Err(api_error(404, "NotFound", "setting finalizers")),
            Some(w) if w.metadata.resource_version.as_deref() != Some(resource_version) => {
                Err(api_error(409, "Conflict", "setting finalizers"))
            }
            Some(mut workspace) => {
                workspace.metadata.finalizers = Some(finalizers);
                if workspace.metadata.deletion_timestamp.is_some() {
                    self.remove_workspace(workspace);
                } else {
                    self.put_workspace(workspace);
                }
                Ok(())
            }
        };
        async move { result }
    }

    fn workspace_event(
        &self,
        workspace: &Workspace,
        reason: &str,
        _note: String,
    ) -> impl Future<Output = ()> + Send {
        self.record(format!(
            "workspace_event {} {reason}",
            workspace.metadata.name.as_deref().unwrap_or_default()
        ));
        async {}
    }

    fn workspace_status(
        &self,
        name: &str,
        status: &WorkspaceStatus,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("workspace_status {name} {:?}", status.phase));
        let stored = self.with(|s| s.workspaces.get(name).cloned());
        let result = match stored {
            None => Err(api_error(404, "NotFound", "writing a Workspace's status")),
            Some(mut workspace) => {
                workspace.status = Some(status.clone());
                self.put_workspace(workspace);
                Ok(())
            }
        };
        async move { result }
    }

    fn annotate_workspace(
        &self,
        name: &str,
        uid: &str,
        marks: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send {
        self.record(format!("annotate_workspace {name}"));
        let result = self.patch_workspace((name, uid), "annotating Workspace", marks, |_| {});
        async move { result }
    }

    fn create_snapshot(
        &self,
        snapshot: &VolumeSnapshot,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let name = snapshot.name().to_owned();
        self.record(format!("create_snapshot {name}"));
        let latency = self.with(|s| s.snapshot_latency);
        let (this, mut stored) = (self.clone(), snapshot.clone());
        async move {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            this.with(|s| {
                if s.snapshots.contains_key(&name) {
                    return Err(api_error(409, "AlreadyExists", "creating VolumeSnapshot"));
                }
                stored.metadata.creation_timestamp = Some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
                );
                s.snapshots.insert(name, stored);
                Ok(())
            })
        }
    }

    fn get_snapshot(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<VolumeSnapshot>, ClusterError>> + Send {
        self.record(format!("get_snapshot {name}"));
        let found = self.with(|s| s.snapshots.get(name).cloned());
        async move { Ok(found) }
    }

    fn snapshots_of(
        &self,
        user: &UserId,
    ) -> impl Future<Output = Result<Vec<VolumeSnapshot>, ClusterError>> + Send {
        self.record(format!("snapshots_of {user}"));
        let found = self.with(|s| {
            s.snapshots
                .values()
                .filter(|snapshot| belongs_to(*snapshot, user))
                .cloned()
                .collect()
        });
        async move { Ok(found) }
    }

    fn delete_snapshot(&self, name: &str) -> impl Future<Output = Result<(), ClusterError>> + Send {
        self.record(format!("delete_snapshot {name}"));
        self.with(|s| s.snapshots.remove(name));
        async { Ok(()) }
    }

    fn placeholders(&self) -> impl Future<Output = Result<Vec<Pod>, ClusterError>> + Send {
        self.record("placeholders".to_owned());
        let found = self.labelled(workspace::placeholder::LABEL);
        async move { Ok(found) }
    }

    fn pull_pods(&self) -> impl Future<Output = Result<Vec<Pod>, ClusterError>> + Send {
        self.record("pull_pods".to_owned());
        let found = self.labelled(workspace::pre_pull::LABEL);
        async move { Ok(found) }
    }
}
