//! The snapshots' calls (issue 32): take one of a home, read one, list a user's, delete one, and
//! record on a Workspace where the snapshot of its last stop stands.

use std::collections::BTreeMap;

use kube::{
    Api,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use outfit_workspaces_core::{
    model::user::{UserId, belongs_to},
    resource::Workspace,
    workspace::snapshot::{self, VolumeSnapshot},
};
use serde_json::json;

use super::{Cluster, ClusterError, status_code};

impl Cluster {
    fn snapshots(&self) -> Api<VolumeSnapshot> {
        Api::namespaced(self.pods.clone().into_client(), &self.namespace)
    }

    /// Takes `snapshot` (409 when its name is taken).
    pub async fn create_snapshot(&self, snapshot: &VolumeSnapshot) -> Result<(), ClusterError> {
        self.snapshots()
            .create(&PostParams::default(), snapshot)
            .await
            .map(|_| ())
            .map_err(|e| {
                self.error(
                    format_args!("creating VolumeSnapshot {}/{}", self.namespace, snapshot.name()),
                    e,
                )
            })
    }

    /// The snapshot `name`, if there is one.
    pub async fn get_snapshot(&self, name: &str) -> Result<Option<VolumeSnapshot>, ClusterError> {
        self.snapshots().get_opt(name).await.map_err(|e| {
            self.error(
                format_args!("reading VolumeSnapshot {}/{name}", self.namespace),
                e,
            )
        })
    }

    /// `user`'s snapshots (found by their labels, kept by the exact id).
    pub async fn snapshots_of(&self, user: &UserId) -> Result<Vec<VolumeSnapshot>, ClusterError> {
        let params = ListParams::default().labels(&snapshot::user_selector(user));
        let list = self.snapshots().list(&params).await.map_err(|e| {
            self.error(
                format_args!("listing the VolumeSnapshots of {user} in {}", self.namespace),
                e,
            )
        })?;
        Ok(list.items.into_iter().filter(|s| belongs_to(s, user)).collect())
    }

    /// Deletes the snapshot `name` (gone already counts as done).
    pub async fn delete_snapshot(&self, name: &str) -> Result<(), ClusterError> {
        match self.snapshots().delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(self.error(
                format_args!("deleting VolumeSnapshot {}/{name}", self.namespace),
                e,
            )),
        }
    }

    /// Merges `annotations` (a `None` removes one) into the Workspace `name` of `uid`, and nothing
    /// else: where its last stop's snapshot stands.
    pub async fn annotate_workspace(
        &self,
        name: &str,
        uid: &str,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> Result<Workspace, ClusterError> {
        let patch = json!({"metadata": {"uid": uid, "annotations": annotations}});
        Api::<Workspace>::namespaced(self.pods.clone().into_client(), &self.namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.error(format_args!("annotating Workspace {}/{name}", self.namespace), e))
    }
}
