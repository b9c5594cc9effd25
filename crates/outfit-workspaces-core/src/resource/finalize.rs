//! The finalizer that keeps a Workspace, and so its own home, until that home is saved: a
//! `per-workspace` home is owned by its Workspace and goes with it, whoever deletes it. The
//! native API saves the home before it deletes a Workspace; a delete from elsewhere (`kubectl
//! delete workspace`, a namespace's deletion) is held by this finalizer until the leader has
//! stopped the pod and taken the home's snapshot, ready. Pure: what to do now, from the
//! Workspace, its pod, and whether it owns a home and homes are snapshotted.

use k8s_openapi::api::core::v1::Pod;

use super::{Workspace, reconcile};

/// The finalizer: the home is saved before the Workspace goes.
pub const HOME_FINALIZER: &str = "outfit.dev/home-snapshot";

/// What the finalizer needs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalize {
    /// Nothing.
    Nothing,
    /// A Workspace that owns a home and is not being deleted: add the finalizer.
    Add,
    /// Deleting, its pod (of this uid) still running: stop it first, so the snapshot is of the
    /// home as the workspace left it.
    StopPod(String),
    /// Deleting, its pod gone: snapshot the home, then release.
    Save,
    /// Deleting, nothing to save (no home, no snapshots, or its last stop's snapshot is ready and
    /// it has not run since): remove the finalizer.
    Release,
}

/// Whether `workspace` carries the finalizer.
pub fn held(workspace: &Workspace) -> bool {
    workspace
        .metadata
        .finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == HOME_FINALIZER)
}

/// `workspace`'s finalizers with the home's added (`true`) or taken out.
pub fn finalizers(workspace: &Workspace, hold: bool) -> Vec<String> {
    let mut list: Vec<String> = workspace
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != HOME_FINALIZER)
        .cloned()
        .collect();
    if hold {
        list.push(HOME_FINALIZER.to_owned());
    }
    list
}

/// What `workspace` needs, its pod being `pod` (the pod of its name, anyone's), `owns_home`
/// whether a claim of its own home exists, `snapshots` whether homes are snapshotted.
pub fn finalize(workspace: &Workspace, pod: Option<&Pod>, owns_home: bool, snapshots: bool) -> Finalize {
    let deleting = workspace.metadata.deletion_timestamp.is_some();
    if !deleting {
        return if snapshots && owns_home && !held(workspace) {
            Finalize::Add
        } else {
            Finalize::Nothing
        };
    }
    if !held(workspace) {
        return Finalize::Nothing;
    }
    if !snapshots || !owns_home {
        return Finalize::Release;
    }
    match pod.filter(|pod| reconcile::owns(workspace, pod)) {
        Some(pod) if pod.metadata.deletion_timestamp.is_none() => {
            return Finalize::StopPod(pod.metadata.uid.clone().unwrap_or_default());
        }
        // Going: the snapshot waits for it.
        Some(_) => return Finalize::Nothing,
        None => {}
    }
    if reconcile::stop_snapshot_ready(workspace) {
        Finalize::Release
    } else {
        Finalize::Save
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn workspace(deleting: bool, finalizers: &[&str], started: bool) -> Workspace {
        let mut value = json!({
            "apiVersion": "outfit.dev/v1alpha1", "kind": "Workspace",
            "metadata": {"name": "ws", "uid": "w-1", "finalizers": finalizers},
            "spec": {"owner": "alice", "entry": "notebook", "started": started}
        });
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-11-29T12:00:00Z");
        }
        serde_json::from_value(value).unwrap()
    }

    fn pod(owner_uid: &str, going: bool) -> Pod {
        let mut value = json!({"metadata": {"name": "ws", "uid": "p-1", "ownerReferences": [
            {"apiVersion": "outfit.dev/v1alpha1", "kind": "Workspace", "name": "ws", "uid": owner_uid}
        ]}});
        if going {
            value["metadata"]["deletionTimestamp"] = json!("2026-11-29T12:00:00Z");
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_workspace_that_owns_a_home_is_held_while_homes_are_snapshotted() {
        let plain = workspace(false, &[], true);
        assert_eq!(finalize(&plain, None, true, true), Finalize::Add);
        assert_eq!(
            finalize(&plain, None, false, true),
            Finalize::Nothing,
            "no home yet"
        );
        assert_eq!(
            finalize(&plain, None, true, false),
            Finalize::Nothing,
            "no snapshots"
        );
        let held = workspace(false, &["other", HOME_FINALIZER], true);
        assert_eq!(finalize(&held, None, true, true), Finalize::Nothing);
        assert_eq!(finalizers(&held, false), ["other"]);
        assert_eq!(finalizers(&plain, true), [HOME_FINALIZER]);
    }

    #[test]
    fn a_deleted_workspace_is_stopped_then_saved_then_released() {
        let deleting = workspace(true, &[HOME_FINALIZER], true);
        assert_eq!(
            finalize(&deleting, Some(&pod("w-1", false)), true, true),
            Finalize::StopPod("p-1".into())
        );
        assert_eq!(
            finalize(&deleting, Some(&pod("w-1", true)), true, true),
            Finalize::Nothing
        );
        assert_eq!(
            finalize(&deleting, Some(&pod("someone-else", false)), true, true),
            Finalize::Save,
            "another's pod of the name is not its"
        );
        assert_eq!(finalize(&deleting, None, true, true), Finalize::Save);
        // Nothing to save: released.
        assert_eq!(finalize(&deleting, None, false, true), Finalize::Release);
        assert_eq!(finalize(&deleting, None, true, false), Finalize::Release);
        // Not ours to hold.
        let foreign = workspace(true, &["other"], true);
        assert_eq!(finalize(&foreign, None, true, true), Finalize::Nothing);
    }
}
