//! Snapshots of homes on a fake cluster (issue 32): the controller snapshots a stopped
//! workspace's home once per stop, records where it stands on the Workspace, and keeps the last
//! `snapshotsKept`; a home is made from the newest ready one when it is gone.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::keys,
    resource::{self, Phase, reconcile},
};
use serde_json::json;

use super::*;
use crate::io::fake::FakeCluster;

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n";
/// The same, mounting its home.
const WEB_WITH_HOME: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n    volumeMounts: [{name: sciencedata, mountPath: /home}]\n";

/// A backend whose catalogue has `web` and whose homes are snapshotted, 2 kept.
async fn snapshotting() -> (Backend<FakeCluster>, FakeCluster) {
    let url = serve(WEB).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    super::on_fake(&[
        ("BACKEND_CATALOGUE", &catalogue),
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTSKEPT", "2"),
        ("BACKEND_SNAPSHOTTIMEOUT", "30s"),
    ])
}

/// alice's `per-user` home, as a create makes it.
fn alices_home() -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {
        "name": "user-storage-alice-dtu-dk",
        "annotations": {"outfit.dev/user-id": "alice@dtu.dk", "outfit.dev/storage-strategy": "per-user"}
    }}))
    .unwrap()
}

/// Marks every snapshot of the fake ready, as a driver would.
fn ready_all(fake: &FakeCluster) {
    fake.with(|s| {
        for snapshot in s.snapshots.values_mut() {
            snapshot.status =
                Some(serde_json::from_value(json!({"readyToUse": true, "restoreSize": "10Gi"})).unwrap());
        }
    });
}

#[tokio::test(start_paused = true)]
async fn a_stop_snapshots_the_home_once_and_the_oldest_go() {
    let (backend, fake) = snapshotting().await;
    fake.put_claim(alices_home());
    let _leader = controlling(&backend).drop_guard();
    let launched = launch_web(&backend, &alice()).await;
    let name = launched.name;
    for round in 1..=3 {
        backend.stop(&alice(), &name).await.unwrap();
        until(&fake, "a snapshot of the stop", |s| {
            s.snapshots.len() >= round.min(3)
        })
        .await;
        ready_all(&fake);
        until(&fake, "the stop's snapshot recorded as ready", |s| {
            let record = &s.workspaces[&name];
            record
                .annotations()
                .get(keys::ANNOTATION_SNAPSHOT_STATE)
                .map(String::as_str)
                == Some(reconcile::SNAPSHOT_READY)
                && record.status.as_ref().is_some_and(|status| {
                    status.phase == Some(Phase::Stopped)
                        && status
                            .conditions
                            .iter()
                            .any(|c| c.type_ == "HomeSnapshot" && c.reason == "SnapshotReady")
                })
        })
        .await;
        // Passes go on: no second snapshot of the same stop.
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let taken = fake.count_calls("create_snapshot");
        assert_eq!(taken, round, "one snapshot per stop");
        backend.start(&alice(), &name, None).await.unwrap();
        // Snapshots are named to the millisecond of the wall clock, which paused time leaves be.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // Three taken, two kept (snapshotsKept), each of alice's home.
    until(&fake, "the oldest let go", |s| s.snapshots.len() == 2).await;
    let homes: Vec<String> = fake.with(|s| {
        s.snapshots
            .values()
            .filter_map(|v| v.claim().map(str::to_owned))
            .collect()
    });
    assert_eq!(homes, ["user-storage-alice-dtu-dk", "user-storage-alice-dtu-dk"]);
}

/// A backend whose `web` mounts its own `per-workspace` home, snapshotted.
async fn own_homes() -> (Backend<FakeCluster>, FakeCluster) {
    let url = serve(WEB_WITH_HOME).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    super::on_fake(&[
        ("BACKEND_CATALOGUE", &catalogue),
        ("BACKEND_STORAGESTRATEGY", "per-workspace"),
        ("BACKEND_STORAGECLASSNAME", "fast"),
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTTIMEOUT", "30s"),
    ])
}

/// alice's `web`, launched, once the controller has put the home's finalizer on its Workspace.
async fn launched_held(backend: &Backend<FakeCluster>, fake: &FakeCluster) -> String {
    let launched = launch_web(backend, &alice()).await;
    let name = launched.name;
    until(fake, "the home's finalizer", |s| {
        resource::finalize::held(&s.workspaces[&name])
    })
    .await;
    name
}

/// A Workspace deleted from elsewhere (kubectl) is held by the home's finalizer: the controller
/// stops its pod, snapshots its own `per-workspace` home and lets it go only once that is ready.
#[tokio::test(start_paused = true)]
async fn a_workspace_deleted_with_kubectl_is_held_until_its_home_is_saved() {
    use crate::io::calls::ClusterCalls;
    use outfit_workspaces_core::resource::finalize::{HOME_FINALIZER, held};
    let (backend, fake) = own_homes().await;
    let _leader = controlling(&backend).drop_guard();
    let name = launched_held(&backend, &fake).await;

    // As kubectl deletes it: held, its pod stopped, its home snapshotted.
    fake.delete_workspace(&name, None).await.unwrap();
    until(&fake, "the pod stopped and the home snapshotted", |s| {
        !s.pods.contains_key(&name)
            && s.snapshots.values().any(|snapshot| {
                snapshot
                    .annotations()
                    .get(keys::ANNOTATION_SNAPSHOT_REASON)
                    .map(String::as_str)
                    == Some("removal")
            })
    })
    .await;
    let kept = fake.with(|s| s.workspaces[&name].clone());
    assert!(kept.metadata.deletion_timestamp.is_some() && held(&kept));
    assert!(
        fake.with(|s| !s.claims.is_empty()),
        "the home stays while the Workspace does"
    );
    // The snapshot ready: the finalizer goes, and the Workspace with it.
    ready_all(&fake);
    until(&fake, "the Workspace gone", |s| !s.workspaces.contains_key(&name)).await;
    assert!(
        fake.calls()
            .iter()
            .any(|c| c.starts_with("set_workspace_finalizers") && !c.contains(HOME_FINALIZER))
    );
}

/// The native API's delete saves the home itself, then takes the finalizer off: one snapshot,
/// and the Workspace goes at once.
#[tokio::test(start_paused = true)]
async fn the_native_delete_saves_once_and_releases_the_finalizer() {
    let (backend, fake) = own_homes().await;
    let _leader = controlling(&backend).drop_guard();
    let name = launched_held(&backend, &fake).await;
    let readying = {
        let fake = fake.clone();
        tokio::spawn(async move {
            until(&fake, "the removal snapshot", |s| !s.snapshots.is_empty()).await;
            ready_all(&fake);
        })
    };
    backend.remove(&alice(), &name).await.unwrap();
    readying.await.unwrap();
    assert!(fake.with(|s| !s.workspaces.contains_key(&name)), "gone at once");
    assert_eq!(fake.with(|s| s.snapshots.len()), 1, "one snapshot");
}
