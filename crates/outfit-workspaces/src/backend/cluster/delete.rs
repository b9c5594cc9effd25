//! A delete on one cluster: the pod judged as it stands (the cache's, or the API server's when the
//! cache is behind), its delete asked for, and a moment given for the cache to show it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::time::Instant;

use super::ClusterBackend;
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

impl<C: ClusterCalls> ClusterBackend<C> {
    /// Deletes the pod `name` if `allowed` accepts it. The pod is the cache's, or the API
    /// server's when the cache does not show it or shows an older pod of that name (the
    /// cache can be seconds behind, after an API server outage): a delete must never answer
    /// "no such workspace" for one that exists, nor delete a newer pod than the one it judged.
    pub(crate) async fn delete(
        &self,
        name: &str,
        allowed: impl Fn(&Pod) -> bool,
    ) -> Result<Deletion, RequestError> {
        let mut cached = self.cache.pod(name).filter(|pod| allowed(pod));
        for _ in 0..2 {
            let pod = match cached.take() {
                Some(pod) => pod,
                None => match self.cluster.get_pod(name).await? {
                    Some(pod) if allowed(&pod) => Arc::new(pod),
                    _ => return Ok(Deletion::None),
                },
            };
            if pod.metadata.deletion_timestamp.is_some() {
                return Ok(Deletion::Already(pod));
            }
            match self.cluster.delete_pod(name, pod.uid().as_deref()).await {
                Ok(true) => return Ok(Deletion::Requested(pod)),
                Ok(false) => return Ok(Deletion::None),
                // The uid precondition failed: another pod has the name now; judge that one.
                Err(error) if error.is_conflict() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Deletion::None)
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
}
