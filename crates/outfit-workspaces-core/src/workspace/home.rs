//! A user's home as the native API shows it (`GET /api/v1/storage`): a claim outfit made, read
//! from the watch cache alone.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde::Serialize;

use crate::model::{config::StorageStrategy, keys};

/// One home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Home {
    /// The claim's name.
    pub name: String,
    /// The cluster it is on.
    pub cluster: String,
    /// The strategy it was made under: `nfs`, `per-user` or `per-workspace`.
    pub strategy: &'static str,
    /// Its StorageClass, if it names one.
    #[serde(rename = "storageClass")]
    pub storage_class: Option<String>,
    /// The size asked for (`spec.resources.requests.storage`).
    pub requested: Option<String>,
    /// The size the volume has (`status.capacity.storage`), once bound.
    pub capacity: Option<String>,
    /// `Pending`, `Bound` or `Lost`.
    pub phase: Option<String>,
    /// The workspace that owns it (`per-workspace`).
    pub workspace: Option<String>,
    /// When it was made (RFC 3339).
    pub created: Option<String>,
    /// Whether it is being deleted.
    pub deleting: bool,
}

/// The strategy `claim` was made under: its mark, else deic-dk's NFS (claims of before the mark).
pub fn strategy_of(claim: &PersistentVolumeClaim) -> StorageStrategy {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ANNOTATION_STORAGE_STRATEGY))
        .and_then(|name| StorageStrategy::parse(name).ok())
        .unwrap_or(StorageStrategy::Nfs)
}

/// `claim` on `cluster` as a [`Home`].
pub fn home_of(claim: &PersistentVolumeClaim, cluster: &str) -> Home {
    let spec = claim.spec.as_ref();
    let status = claim.status.as_ref();
    let strategy = strategy_of(claim);
    let workspace = (strategy == StorageStrategy::PerWorkspace)
        .then(|| {
            claim
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|owner| owner.kind == "Workspace" || owner.kind == "Pod")
                .map(|owner| owner.name.clone())
        })
        .flatten();
    Home {
        name: claim.metadata.name.clone().unwrap_or_default(),
        cluster: cluster.to_owned(),
        strategy: strategy.name(),
        storage_class: spec.and_then(|s| s.storage_class_name.clone()),
        requested: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone()),
        capacity: status
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone()),
        phase: status.and_then(|s| s.phase.clone()),
        workspace,
        created: claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        deleting: claim.metadata.deletion_timestamp.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_home_shows_its_strategy_size_and_owner() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "web-jana-home", "creationTimestamp": "2026-11-29T10:00:00Z",
                         "annotations": {"outfit.dev/storage-strategy": "per-workspace"},
                         "ownerReferences": [{"apiVersion": "outfit.dev/v1alpha1", "kind": "Workspace",
                                              "name": "web-jana", "uid": "u1"}]},
            "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}}
        }))
        .unwrap();
        let home = home_of(&claim, "default");
        assert_eq!(home.strategy, "per-workspace");
        assert_eq!(home.workspace.as_deref(), Some("web-jana"));
        assert_eq!(
            (
                home.requested.as_deref(),
                home.capacity.as_deref(),
                home.phase.as_deref()
            ),
            (Some("10Gi"), Some("10Gi"), Some("Bound"))
        );
        assert_eq!(home.created.as_deref(), Some("2026-11-29T10:00:00Z"));
        // A claim without the mark is deic-dk's NFS one.
        let plain: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "user-storage-a"}})).unwrap();
        assert_eq!(home_of(&plain, "default").strategy, "nfs");
    }
}
