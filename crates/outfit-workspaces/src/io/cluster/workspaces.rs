//! The Workspace resource's calls: read one (a record the cache does not show yet), create one
//! (a launch), set whether it is started (a stop or a
//! start), delete one, and write its status (the leader's controller).

use std::collections::BTreeMap;

use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use outfit_workspaces_core::resource::{Workspace, WorkspaceStatus};
use serde_json::{Value, json};

use super::{Cluster, ClusterError, only_uid, status_code};

impl Cluster {
    fn workspaces(&self) -> Api<Workspace> {
        Api::namespaced(self.pods.clone().into_client(), &self.namespace)
    }

    /// The Workspace `name` as the API server has it now, if any.
    pub async fn get_workspace(&self, name: &str) -> Result<Option<Workspace>, ClusterError> {
        self.workspaces()
            .get_opt(name)
            .await
            .map_err(|e| self.error(format_args!("reading Workspace {}/{name}", self.namespace), e))
    }

    /// Creates `workspace`; 409 when its name is taken.
    pub async fn create_workspace(&self, workspace: &Workspace) -> Result<Workspace, ClusterError> {
        let name = workspace.metadata.name.as_deref().unwrap_or_default();
        self.workspaces()
            .create(&PostParams::default(), workspace)
            .await
            .map_err(|e| self.error(format_args!("creating Workspace {}/{name}", self.namespace), e))
    }

    /// Sets `spec.started` of the Workspace `name` of `uid`, merging `annotations` into its own
    /// (a `None` removes one); the uid makes it a precondition, as [`Cluster::annotate_pod`]'s.
    pub async fn set_started(
        &self,
        name: &str,
        uid: &str,
        started: bool,
        annotations: BTreeMap<&str, Option<String>>,
    ) -> Result<Workspace, ClusterError> {
        let patch = json!({
            "metadata": {"uid": uid, "annotations": annotations},
            "spec": {"started": started},
        });
        let verb = if started { "starting" } else { "stopping" };
        self.workspaces()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.error(format_args!("{verb} Workspace {}/{name}", self.namespace), e))
    }

    /// Deletes the Workspace `name` (only if its uid is `uid`, when given); `false` when it was
    /// gone. Its pod goes with it (the garbage collector's work, which the backend does not wait
    /// for: it deletes the pod itself).
    pub async fn delete_workspace(&self, name: &str, uid: Option<&str>) -> Result<bool, ClusterError> {
        match self
            .workspaces()
            .delete(name, &only_uid(uid.map(str::to_owned)))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.error(format_args!("deleting Workspace {}/{name}", self.namespace), e)),
        }
    }

    /// Sets the finalizers of the Workspace `name` as it was at `resource_version`: the list is
    /// written whole (a merge patch replaces a list), so the version makes it a precondition.
    pub async fn set_workspace_finalizers(
        &self,
        name: &str,
        resource_version: &str,
        finalizers: Vec<String>,
    ) -> Result<(), ClusterError> {
        let patch = json!({"metadata": {"resourceVersion": resource_version, "finalizers": finalizers}});
        self.workspaces()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|e| {
                self.error(
                    format_args!("setting the finalizers of Workspace {}/{name}", self.namespace),
                    e,
                )
            })
    }

    /// Writes `status` as the status of the Workspace `name`.
    pub async fn workspace_status(&self, name: &str, status: &WorkspaceStatus) -> Result<(), ClusterError> {
        let patch = json!({"status": status_patch(status)});
        self.workspaces()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                self.error(
                    format_args!("writing the status of Workspace {}/{name}", self.namespace),
                    e,
                )
            })
    }
}

/// `status` as a merge patch: a field it leaves out is removed (`null`), not kept.
fn status_patch(status: &WorkspaceStatus) -> Value {
    let mut value = serde_json::to_value(status).expect("a status serializes");
    if let Value::Object(fields) = &mut value {
        for key in [
            "phase",
            "observedGeneration",
            "conditions",
            "pod",
            "url",
            "lastActivity",
            "stopped",
        ] {
            fields.entry(key).or_insert(Value::Null);
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_removes_what_the_status_no_longer_says() {
        let patch = status_patch(&WorkspaceStatus::default());
        assert_eq!(patch["pod"], Value::Null);
        assert!(patch.as_object().unwrap().contains_key("stopped"));
    }
}
