//! The calls the backend and the lifecycle make on the API server, as a trait, so that their
//! decisions (limits, ownership, deadlines, culling, the storage sweep) are unit-tested on plain
//! data: [`Cluster`] makes the calls for real (each forwards to its method of the same name,
//! documented there), and the unit tests' fake records them.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    time::Duration,
};

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service},
        networking::v1::{Ingress, NetworkPolicy},
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use outfit_workspaces_core::{
    model::user::UserId,
    resource::{Workspace, WorkspaceStatus},
    workspace::snapshot::VolumeSnapshot,
};

use super::cluster::{Cluster, ClusterError, made::MadeFor};

/// The API server as the backend and the lifecycle use it: the workspace namespace's pods, their
/// objects and Events, and the users' storage.
pub trait ClusterCalls: Clone + Send + Sync + 'static {
    /// Creates `pod`; 409 when its name is taken.
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<Pod, ClusterError>> + Send;
    /// The pod `name`, if there is one.
    fn get_pod(&self, name: &str) -> impl Future<Output = Result<Option<Pod>, ClusterError>> + Send;
    /// Deletes the pod `name` (only if its uid is `uid`, when given); `false` when it was gone.
    fn delete_pod(
        &self,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;
    /// Deletes what was made for the pod `pod` of `uid` (Services, Ingress, NetworkPolicy) that
    /// it still owns; failures are logged and left to the garbage collector.
    fn delete_made_for(&self, pod: &str, uid: &str) -> impl Future<Output = ()> + Send;
    /// Sets (`Some`) or removes (`None`) annotations of `pod`, only if it is still that pod.
    fn annotate_pod(
        &self,
        pod: &Pod,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Pod, ClusterError>> + Send;
    /// Makes `object`, owned by `owner`, unless it is there.
    fn ensure_service(
        &self,
        object: &Service,
        owner: &OwnerReference,
    ) -> impl Future<Output = Result<Service, ClusterError>> + Send;
    /// Makes `object`, owned by `owner`, unless it is there.
    fn ensure_ingress(
        &self,
        object: &Ingress,
        owner: &OwnerReference,
    ) -> impl Future<Output = Result<Ingress, ClusterError>> + Send;
    /// Makes `policy`, owned by `owner`, unless it is there.
    fn ensure_network_policy(
        &self,
        policy: &NetworkPolicy,
        owner: &OwnerReference,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// The file `/tmp/<key>` of `container` in `pod`, at most `limit` bytes.
    fn read_token(
        &self,
        pod: &str,
        container: &str,
        key: &str,
        limit: usize,
    ) -> impl Future<Output = Result<String, String>> + Send;
    /// Publishes an Event about `pod`.
    fn event(&self, pod: &Pod, warning: bool, reason: &str, note: String) -> impl Future<Output = ()> + Send;
    /// The last Warning Event from the cluster about the object with `uid`.
    fn last_warning(&self, uid: &str) -> impl Future<Output = Option<String>> + Send;
    /// The storage claim `name`, if there is one.
    fn claim(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<PersistentVolumeClaim>, ClusterError>> + Send;
    /// The volume `name`, if there is one.
    fn volume(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<PersistentVolume>, ClusterError>> + Send;
    /// Creates `volume`; 409 when its name is taken.
    fn create_volume(
        &self,
        volume: &PersistentVolume,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Creates `claim`; 409 when its name is taken.
    fn create_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Asks the claim `name` for `size` (a home grown for a manifest that needs more); the API
    /// server refuses it where the claim's class does not allow expansion.
    fn grow_claim(&self, name: &str, size: &str) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Marks the claim `name` as wanted until `until`.
    fn claim_storage(&self, name: &str, until: &str)
    -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Writes `mark` as the claim `name`'s use mark (only at version `seen`, when given; 409 when
    /// it changed since).
    fn mark_home_use(
        &self,
        name: &str,
        mark: &str,
        seen: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Deletes the claim and volume `name` (the claim only at version `seen`, when given; 409
    /// when it changed since).
    fn delete_storage(
        &self,
        name: &str,
        seen: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Waits up to `limit` for the claim `name` to be gone; whether it is.
    fn wait_claim_gone(
        &self,
        name: &str,
        limit: Duration,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;
    /// The per-user Leases earlier versions took turns on.
    fn old_turn_leases(&self) -> impl Future<Output = Result<Vec<Lease>, ClusterError>> + Send;
    /// Deletes the Lease `name` at version `seen`; 409 when it changed since.
    fn delete_lease(&self, name: &str, seen: &str) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// The pods that the namespace's outfit-made Services, Ingresses and NetworkPolicies were
    /// made for.
    fn made_for(&self) -> impl Future<Output = Result<BTreeSet<MadeFor>, ClusterError>> + Send;
    /// The Workspace `name`, if there is one.
    fn get_workspace(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Workspace>, ClusterError>> + Send;
    /// Creates `workspace`; 409 when its name is taken.
    fn create_workspace(
        &self,
        workspace: &Workspace,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send;
    /// Sets whether the Workspace `name` of `uid` is started, with `annotations` (`None`
    /// removes one): why a stop was asked for, how long a start's own create holds it.
    fn set_started(
        &self,
        name: &str,
        uid: &str,
        started: bool,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send;
    /// Deletes the Workspace `name` (only if its uid is `uid`, when given); `false` when gone.
    fn delete_workspace(
        &self,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;
    /// Publishes an Event about `workspace`.
    fn workspace_event(
        &self,
        workspace: &Workspace,
        reason: &str,
        note: String,
    ) -> impl Future<Output = ()> + Send;
    /// Writes the status of the Workspace `name`.
    fn workspace_status(
        &self,
        name: &str,
        status: &WorkspaceStatus,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Sets the finalizers of the Workspace `name` as it was at `resource_version` (409 when it
    /// changed since).
    fn set_workspace_finalizers(
        &self,
        name: &str,
        resource_version: &str,
        finalizers: Vec<String>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Merges `annotations` into the Workspace `name` of `uid` (`None` removes one).
    fn annotate_workspace(
        &self,
        name: &str,
        uid: &str,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> impl Future<Output = Result<Workspace, ClusterError>> + Send;
    /// Takes `snapshot`; 409 when its name is taken.
    fn create_snapshot(
        &self,
        snapshot: &VolumeSnapshot,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// The snapshot `name`, if there is one.
    fn get_snapshot(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<VolumeSnapshot>, ClusterError>> + Send;
    /// `user`'s snapshots.
    fn snapshots_of(
        &self,
        user: &UserId,
    ) -> impl Future<Output = Result<Vec<VolumeSnapshot>, ClusterError>> + Send;
    /// Deletes the snapshot `name`; gone counts as done.
    fn delete_snapshot(&self, name: &str) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// The placeholder pods (the watches leave them out).
    fn placeholders(&self) -> impl Future<Output = Result<Vec<Pod>, ClusterError>> + Send;
    /// The pods pulling images ahead (the watches leave them out too).
    fn pull_pods(&self) -> impl Future<Output = Result<Vec<Pod>, ClusterError>> + Send;
}

/// `impl ClusterCalls for Cluster`, each call forwarded to the method of the same name.
macro_rules! forward_to_cluster {
    ($($call:ident($($arg:ident: $type:ty),*) -> $output:ty;)*) => {
        impl ClusterCalls for Cluster {
            $(
                fn $call(&self, $($arg: $type),*) -> impl Future<Output = $output> + Send {
                    Cluster::$call(self, $($arg),*)
                }
            )*
        }
    };
}

forward_to_cluster! {
    create_pod(pod: &Pod) -> Result<Pod, ClusterError>;
    get_pod(name: &str) -> Result<Option<Pod>, ClusterError>;
    delete_pod(name: &str, uid: Option<&str>) -> Result<bool, ClusterError>;
    delete_made_for(pod: &str, uid: &str) -> ();
    annotate_pod(pod: &Pod, annotations: BTreeMap<&str, Option<String>>) -> Result<Pod, ClusterError>;
    ensure_service(object: &Service, owner: &OwnerReference) -> Result<Service, ClusterError>;
    ensure_ingress(object: &Ingress, owner: &OwnerReference) -> Result<Ingress, ClusterError>;
    ensure_network_policy(policy: &NetworkPolicy, owner: &OwnerReference) -> Result<(), ClusterError>;
    read_token(pod: &str, container: &str, key: &str, limit: usize) -> Result<String, String>;
    event(pod: &Pod, warning: bool, reason: &str, note: String) -> ();
    last_warning(uid: &str) -> Option<String>;
    claim(name: &str) -> Result<Option<PersistentVolumeClaim>, ClusterError>;
    volume(name: &str) -> Result<Option<PersistentVolume>, ClusterError>;
    create_volume(volume: &PersistentVolume) -> Result<(), ClusterError>;
    create_claim(claim: &PersistentVolumeClaim) -> Result<(), ClusterError>;
    grow_claim(name: &str, size: &str) -> Result<(), ClusterError>;
    claim_storage(name: &str, until: &str) -> Result<(), ClusterError>;
    mark_home_use(name: &str, mark: &str, seen: Option<&str>) -> Result<(), ClusterError>;
    delete_storage(name: &str, seen: Option<&str>) -> Result<(), ClusterError>;
    wait_claim_gone(name: &str, limit: Duration) -> Result<bool, ClusterError>;
    old_turn_leases() -> Result<Vec<Lease>, ClusterError>;
    delete_lease(name: &str, seen: &str) -> Result<(), ClusterError>;
    made_for() -> Result<BTreeSet<MadeFor>, ClusterError>;
    get_workspace(name: &str) -> Result<Option<Workspace>, ClusterError>;
    create_workspace(workspace: &Workspace) -> Result<Workspace, ClusterError>;
    set_started(name: &str, uid: &str, started: bool, annotations: BTreeMap<&str, Option<String>>) -> Result<Workspace, ClusterError>;
    delete_workspace(name: &str, uid: Option<&str>) -> Result<bool, ClusterError>;
    workspace_status(name: &str, status: &WorkspaceStatus) -> Result<(), ClusterError>;
    workspace_event(workspace: &Workspace, reason: &str, note: String) -> ();
    set_workspace_finalizers(name: &str, resource_version: &str, finalizers: Vec<String>) -> Result<(), ClusterError>;
    annotate_workspace(name: &str, uid: &str, annotations: BTreeMap<&str, Option<String>>) -> Result<Workspace, ClusterError>;
    create_snapshot(snapshot: &VolumeSnapshot) -> Result<(), ClusterError>;
    get_snapshot(name: &str) -> Result<Option<VolumeSnapshot>, ClusterError>;
    snapshots_of(user: &UserId) -> Result<Vec<VolumeSnapshot>, ClusterError>;
    delete_snapshot(name: &str) -> Result<(), ClusterError>;
    placeholders() -> Result<Vec<Pod>, ClusterError>;
    pull_pods() -> Result<Vec<Pod>, ClusterError>;
}
