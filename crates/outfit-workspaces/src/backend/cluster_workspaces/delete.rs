//! A delete on one cluster: the pod judged as it stands (the cache's, or the API server's when the
//! cache is behind), its Workspace deleted first (or the controller would make the pod again),
//! its delete asked for, and a moment given for the cache to show it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::resource::{Workspace, reconcile::record_of};
use tokio::time::Instant;

use super::{ClusterWorkspaces, Seeker};
use crate::{
    backend::request::RequestError,
    io::{cache::OWN_WRITE_VISIBLE, calls::ClusterCalls},
};

/// What a delete found.
pub(crate) enum Deletion {
    /// No pod of the name that the caller may delete.
    None,
    /// The pod was already being deleted.
    Already(Arc<Pod>),
    /// Its delete was asked for.
    Requested(Arc<Pod>),
}

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// Deletes the pod `name` if `seeker` sees it. The pod is the cache's, or the API server's
    /// when the cache does not show it or shows an older pod of that name (the cache can be
    /// seconds behind, after an API server outage): a delete must never answer "no such
    /// workspace" for one that exists, nor delete a newer pod than the one it judged. A name
    /// `seeker` can't hold is not asked about (issue 46).
    pub(crate) async fn delete(&self, name: &str, seeker: Seeker<'_>) -> Result<Deletion, RequestError> {
        let allowed = |pod: &Pod| seeker.sees(pod);
        let mut cached = self.cache.pod(name).filter(|pod| allowed(pod));
        for _ in 0..2 {
            let pod = match cached.take() {
                Some(pod) => pod,
                None if !seeker.may_hold(name) => return Ok(Deletion::None),
                None => match self.cluster.get_pod(name).await? {
                    Some(pod) if allowed(&pod) => Arc::new(pod),
                    _ => return Ok(Deletion::None),
                },
            };
            let record_deleted = self.delete_record_of(&pod).await?;
            if pod.metadata.deletion_timestamp.is_some() {
                return Ok(Deletion::Already(pod));
            }
            match self.cluster.delete_pod(name, pod.uid().as_deref()).await {
                Ok(true) => return Ok(Deletion::Requested(pod)),
                // The garbage collector followed its Workspace's delete first.
                Ok(false) if record_deleted => return Ok(Deletion::Requested(pod)),
                Ok(false) => return Ok(Deletion::None),
                // The uid precondition failed: another pod has the name now; judge that one.
                Err(error) if error.is_conflict() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Deletion::None)
    }

    /// Deletes the Workspace that owns `pod`, if any (every pod made since issue 43 has one, a
    /// deic-dk `create_pod`'s too); whether it did. One gone already is no error.
    async fn delete_record_of(&self, pod: &Pod) -> Result<bool, RequestError> {
        let Some(owner) = record_of(pod) else {
            return Ok(false);
        };
        match self.cluster.delete_workspace(&owner.name, Some(&owner.uid)).await {
            Ok(deleted) => Ok(deleted),
            // Another Workspace has the name now: not this pod's.
            Err(error) if error.is_conflict() => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Waits (briefly) until the cache shows `pod` being deleted or gone, so that a request right
    /// after a delete sees it.
    pub(crate) async fn await_deleting(&self, pod: &Pod) {
        let deadline = Instant::now() + OWN_WRITE_VISIBLE;
        let (name, uid) = (pod.name_any(), pod.uid());
        self.cache
            .wait_for(deadline, |cache| {
                match cache.pod(&name).filter(|p| p.uid() == uid) {
                    Some(current) => current.metadata.deletion_timestamp.is_some().then_some(()),
                    None => Some(()),
                }
            })
            .await;
    }

    /// Waits (briefly) until the cache shows the Workspace `record` being deleted or gone: its
    /// pod can leave the cache before it does (two watches), and a read right after the delete's
    /// answer must not find the record and answer it as stopped.
    pub(crate) async fn await_record_deleting(&self, record: &Workspace) {
        self.await_record(record, |current| current.metadata.deletion_timestamp.is_some())
            .await;
    }

    /// Waits (briefly) until the cache shows `written`, a Workspace this process just stopped, as
    /// stopped (or gone), so that the next count of its owner's stopped workspaces has it.
    pub(crate) async fn await_record_stopped(&self, written: &Workspace) {
        self.await_record(written, |current| !current.spec.started).await;
    }

    /// Waits (briefly) until the cache shows `record` gone or, as it stands there, `done`.
    async fn await_record(&self, record: &Workspace, done: impl Fn(&Workspace) -> bool) {
        let deadline = Instant::now() + OWN_WRITE_VISIBLE;
        let (name, uid) = (record.name_any(), record.uid());
        self.cache
            .wait_for(deadline, |cache| {
                match cache.workspace(&name).filter(|r| r.uid() == uid) {
                    Some(current) => done(&current).then_some(()),
                    None => Some(()),
                }
            })
            .await;
    }
}
