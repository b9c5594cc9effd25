//! Issue 32: VolumeSnapshots in the test cluster, with real parts where they exist. The real
//! snapshot-controller (external-snapshotter, started by up.sh's node mode) binds snapshots to
//! contents and deletes them; the provisioner stand-in (`outfit_test_support::provisioner`) does
//! the CSI driver's side: it cuts, fails or never answers a snapshot by its class, and restores a
//! claim from a ready one. These tests pin the chain the workspace backend's snapshots rely on.

use std::time::Duration;

use kube::{Client, api::DeleteParams};
use outfit_test_support::{provisioner, wait::eventually};
use serde_json::{Value, json};

use crate::control_plane::{ControlPlane, api, create, resource};

const LIMIT: Duration = Duration::from_secs(60);

fn claims() -> kube::discovery::ApiResource {
    resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
}

fn snapshots() -> kube::discovery::ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshot",
        "volumesnapshots",
    )
}

fn contents() -> kube::discovery::ApiResource {
    resource(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
    )
}

/// A fresh namespace (the controller manager makes its default ServiceAccount).
async fn namespace(client: &Client, name: &str) {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    create(
        client,
        None,
        &resource("", "v1", "Namespace", "namespaces"),
        namespace,
    )
    .await
    .expect("create namespace");
}

/// `kind`'s object `name` as the API server has it now, or `None` once it is gone.
async fn get(
    client: &Client,
    ns: Option<&str>,
    kind: &kube::discovery::ApiResource,
    name: &str,
) -> Option<Value> {
    let object = api(client, ns, kind).get_opt(name).await.expect("a get");
    object.map(|o| serde_json::to_value(o).expect("serializes"))
}

/// Creates a claim of the stand-in's class asking for `size`, restored from `snapshot` if given.
async fn claim(client: &Client, ns: &str, name: &str, size: &str, snapshot: Option<&str>) {
    let mut claim = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"storageClassName": provisioner::CLASS, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": size}}}
    });
    if let Some(snapshot) = snapshot {
        claim["spec"]["dataSource"] =
            json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot});
    }
    create(client, Some(ns), &claims(), claim)
        .await
        .expect("create claim");
}

/// Waits until the claim is Bound; its volume's name.
async fn bound(client: &Client, ns: &str, name: &str) -> String {
    eventually(&format!("claim {ns}/{name} Bound"), LIMIT, || async {
        let claim = get(client, Some(ns), &claims(), name).await?;
        (claim["status"]["phase"] == "Bound")
            .then(|| claim["spec"]["volumeName"].as_str().unwrap().to_owned())
    })
    .await
}

/// Creates a VolumeSnapshot of the claim `source` with `class`.
async fn snapshot(client: &Client, ns: &str, name: &str, source: &str, class: &str) {
    let snapshot = json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name},
        "spec": {"volumeSnapshotClassName": class, "source": {"persistentVolumeClaimName": source}}
    });
    create(client, Some(ns), &snapshots(), snapshot)
        .await
        .expect("create snapshot");
}

/// Waits until the snapshot is bound to a content; the snapshot then.
async fn bound_snapshot(client: &Client, ns: &str, name: &str) -> Value {
    eventually(
        &format!("snapshot {ns}/{name} bound to a content"),
        LIMIT,
        || async {
            let snapshot = get(client, Some(ns), &snapshots(), name).await?;
            snapshot["status"]["boundVolumeSnapshotContentName"]
                .is_string()
                .then_some(snapshot)
        },
    )
    .await
}

/// Deletes the snapshot and waits until it and its content are gone.
async fn delete_snapshot_and_content(client: &Client, ns: &str, name: &str, content: &str) {
    api(client, Some(ns), &snapshots())
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete snapshot");
    eventually(
        &format!("snapshot {ns}/{name} and content {content} gone"),
        LIMIT,
        || async {
            get(client, Some(ns), &snapshots(), name).await.is_none()
                && get(client, None, &contents(), content).await.is_none()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_snapshot_restores_a_claim_and_goes_with_its_content() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "snapshot-ready";
    namespace(&client, ns).await;
    provisioner::ensure(plane).await;

    claim(&client, ns, "home", "1Gi", None).await;
    let volume = bound(&client, ns, "home").await;
    let pv = get(
        &client,
        None,
        &resource("", "v1", "PersistentVolume", "persistentvolumes"),
        &volume,
    )
    .await
    .unwrap();
    assert_eq!(pv["spec"]["csi"]["driver"], provisioner::PROVISIONER, "{pv}");

    snapshot(&client, ns, "home-1", "home", provisioner::SNAPSHOT_CLASS).await;
    let ready = eventually("snapshot home-1 ready", LIMIT, || async {
        let snapshot = get(&client, Some(ns), &snapshots(), "home-1").await?;
        (snapshot["status"]["readyToUse"] == true).then_some(snapshot)
    })
    .await;
    let content_name = ready["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .expect("bound to a content")
        .to_owned();
    assert_eq!(ready["status"]["restoreSize"], "1Gi", "{ready}");
    let content = get(&client, None, &contents(), &content_name).await.unwrap();
    assert_eq!(content["status"]["restoreSize"], 1 << 30, "{content}");
    assert!(content["status"]["snapshotHandle"].is_string(), "{content}");
    assert!(content["status"]["creationTime"].is_i64(), "{content}");

    // A claim smaller than the snapshot stays Pending, as a driver refuses it; one as large gets
    // a volume that says where it came from.
    claim(&client, ns, "too-small", "512Mi", Some("home-1")).await;
    claim(&client, ns, "restored", "1Gi", Some("home-1")).await;
    let restored = bound(&client, ns, "restored").await;
    let restored = get(
        &client,
        None,
        &resource("", "v1", "PersistentVolume", "persistentvolumes"),
        &restored,
    )
    .await
    .unwrap();
    assert_eq!(
        restored["metadata"]["annotations"][provisioner::RESTORED_FROM],
        "home-1",
        "{restored}"
    );
    let too_small = get(&client, Some(ns), &claims(), "too-small").await.unwrap();
    assert_eq!(too_small["status"]["phase"], "Pending", "{too_small}");

    // The snapshot-controller will not delete a snapshot a Pending claim restores from.
    api(&client, Some(ns), &claims())
        .delete("too-small", &DeleteParams::default())
        .await
        .unwrap();
    delete_snapshot_and_content(&client, ns, "home-1", &content_name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_snapshot_stays_unready_and_a_failing_one_shows_the_drivers_error() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "snapshot-unready";
    namespace(&client, ns).await;
    provisioner::ensure(plane).await;
    claim(&client, ns, "home", "1Gi", None).await;
    bound(&client, ns, "home").await;

    snapshot(
        &client,
        ns,
        "failing",
        "home",
        provisioner::FAILING_SNAPSHOT_CLASS,
    )
    .await;
    snapshot(&client, ns, "stuck", "home", provisioner::STUCK_SNAPSHOT_CLASS).await;
    let failed = eventually("snapshot failing shows an error", LIMIT, || async {
        let snapshot = get(&client, Some(ns), &snapshots(), "failing").await?;
        snapshot["status"]["error"].is_object().then_some(snapshot)
    })
    .await;
    assert_eq!(
        failed["status"]["error"]["message"],
        provisioner::REFUSAL,
        "{failed}"
    );
    assert_ne!(failed["status"]["readyToUse"], true, "{failed}");

    // The stuck one is bound to a content the driver never answers: no status, not ready.
    let stuck = bound_snapshot(&client, ns, "stuck").await;
    let stuck_content = stuck["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let stuck = get(&client, Some(ns), &snapshots(), "stuck").await.unwrap();
    assert_ne!(stuck["status"]["readyToUse"], true, "{stuck}");
    let content = get(&client, None, &contents(), &stuck_content).await.unwrap();
    assert!(content["status"].is_null(), "{content}");

    // Both go, with their contents, though no snapshot was ever cut.
    let failed_content = failed["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap()
        .to_owned();
    delete_snapshot_and_content(&client, ns, "failing", &failed_content).await;
    delete_snapshot_and_content(&client, ns, "stuck", &stuck_content).await;
}
