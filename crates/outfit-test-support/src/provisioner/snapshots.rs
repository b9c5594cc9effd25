//! The CSI driver's side of VolumeSnapshots, for the provisioner stand-in (issue 32): what a
//! driver's csi-snapshotter sidecar does beside the real snapshot-controller that up.sh's node
//! mode runs. The snapshot-controller makes a VolumeSnapshotContent for each VolumeSnapshot of a
//! claim whose volume is a CSI volume of the class's driver, and puts a finalizer on it; the
//! sidecar "cuts" the snapshot and writes the content's status, which the snapshot-controller
//! copies to the VolumeSnapshot. When the VolumeSnapshot is deleted the snapshot-controller marks
//! its content (an annotation) and deletes it; the sidecar then deletes the snapshot and takes its
//! finalizer off, so both go.
//!
//! How the stand-in answers depends on the content's class: [`STUCK_SNAPSHOT_CLASS`] never (a slow
//! driver: no status at all), [`FAILING_SNAPSHOT_CLASS`] with an error, and every other class of
//! its driver ([`SNAPSHOT_CLASS`] and any a test makes) with a snapshot ready at once, as large as
//! its volume. Pre-provisioned contents (`spec.source.snapshotHandle`) get no status: nothing
//! would know their size.
//!
//! It also decides restores for the provisioner ([`restore`]): a claim from a VolumeSnapshot gets
//! its volume once that snapshot is ready, and never while the claim asks for less than the
//! snapshot holds (a driver refuses that; the claim just stays Pending, with no Event, and the
//! snapshot-controller refuses to delete a snapshot a Pending claim restores from).

use std::io::Write;

use kube::{
    Client,
    api::{Api, DynamicObject, ListParams, Patch, PatchParams},
    discovery::ApiResource,
};
use outfit_core::quantity;
use serde_json::{Value, json};

use super::node_local::NodeLocal;
use crate::control_plane::{api, create, resource};

/// A VolumeSnapshotClass of the stand-in whose snapshots are ready at once.
pub const SNAPSHOT_CLASS: &str = "outfit-test-snapshots";
/// A VolumeSnapshotClass of the stand-in whose snapshots never turn ready (no status at all).
pub const STUCK_SNAPSHOT_CLASS: &str = "outfit-test-snapshots-stuck";
/// A VolumeSnapshotClass of the stand-in whose snapshots fail with [`REFUSAL`].
pub const FAILING_SNAPSHOT_CLASS: &str = "outfit-test-snapshots-failing";
/// The error message of a snapshot of [`FAILING_SNAPSHOT_CLASS`] (`status.error.message`).
pub const REFUSAL: &str = "the stand-in driver refuses snapshots of this class";
/// The annotation on a volume restored from a snapshot: the VolumeSnapshot's name.
pub const RESTORED_FROM: &str = "outfit.test/restored-from";

const GROUP: &str = "snapshot.storage.k8s.io";
/// Put on every content by the snapshot-controller; taken off by the driver's side once the
/// snapshot itself is deleted.
const CONTENT_FINALIZER: &str = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// Set by the snapshot-controller on a content whose VolumeSnapshot is being deleted.
const BEING_DELETED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";

fn snapshot_classes() -> ApiResource {
    resource(GROUP, "v1", "VolumeSnapshotClass", "volumesnapshotclasses")
}

fn contents(client: &Client) -> Api<DynamicObject> {
    let contents = resource(GROUP, "v1", "VolumeSnapshotContent", "volumesnapshotcontents");
    api(client, None, &contents)
}

/// Makes sure the three classes exist, for `driver` with `deletionPolicy: Delete`. A control
/// plane without the snapshot CRDs (no node mode) is left as it is.
pub(crate) async fn ensure_classes(client: &Client, driver: &str) {
    for name in [SNAPSHOT_CLASS, STUCK_SNAPSHOT_CLASS, FAILING_SNAPSHOT_CLASS] {
        let class = json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": name},
            "driver": driver,
            "deletionPolicy": "Delete"
        });
        match create(client, None, &snapshot_classes(), class).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
            Err(error) => panic!("creating the VolumeSnapshotClass {name}: {error}"),
        }
    }
}

/// One look at every VolumeSnapshotContent of `driver`, answering as its sidecar would; a
/// snapshot of a volume of `node_local` is a copy of its directory.
pub(crate) async fn pass(client: &Client, driver: &str, node_local: &NodeLocal) -> Result<(), kube::Error> {
    let contents = contents(client);
    for content in contents.list(&ListParams::default()).await?.items {
        if content.data["spec"]["driver"] != driver {
            continue;
        }
        if content.metadata.deletion_timestamp.is_some() {
            if should_delete(&content) {
                delete(&contents, &content, node_local).await?;
            }
            continue;
        }
        // Only dynamic snapshots (a volume to cut from), and only once: a status is an answer.
        let Some(volume_handle) = content.data["spec"]["source"]["volumeHandle"].as_str() else {
            continue;
        };
        if !content.data["status"].is_null() {
            continue;
        }
        let status = match content.data["spec"]["volumeSnapshotClassName"].as_str() {
            Some(STUCK_SNAPSHOT_CLASS) => continue,
            Some(FAILING_SNAPSHOT_CLASS) => json!({
                "readyToUse": false,
                "error": {"message": REFUSAL, "time": jiff::Timestamp::now().to_string()}
            }),
            _ => {
                let uid = content.metadata.uid.as_deref().unwrap_or_default();
                let handle = format!("snapshot-{uid}");
                if node_local.holds(volume_handle)
                    && let Err(error) = node_local.cut(volume_handle, &handle)
                {
                    // Not ready, and the next pass tries again, as a driver's sidecar retries.
                    let name = content.metadata.name.as_deref().unwrap_or_default();
                    let _ = writeln!(
                        std::io::stderr(),
                        "[provisioner stand-in] cutting {name} of {volume_handle}: {error}"
                    );
                    continue;
                }
                let mut status = json!({
                    "snapshotHandle": handle,
                    "creationTime": i64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX),
                    "readyToUse": true
                });
                // The sidecar leaves restoreSize out when the driver says 0 (unknown).
                let size = volume_bytes(client, volume_handle).await?;
                if size > 0 {
                    status["restoreSize"] = json!(size);
                }
                status
            }
        };
        let name = content.metadata.name.as_deref().unwrap_or_default();
        contents
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await?;
    }
    Ok(())
}

/// The sidecar's `shouldDelete`: a content being deleted is the driver's to finish once the
/// snapshot-controller marked it (its VolumeSnapshot is going), or when it is a pre-provisioned
/// one no VolumeSnapshot ever bound.
fn should_delete(content: &DynamicObject) -> bool {
    let annotated = content
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(BEING_DELETED));
    let unbound_preprovisioned = content.data["spec"]["source"]["snapshotHandle"].is_string()
        && content.data["spec"]["volumeSnapshotRef"]["uid"]
            .as_str()
            .is_none_or(str::is_empty);
    annotated || unbound_preprovisioned
}

/// Deletes the snapshot (with `deletionPolicy: Delete`: the status loses its handle, as the
/// sidecar clears it after the driver's DeleteSnapshot), then takes the finalizer off.
async fn delete(
    contents: &Api<DynamicObject>,
    content: &DynamicObject,
    node_local: &NodeLocal,
) -> Result<(), kube::Error> {
    let name = content.metadata.name.as_deref().unwrap_or_default();
    if content.data["spec"]["deletionPolicy"] == "Delete"
        && let Some(handle) = content.data["status"]["snapshotHandle"].as_str()
    {
        node_local.remove_snapshot(handle);
        let cleared = json!({"status": {"snapshotHandle": null, "readyToUse": null,
                                        "creationTime": null, "restoreSize": null}});
        contents
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&cleared))
            .await?;
    }
    let finalizers = content.metadata.finalizers.clone().unwrap_or_default();
    if finalizers.iter().any(|f| f == CONTENT_FINALIZER) {
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != CONTENT_FINALIZER).collect();
        // The resourceVersion makes it a compare-and-swap: a finalizer added meanwhile stays.
        let patch = json!({"metadata": {"finalizers": kept,
                                        "resourceVersion": content.metadata.resource_version}});
        match contents
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Gone already, or changed since the list: the next pass sees it again.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The size of the CSI volume `handle` (its PersistentVolume's capacity), 0 if unknown.
async fn volume_bytes(client: &Client, handle: &str) -> Result<u64, kube::Error> {
    let volumes = api(
        client,
        None,
        &resource("", "v1", "PersistentVolume", "persistentvolumes"),
    );
    let size = volumes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .find(|v| v.data["spec"]["csi"]["volumeHandle"] == handle)
        .and_then(|v| v.data["spec"]["capacity"]["storage"].as_str().map(bytes))
        .unwrap_or(0);
    Ok(size)
}

fn bytes(text: &str) -> u64 {
    quantity::bytes(text).unwrap_or(0)
}

/// Where a claim's volume comes from.
pub(crate) enum Restore {
    /// No snapshot: an empty volume.
    Empty,
    /// A snapshot not (yet) fit to restore from (why): no volume for now.
    Wait(String),
    /// The VolumeSnapshot `snapshot` of the claim's namespace, whose driver's handle is `handle`.
    From { snapshot: String, handle: String },
}

/// Whether `claim` restores from a VolumeSnapshot (its `dataSourceRef`, else its `dataSource`),
/// and if so whether the snapshot is ready, taken by `driver` and no larger than the claim.
pub(crate) async fn restore(
    client: &Client,
    claim: &DynamicObject,
    driver: &str,
) -> Result<Restore, kube::Error> {
    let spec = &claim.data["spec"];
    let source = match &spec["dataSourceRef"] {
        Value::Null => &spec["dataSource"],
        source => source,
    };
    if source["kind"] != "VolumeSnapshot" || source["apiGroup"] != GROUP {
        return Ok(Restore::Empty);
    }
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    // A snapshot of another namespace (the alpha cross-namespace source): not supported, as by
    // most drivers.
    if source["namespace"].as_str().is_some_and(|n| n != namespace) {
        return Ok(Restore::Wait("a snapshot of another namespace".to_owned()));
    }
    let name = source["name"].as_str().unwrap_or_default();
    let snapshots = resource(GROUP, "v1", "VolumeSnapshot", "volumesnapshots");
    let Some(snapshot) = api(client, Some(namespace), &snapshots).get_opt(name).await? else {
        return Ok(Restore::Wait(format!("no VolumeSnapshot {name}")));
    };
    let status = &snapshot.data["status"];
    if status["readyToUse"] != true {
        return Ok(Restore::Wait(format!(
            "VolumeSnapshot {name} is not ready: status {status}"
        )));
    }
    // The real external-provisioner restores only its own driver's snapshots.
    let content_name = status["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap_or_default();
    let handle = match contents(client).get_opt(content_name).await? {
        Some(content) if content.data["spec"]["driver"] == driver => content.data["status"]["snapshotHandle"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        Some(_) => return Ok(Restore::Wait(format!("{content_name} is another driver's"))),
        None => {
            return Ok(Restore::Wait(format!(
                "no VolumeSnapshotContent {content_name:?}"
            )));
        }
    };
    let wanted = spec["resources"]["requests"]["storage"].as_str().map_or(0, bytes);
    let holds = status["restoreSize"].as_str().map_or(0, bytes);
    if wanted < holds {
        return Ok(Restore::Wait(format!(
            "the claim asks for {wanted} bytes, VolumeSnapshot {name} holds {holds}"
        )));
    }
    Ok(Restore::From {
        snapshot: name.to_owned(),
        handle,
    })
}
