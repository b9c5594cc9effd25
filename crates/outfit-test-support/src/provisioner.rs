//! A stand-in for a CSI driver's external-provisioner (issue 32), as the test cluster's kwok nodes
//! stand in for kubelets: claims of the StorageClass [`CLASS`] get a PersistentVolume made for
//! them, which kube-controller-manager's binder then binds as it binds any; a volume of the class
//! released by its claim is deleted (the class reclaims with `Delete`), and a claim asking for
//! more than its volume holds gets it (the class allows expansion). [`FIXED_CLASS`] is the same
//! without expansion, which the API server then refuses. Nothing is stored anywhere: the volumes
//! are CSI volumes of the driver [`PROVISIONER`] (a `CSIDriver` without attachment, so no
//! VolumeAttachments), which no kwok node mounts. CSI, so that the real snapshot-controller of the
//! test cluster takes snapshots of them: the driver's side of snapshots, and restoring a claim
//! from one, are in `provisioner/snapshots.rs` (its classes: [`SNAPSHOT_CLASS`],
//! [`STUCK_SNAPSHOT_CLASS`], [`FAILING_SNAPSHOT_CLASS`]; a restored volume is annotated
//! [`RESTORED_FROM`]).
//!
//! [`NODE_LOCAL_CLASS`] is for the test cluster's real node (`up.sh --real-nodes 1`), whose kubelet
//! mounts what it is given: its volumes are CSI volumes of the same driver whose data is a
//! directory the stand-in makes under the plane's state directory, which the real node's CSI
//! driver (`tests/tools/csi-node`) bind-mounts into pods; a snapshot is a copy of that directory,
//! and a volume restored from it starts as a copy of the copy (`provisioner/node_local.rs`). So a
//! home there holds real files, mounted into the workspace by the real kubelet, and comes back
//! from a snapshot with them. The stand-in's part is a CSI driver's controller side (no CSI driver
//! can be built here: csi-driver-host-path is not on the Go module proxy).
//!
//! It runs in the test process, on a thread of its own (a test's runtime ends with the test), once
//! per process and API server, polling every 200 ms.

mod node_local;
mod snapshots;

use std::{
    collections::{HashMap, HashSet},
    io::Write,
    path::PathBuf,
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use kube::{
    Client,
    api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::control_plane::{ControlPlane, api, client_from, resource};
use node_local::NodeLocal;
use snapshots::Restore;
pub use snapshots::{FAILING_SNAPSHOT_CLASS, REFUSAL, RESTORED_FROM, SNAPSHOT_CLASS, STUCK_SNAPSHOT_CLASS};

/// The StorageClass whose claims it provisions.
pub const CLASS: &str = "outfit-test-provisioned";
/// A class of the same provisioner that does not allow expansion.
pub const FIXED_CLASS: &str = "outfit-test-fixed";
/// A class of the same provisioner whose volumes are directories on this machine, which the real
/// node's CSI driver mounts, with snapshots that copy them.
pub const NODE_LOCAL_CLASS: &str = "outfit-test-node-local";
/// Its provisioner's name, which is also its CSI driver's (as with real CSI drivers; a driver's
/// name is a DNS subdomain, so no `/`).
pub const PROVISIONER: &str = "provisioner.outfit.test";

/// Makes sure the StorageClasses, the CSIDriver and the VolumeSnapshotClasses exist and the
/// provisioner runs against `plane`'s API server.
pub async fn ensure(plane: &ControlPlane) {
    static STARTED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let kubeconfig = plane.kubeconfig();
    let client = plane.admin_client().await;
    let classes = resource("storage.k8s.io", "v1", "StorageClass", "storageclasses");
    for (name, expands) in [(CLASS, true), (FIXED_CLASS, false), (NODE_LOCAL_CLASS, false)] {
        let class = json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": expands
        });
        match crate::control_plane::create(&client, None, &classes, class).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("creating the StorageClass {name}: {error}"),
        }
    }
    // attachRequired: false, or kube-controller-manager's attach-detach controller would make a
    // VolumeAttachment for every pod's volume and wait for an attacher that never comes.
    let driver = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"name": PROVISIONER},
        "spec": {"attachRequired": false, "podInfoOnMount": false}
    });
    let drivers = resource("storage.k8s.io", "v1", "CSIDriver", "csidrivers");
    match crate::control_plane::create(&client, None, &drivers, driver).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the CSIDriver {PROVISIONER}: {error}"),
    }
    snapshots::ensure_classes(&client, PROVISIONER).await;
    let mut started = STARTED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if started.insert(kubeconfig.clone()) {
        let node_local = NodeLocal::of(&plane.state_dir);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the provisioner's runtime");
            runtime.block_on(async move {
                let client = client_from(&kubeconfig).await;
                let mut notes = Notes::default();
                loop {
                    // A pass that fails (the API server restarting) is tried again. Apart, so
                    // that volumes are made on a plane without the snapshot CRDs too.
                    if let Err(error) = pass(&client, &node_local, &mut notes).await {
                        notes.error("a pass over claims and volumes", &error);
                    }
                    if let Err(error) = snapshots::pass(&client, PROVISIONER, &node_local).await {
                        notes.error("a pass over VolumeSnapshotContents", &error);
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        });
    }
}

/// What the stand-in says on stderr (written there directly, so that libtest does not capture it
/// into whichever test happened to start the thread): a claim it has held back for
/// [`REPORT_AFTER`] with the same reason, and each new error, so that a test failing on a claim
/// that stays Pending can be read from the log.
#[derive(Default)]
struct Notes {
    /// Per claim uid: why it waits, since when, and whether that was said.
    waiting: HashMap<String, (String, Instant, bool)>,
    last_error: Option<String>,
}

/// How long a claim waits for the same reason before the stand-in says so.
const REPORT_AFTER: Duration = Duration::from_secs(15);

impl Notes {
    fn say(line: &str) {
        let _ = writeln!(std::io::stderr(), "[provisioner stand-in] {line}");
    }

    fn wait(&mut self, uid: &str, claim: &str, why: String) {
        let entry = self
            .waiting
            .entry(uid.to_owned())
            .or_insert_with(|| (why.clone(), Instant::now(), false));
        if entry.0 != why {
            *entry = (why, Instant::now(), false);
        }
        if !entry.2 && entry.1.elapsed() >= REPORT_AFTER {
            entry.2 = true;
            Self::say(&format!(
                "claim {claim} waits {:?}: {}",
                entry.1.elapsed(),
                entry.0
            ));
        }
    }

    fn served(&mut self, uid: &str, claim: &str) {
        if let Some((_, since, said)) = self.waiting.remove(uid)
            && said
        {
            Self::say(&format!(
                "claim {claim} has its volume after {:?}",
                since.elapsed()
            ));
        }
    }

    fn error(&mut self, what: &str, error: &kube::Error) {
        let line = format!("{what}: {error}");
        if self.last_error.as_deref() != Some(&line) {
            Self::say(&line);
            self.last_error = Some(line);
        }
    }
}

/// One look at every claim and volume of the class. A claim whose turn fails does not hold up
/// the others.
async fn pass(client: &Client, node_local: &NodeLocal, notes: &mut Notes) -> Result<(), kube::Error> {
    let claims = api(
        client,
        None,
        &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    );
    let volumes = api(
        client,
        None,
        &resource("", "v1", "PersistentVolume", "persistentvolumes"),
    );
    let volume_list = volumes.list(&ListParams::default()).await?;
    let claim_list = claims.list(&ListParams::default()).await?;
    for claim in claim_list.items.iter().filter(|c| ours(c)) {
        let Some(uid) = claim.metadata.uid.as_deref() else {
            continue;
        };
        let name = format!(
            "{}/{}",
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default()
        );
        let bound = volume_list
            .items
            .iter()
            .find(|v| v.data["spec"]["claimRef"]["uid"] == uid);
        match serve(client, &volumes, node_local, claim, bound).await {
            Ok(Some(why)) => notes.wait(uid, &name, why),
            Ok(None) => notes.served(uid, &name),
            Err(error) => notes.error(&format!("claim {name}"), &error),
        }
    }
    notes.waiting.retain(|uid, _| {
        claim_list
            .items
            .iter()
            .any(|c| c.metadata.uid.as_deref() == Some(uid.as_str()))
    });
    // Released volumes of the class go, as its reclaim policy says.
    for volume in volume_list.items.iter().filter(|v| ours(v)) {
        if volume.data["status"]["phase"] == "Released" && volume.metadata.deletion_timestamp.is_none() {
            let name = volume.metadata.name.clone().unwrap_or_default();
            match volumes.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
            if volume.data["spec"]["storageClassName"] == NODE_LOCAL_CLASS
                && let Some(handle) = volume.data["spec"]["csi"]["volumeHandle"].as_str()
            {
                node_local.remove_volume(handle);
            }
        }
    }
    Ok(())
}

fn ours(object: &DynamicObject) -> bool {
    let class = &object.data["spec"]["storageClassName"];
    class == CLASS || class == FIXED_CLASS || class == NODE_LOCAL_CLASS
}

/// One claim's turn: a volume made for it (from its snapshot), or grown to what it asks. Why it
/// waits, if it does.
async fn serve(
    client: &Client,
    volumes: &Api<DynamicObject>,
    node_local: &NodeLocal,
    claim: &DynamicObject,
    bound: Option<&DynamicObject>,
) -> Result<Option<String>, kube::Error> {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let wanted = claim.data["spec"]["resources"]["requests"]["storage"].clone();
    match bound {
        None if claim.metadata.deletion_timestamp.is_none() => {
            let mut annotations = json!({"pv.kubernetes.io/provisioned-by": PROVISIONER});
            let mut from = None;
            match snapshots::restore(client, claim, PROVISIONER).await? {
                Restore::Empty => {}
                Restore::Wait(why) => return Ok(Some(why)),
                Restore::From { snapshot, handle } => {
                    annotations[RESTORED_FROM] = json!(snapshot);
                    from = Some(handle);
                }
            }
            let name = format!("pvc-{uid}");
            let handle = format!("outfit-test-{uid}");
            if claim.data["spec"]["storageClassName"] == NODE_LOCAL_CLASS
                && let Err(error) = node_local.make(&handle, from.as_deref())
            {
                let path = node_local.volume(&handle);
                return Ok(Some(format!("cannot make {}: {error}", path.display())));
            }
            let volume = json!({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "annotations": annotations},
                "spec": {
                    "storageClassName": claim.data["spec"]["storageClassName"],
                    "capacity": {"storage": wanted},
                    "accessModes": claim.data["spec"]["accessModes"],
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                 "namespace": claim.metadata.namespace, "name": claim.metadata.name,
                                 "uid": uid},
                    "csi": {"driver": PROVISIONER, "volumeHandle": handle}
                }
            });
            let volume: DynamicObject = serde_json::from_value(volume).expect("a volume");
            match volumes.create(&PostParams::default(), &volume).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error),
            }
        }
        // Expansion: the volume grows to what the claim asks, and so does the claim's status.
        Some(volume) if volume.data["spec"]["capacity"]["storage"] != wanted && !wanted.is_null() => {
            let name = volume.metadata.name.clone().unwrap_or_default();
            let grow = json!({"spec": {"capacity": {"storage": wanted}}});
            volumes
                .patch(&name, &PatchParams::default(), &Patch::Merge(&grow))
                .await?;
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            let status = json!({"status": {"capacity": {"storage": wanted}}});
            api(
                client,
                Some(&namespace),
                &resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
            )
            .patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        }
        Some(volume) if claim.data["status"]["phase"] == "Pending" => {
            let name = volume.metadata.name.as_deref().unwrap_or_default();
            return Ok(Some(format!(
                "its volume {name} is made ({}); kube-controller-manager has not bound them",
                volume.data["status"]["phase"]
            )));
        }
        _ => {}
    }
    Ok(None)
}
