//! The home's finalizer, applied (what to do is `resource::finalize`, pure): the controller adds
//! it to a Workspace that owns a home while homes are snapshotted, and, once the Workspace is being
//! deleted by anyone but the native API (which saves the home itself first), stops its pod, saves
//! its home and removes it, so the garbage collector takes the home only once it is saved.

use std::time::Duration;

use kube::ResourceExt;
use outfit_workspaces_core::resource::{
    Workspace,
    finalize::{self, Finalize},
};

use super::Backend;
use crate::{
    backend::{cluster_workspaces::ClusterWorkspaces, request::RequestError},
    io::{calls::ClusterCalls, cluster::ClusterError},
};

/// How long a home whose snapshot failed waits before it is tried again: each try takes a new
/// snapshot, so not often (the Event says what to do meanwhile).
pub(super) const SAVE_RETRY: Duration = Duration::from_secs(300);
impl<C: ClusterCalls> Backend<C> {
    /// Does `step` for `record` on `member`; when to look again if a home not saved waits
    /// (`Some`). A step the API server failed is an error: the controller backs off.
    pub(super) async fn finalize(
        &self,
        member: &ClusterWorkspaces<C>,
        record: &Workspace,
        step: Finalize,
    ) -> Result<Option<Duration>, ClusterError> {
        let name = record.name_any();
        let version = record.resource_version().unwrap_or_default();
        let result = match step {
            Finalize::Nothing => return Ok(None),
            Finalize::Add => {
                member
                    .cluster
                    .set_workspace_finalizers(&name, &version, finalize::finalizers(record, true))
                    .await
            }
            Finalize::StopPod(uid) => member.cluster.delete_pod(&name, Some(&uid)).await.map(drop),
            Finalize::Save => match member.save_before_delete(record).await {
                Ok(()) => {
                    tracing::info!(workspace = name, "home saved before the Workspace goes");
                    release(member, record).await
                }
                Err(error) => {
                    let note = format!(
                        "{}; the Workspace is kept until its home is saved (tried again in {} min; remove its finalizer {} to delete it without)",
                        error.public_message(),
                        SAVE_RETRY.as_secs() / 60,
                        finalize::HOME_FINALIZER
                    );
                    tracing::warn!(workspace = name, %error, "home not saved; the Workspace is kept");
                    member.cluster.workspace_event(record, "HomeNotSaved", note).await;
                    return Ok(Some(SAVE_RETRY));
                }
            },
            Finalize::Release => release(member, record).await,
        };
        match result {
            // Changed or gone meanwhile: the change brings it back as it is now.
            Err(error) if error.is_conflict() || error.is_gone() => Ok(None),
            result => result.map(|()| None),
        }
    }
}

/// Removes the home's finalizer from `record`.
async fn release<C: ClusterCalls>(
    member: &ClusterWorkspaces<C>,
    record: &Workspace,
) -> Result<(), ClusterError> {
    let version = record.resource_version().unwrap_or_default();
    member
        .cluster
        .set_workspace_finalizers(&record.name_any(), &version, finalize::finalizers(record, false))
        .await
}

impl<C: ClusterCalls> ClusterWorkspaces<C> {
    /// Before the native API deletes `record` (its home saved already): the home's finalizer
    /// removed from the Workspace as the API server has it now, so the delete is not held for a
    /// second snapshot.
    pub(crate) async fn release_home(&self, record: &Workspace) -> Result<(), RequestError> {
        if !finalize::held(record) {
            return Ok(());
        }
        let Some(fresh) = self.cluster.get_workspace(&record.name_any()).await? else {
            return Ok(());
        };
        if fresh.metadata.uid != record.metadata.uid || !finalize::held(&fresh) {
            return Ok(());
        }
        release(self, &fresh).await.map_err(RequestError::from)
    }
}
