//! Issue 32: snapshots of homes, with the real parts: the external-snapshotter's CRDs and
//! snapshot controller (built from its Go module by `hack/control-plane`), and the test cluster's
//! stand-in for a CSI driver (`outfit_test_support::provisioner`), which provisions claims, cuts
//! the snapshots the snapshot controller asks for, and restores claims from them. A home is
//! snapshotted on every stop, the last `snapshotsKept` kept; a home is removed only once its
//! snapshot is ready; a lost home comes back from its newest snapshot, and a start may name one.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api, Client,
    api::{ListParams, ObjectList},
};
use outfit_test_support::{provisioner, wait::eventually};
use outfit_workspaces_core::{
    resource::{Phase, Workspace},
    workspace::snapshot::VolumeSnapshot,
};
use serde_json::{Value, json};

use super::{
    stop_start::{phase, workspace_until},
    storage::{claims, claims_gone, launched_ready, only_claim, uid},
    support::*,
};
use crate::control_plane::ControlPlane;

/// The snapshots of `ns` that are not being deleted.
async fn snapshots(client: &Client, ns: &str) -> Vec<VolumeSnapshot> {
    let list: ObjectList<VolumeSnapshot> = Api::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Follows `name` to ready; if it ends elsewhere, the failure says where every snapshot and claim
/// of `ns` stood (a start from a snapshot waits on the snapshot controller, the stand-in driver and
/// the controller manager's binder, and the events alone don't say which held it).
pub(super) async fn follow_restore_to_ready(
    backend: &Backend,
    (client, ns): (&Client, &str),
    caller: Caller<'_>,
    name: &str,
) {
    let events = backend.follow(caller, name).await;
    if events.last().map(|(n, _)| n.as_str()) == Some("ready") {
        return;
    }
    let all: ObjectList<VolumeSnapshot> = Api::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let snapshots: Vec<Value> = all
        .items
        .iter()
        .map(|s| {
            json!({"name": s.metadata.name, "deleting": s.metadata.deletion_timestamp.is_some(),
                        "annotations": s.metadata.annotations, "status": s.status})
        })
        .collect();
    let claims: Vec<Value> = claims(client, ns)
        .await
        .iter()
        .map(|c| {
            json!({"name": c.metadata.name, "uid": c.metadata.uid,
                        "deleting": c.metadata.deletion_timestamp.is_some(),
                        "dataSource": c.spec.as_ref().and_then(|s| s.data_source.clone()),
                        "requests": c.spec.as_ref().and_then(|s| s.resources.clone()),
                        "status": c.status})
        })
        .collect();
    panic!("{name} did not turn ready: {events:?}\nsnapshots: {snapshots:#?}\nclaims: {claims:#?}");
}

/// The `HomeSnapshot` condition of `workspace`: its reason and message.
fn home_snapshot(workspace: &Workspace) -> Option<(String, String)> {
    let status = workspace.status.as_ref()?;
    let condition = status.conditions.iter().find(|c| c.type_ == "HomeSnapshot")?;
    Some((condition.reason.clone(), condition.message.clone()))
}

/// Stops `name` as `caller` and waits for the snapshot of that stop to say `reason`; its message.
pub(super) async fn stop_until_snapshot(
    backend: &Backend,
    (client, ns): (&Client, &str),
    caller: Caller<'_>,
    (name, reason): (&str, &str),
) -> String {
    let records: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let before = records.get(name).await.unwrap();
    let last = home_snapshot(&before);
    let (status, stopped) = backend
        .call(caller, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202, "{stopped}");
    let saved = workspace_until(&records, name, "the stop's snapshot", |w| {
        let now = home_snapshot(w);
        now != last && now.as_ref().is_some_and(|(r, _)| r == reason)
    })
    .await;
    home_snapshot(&saved).unwrap().1
}

/// The config of a backend whose homes (`strategy`, of the stand-in's class) are snapshotted
/// with `class`, `kept` kept, `timeout` allowed.
fn snapshotting(manifests: &Manifests, strategy: &str, (class, kept, timeout): (&str, u32, &str)) -> String {
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    format!(
        "storageStrategy: {strategy}\nstorageClassName: {}\nstorageSize: 2Gi\n\
         snapshotClassName: {class}\nsnapshotsKept: {kept}\nsnapshotTimeout: {timeout}\n\
         catalogue: [{{name: notebook, url: '{notebook}'}}]\ntrustedProxyCidrs: [127.0.0.1/32]\n",
        provisioner::CLASS
    )
}

/// A backend on `ns` with the rights `outfit manifests --workspaces` gives for `strategy` and
/// snapshots of `class`, configured as [`snapshotting`] says.
pub(super) async fn backend_with_snapshots(
    plane: &'static ControlPlane,
    (client, ns): (&Client, &str),
    strategy: &str,
    (class, kept, timeout): (&str, u32, &str),
) -> Backend {
    namespace(client, ns).await;
    provisioner::ensure(plane).await;
    let manifests = Manifests::start().await;
    let kept_text = kept.to_string();
    let kubeconfig = least_privilege_with(
        plane,
        client,
        &format!("{ns}-system"),
        ns,
        &[
            "--storage-strategy",
            strategy,
            "--storage-class",
            provisioner::CLASS,
            "--snapshot-class",
            class,
            "--snapshots-kept",
            &kept_text,
        ],
    )
    .await;
    let extra = snapshotting(&manifests, strategy, (class, kept, timeout));
    Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stop_snapshots_the_home_and_a_removed_home_comes_back_from_its_newest() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-snapshots";
    let backend = backend_with_snapshots(
        plane,
        (&client, ns),
        "per-user",
        (provisioner::SNAPSHOT_CLASS, 2, "60s"),
    )
    .await;
    let lena = Caller::Proxy("lena", "staff");
    let name = launched_ready(&backend, lena, "notebook").await;
    let home = only_claim(&client, ns).await;
    let home_name = home.metadata.name.clone().unwrap();

    // Three stops, three snapshots; the oldest goes (snapshotsKept: 2).
    for round in 0..3 {
        let message = stop_until_snapshot(&backend, (&client, ns), lena, (&name, "SnapshotReady")).await;
        assert!(message.contains(&home_name), "{message}");
        if round < 2 {
            let (status, _) = backend
                .call(lena, "POST", &format!("/api/v1/workspaces/{name}/start"), None)
                .await;
            assert_eq!(status, 202);
            backend.follow_to_ready(lena, &name).await;
        }
    }
    let kept = eventually("two snapshots kept", Duration::from_secs(60), || async {
        let kept = snapshots(&client, ns).await;
        (kept.len() == 2).then_some(kept)
    })
    .await;
    for snapshot in &kept {
        assert_eq!(snapshot.claim(), Some(home_name.as_str()));
        assert_eq!(snapshot.status.as_ref().unwrap().ready_to_use, Some(true));
    }
    let (status, listed) = backend.call(lena, "GET", "/api/v1/storage", None).await;
    assert_eq!(status, 200, "{listed}");
    let listed_snapshots = listed["snapshots"].as_array().unwrap();
    assert_eq!(listed_snapshots.len(), 2, "{listed}");
    for snapshot in listed_snapshots {
        assert_eq!(
            (
                &snapshot["ready"],
                &snapshot["reason"],
                &snapshot["workspace"],
                &snapshot["home"]
            ),
            (&json!(true), &json!("stop"), &json!(name), &json!(home_name)),
            "{listed}"
        );
    }

    // The workspace goes; its home is removed only as asked, saved first.
    let (status, _) = backend
        .call(lena, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 202);
    let removed = eventually("the home removable", Duration::from_secs(60), || async {
        let (status, answer) = backend.call(lena, "DELETE", "/api/v1/storage", None).await;
        (status == 202).then_some(answer)
    })
    .await;
    assert_eq!(removed["deleting"], json!([home_name]));
    claims_gone(&client, ns, "the home removed").await;
    // Saved first: by the last stop's snapshot, taken after the home's last use, which the
    // removal keeps (issue 46), or by one of its own when the stop's could not be vouched for
    // (its pod made less than 10 s before the stop's snapshot).
    let (_, listed) = backend.call(lena, "GET", "/api/v1/storage", None).await;
    let newest = &listed["snapshots"][0];
    assert_eq!(&newest["ready"], &json!(true), "{listed}");
    assert!(
        newest["reason"] == "stop" || newest["reason"] == "removal",
        "{listed}"
    );
    let newest = newest["name"].as_str().unwrap().to_owned();

    // The next launch makes the home again from it, through the driver's restore.
    launched_ready(&backend, lena, "notebook").await;
    let restored = only_claim(&client, ns).await;
    assert_ne!(uid(&restored), uid(&home));
    assert_eq!(restored_from(&client, &restored).await, (newest.clone(), newest));
    backend.assert_running();
}

/// Deletes the home of the stopped workspace `name` by hand and waits until it is gone: the claim
/// lost, and the newest snapshot the workspace's record names (where its next start restores it
/// from).
pub(super) async fn lose_home(client: &Client, ns: &str, name: &str) -> (PersistentVolumeClaim, String) {
    let records: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let record = records.get(name).await.unwrap();
    let newest = record.metadata.annotations.as_ref().unwrap()["outfit.dev/snapshot"].clone();
    let lost = only_claim(client, ns).await;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .delete(lost.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .unwrap();
    claims_gone(client, ns, "the home lost").await;
    (lost, newest)
}

/// Where `claim` came from: outfit's mark on it, and the stand-in driver's on its volume.
pub(super) async fn restored_from(client: &Client, claim: &PersistentVolumeClaim) -> (String, String) {
    let mark = claim.metadata.annotations.as_ref().unwrap()["outfit.dev/restored-from"].clone();
    let volume = claim.spec.as_ref().unwrap().volume_name.clone().expect("bound");
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .unwrap();
    let by_driver = volume.metadata.annotations.unwrap()[provisioner::RESTORED_FROM].clone();
    (mark, by_driver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_that_never_turns_ready_holds_no_stop_and_keeps_the_home() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-snapshots-stuck";
    let backend = backend_with_snapshots(
        plane,
        (&client, ns),
        "per-workspace",
        (provisioner::STUCK_SNAPSHOT_CLASS, 3, "3s"),
    )
    .await;
    let mia = Caller::Proxy("mia", "staff");
    let name = launched_ready(&backend, mia, "notebook").await;
    let records: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let (status, _) = backend
        .call(mia, "POST", &format!("/api/v1/workspaces/{name}/stop"), None)
        .await;
    assert_eq!(status, 202);
    // Stopped at once, whatever the snapshot does; then the bound passes and says so.
    let stopped = workspace_until(&records, &name, "stopped", |w| phase(w) == Some(Phase::Stopped)).await;
    assert_ne!(
        home_snapshot(&stopped).map(|(reason, _)| reason).as_deref(),
        Some("SnapshotReady")
    );
    let timed_out = workspace_until(&records, &name, "the snapshot timed out", |w| {
        home_snapshot(w).is_some_and(|(reason, _)| reason == "SnapshotTimedOut")
    })
    .await;
    let (_, message) = home_snapshot(&timed_out).unwrap();
    assert!(message.contains("snapshotTimeout"), "{message}");
    assert_eq!(phase(&timed_out), Some(Phase::Stopped));

    // Its home goes with it: the delete is refused, the Workspace and home kept.
    let (status, refused) = backend
        .call(mia, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (409, Some("SnapshotNotReady")),
        "{refused}"
    );
    assert!(records.get_opt(&name).await.unwrap().is_some());
    assert_eq!(claims(&client, ns).await.len(), 1);

    // Deleted with kubectl: the finalizer holds it, the home kept, an Event says why and what to
    // do; an admin who takes the finalizer off lets it go without a snapshot.
    records.delete(&name, &Default::default()).await.unwrap();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let note = eventually("a HomeNotSaved Event", Duration::from_secs(60), || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("HomeNotSaved"))
            .and_then(|e| e.message)
    })
    .await;
    assert!(note.contains("outfit.dev/home-snapshot"), "{note}");
    let held = records.get(&name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(claims(&client, ns).await.len(), 1, "the home kept");
    records
        .patch(
            &name,
            &Default::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the Workspace gone", Duration::from_secs(30), || async {
        records.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
    backend.assert_running();
}

// About 55 s (62 s in CI, four tests at a time): two stops each wait for a real snapshot-controller
// to bind and ready a snapshot, and the start waits for a claim provisioned from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_may_name_the_snapshot_its_home_is_made_from() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-snapshots-restore";
    let backend = backend_with_snapshots(
        plane,
        (&client, ns),
        "per-workspace",
        (provisioner::SNAPSHOT_CLASS, 3, "60s"),
    )
    .await;
    let noor = Caller::Proxy("noor", "staff");
    let name = launched_ready(&backend, noor, "notebook").await;
    let path = format!("/api/v1/workspaces/{name}");
    stop_until_snapshot(&backend, (&client, ns), noor, (&name, "SnapshotReady")).await;
    let first = snapshots(&client, ns).await;
    let [first] = <[VolumeSnapshot; 1]>::try_from(first).expect("one snapshot");
    let (status, _) = backend.call(noor, "POST", &format!("{path}/start"), None).await;
    assert_eq!(status, 202);
    backend.follow_to_ready(noor, &name).await;
    stop_until_snapshot(&backend, (&client, ns), noor, (&name, "SnapshotReady")).await;
    let home = only_claim(&client, ns).await;
    let second: Vec<String> = snapshots(&client, ns)
        .await
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .filter(|n| Some(n) != first.metadata.name.as_ref())
        .collect();

    // A snapshot that is not the user's is refused, and nothing changes.
    let (status, refused) = backend
        .call(
            noor,
            "POST",
            &format!("{path}/start?snapshot=someone-elses"),
            None,
        )
        .await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (404, Some("UnknownSnapshot")),
        "{refused}"
    );
    assert_eq!(uid(&only_claim(&client, ns).await), uid(&home));

    // The first one: the home as it is saved, replaced by one made from it.
    let named = first.metadata.name.clone().unwrap();
    let (status, started) = backend
        .call(noor, "POST", &format!("{path}/start?snapshot={named}"), None)
        .await;
    assert_eq!(status, 202, "{started}");
    follow_restore_to_ready(&backend, (&client, ns), noor, &name).await;
    let restored = only_claim(&client, ns).await;
    assert_ne!(uid(&restored), uid(&home));
    assert_eq!(restored_from(&client, &restored).await, (named.clone(), named));
    // The home as it was is saved: by the second stop's snapshot, taken after its last use,
    // which the replacement keeps (issue 46), or by a removal snapshot of its own.
    let kept: Vec<(String, Value)> = snapshots(&client, ns)
        .await
        .iter()
        .map(|s| {
            let reason = json!(s.metadata.annotations.as_ref().unwrap()["outfit.dev/snapshot-reason"]);
            (s.metadata.name.clone().unwrap(), reason)
        })
        .collect();
    assert!(
        kept.iter()
            .any(|(name, reason)| second.contains(name) || reason == "removal"),
        "{kept:?}"
    );

    // Lost while stopped (its claim deleted by hand): the next start makes it again from the
    // newest snapshot, the one of that stop.
    stop_until_snapshot(&backend, (&client, ns), noor, (&name, "SnapshotReady")).await;
    let records: Api<Workspace> = Api::namespaced(client.clone(), ns);
    let (lost, newest) = lose_home(&client, ns, &name).await;
    let (status, _) = backend.call(noor, "POST", &format!("{path}/start"), None).await;
    assert_eq!(status, 202);
    follow_restore_to_ready(&backend, (&client, ns), noor, &name).await;
    let again = only_claim(&client, ns).await;
    assert_ne!(uid(&again), uid(&lost));
    assert_eq!(restored_from(&client, &again).await, (newest.clone(), newest));

    // Deleted with kubectl while running: the home's finalizer holds the Workspace (and so its
    // home) until the pod is stopped and a removal snapshot of the home is ready; then both go.
    let running = records.get(&name).await.unwrap();
    assert!(
        running
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "outfit.dev/home-snapshot"),
        "{:?}",
        running.metadata.finalizers
    );
    let removals = |list: &[VolumeSnapshot]| {
        list.iter()
            .filter(|s| {
                s.metadata.annotations.as_ref().unwrap()["outfit.dev/snapshot-reason"] == "removal"
                    && s.status.as_ref().and_then(|st| st.ready_to_use) == Some(true)
            })
            .count()
    };
    let before = removals(&snapshots(&client, ns).await);
    records.delete(&name, &Default::default()).await.unwrap();
    eventually("the Workspace gone", Duration::from_secs(90), || async {
        records.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(
        removals(&snapshots(&client, ns).await),
        before + 1,
        "a removal snapshot, ready, before it went"
    );
    claims_gone(&client, ns, "the home, with its Workspace").await;
    backend.assert_running();
}

/// Makes every VolumeSnapshotContent of `ns` ready, as a slow driver would at last.
async fn ready_by_hand(client: &Client, ns: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotContent");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "volumesnapshotcontents");
    let contents: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list: ObjectList<DynamicObject> = contents.list(&ListParams::default()).await.unwrap();
    for content in list.items {
        if content.data["spec"]["volumeSnapshotRef"]["namespace"] != ns {
            continue;
        }
        let name = content.metadata.name.clone().unwrap();
        let uid = content.metadata.uid.clone().unwrap_or_default();
        let status = json!({"status": {
            "snapshotHandle": format!("snapshot-{uid}"),
            "creationTime": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
                .unwrap_or_default(),
            "readyToUse": true
        }});
        contents
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
}

// Issue 46: with a class slower than `snapshotTimeout`, 30 `DELETE /api/v1/storage` took 30
// snapshots, and one made ready by hand was never used (the next removal took another). Removals
// now wait for one taken since the home's last use (at most two pending), each 409 names the
// pending snapshot and its age, and once it is ready the next removal is answered 202 without
// taking another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_of_a_home_with_slow_snapshots_take_few_and_keep_one_once_ready() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-snapshots-slow";
    let backend = backend_with_snapshots(
        plane,
        (&client, ns),
        "per-user",
        (provisioner::STUCK_SNAPSHOT_CLASS, 3, "2s"),
    )
    .await;
    let ines = Caller::Proxy("ines", "staff");
    let name = launched_ready(&backend, ines, "notebook").await;
    let (status, _) = backend
        .call(ines, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 202);
    // Once no workspace is left, removals are refused only for the snapshot.
    eventually(
        "a removal refused for its snapshot",
        Duration::from_secs(60),
        || async {
            let (status, answer) = backend.call(ines, "DELETE", "/api/v1/storage", None).await;
            (status == 409 && answer["reason"] == "SnapshotNotReady").then_some(())
        },
    )
    .await;
    for _ in 0..12 {
        let (status, refused) = backend.call(ines, "DELETE", "/api/v1/storage", None).await;
        assert_eq!(
            (status, refused["reason"].as_str()),
            (409, Some("SnapshotNotReady")),
            "{refused}"
        );
        let message = refused["error"].as_str().unwrap_or_default().to_owned();
        let pending = snapshots(&client, ns).await;
        assert!(
            pending
                .iter()
                .any(|s| message.contains(s.metadata.name.as_deref().unwrap()))
                && message.contains("ago"),
            "the pending snapshot and its age: {refused}"
        );
    }
    let taken = snapshots(&client, ns).await;
    assert!(
        (1..=2).contains(&taken.len()),
        "at most two pending: {:?}",
        taken.iter().map(|s| &s.metadata.name).collect::<Vec<_>>()
    );
    ready_by_hand(&client, ns).await;
    eventually("the snapshots ready", Duration::from_secs(60), || async {
        snapshots(&client, ns)
            .await
            .iter()
            .all(|s| s.status.as_ref().and_then(|st| st.ready_to_use) == Some(true))
            .then_some(())
    })
    .await;
    let (status, removed) = backend.call(ines, "DELETE", "/api/v1/storage", None).await;
    assert_eq!(status, 202, "{removed}");
    assert_eq!(
        snapshots(&client, ns).await.len(),
        taken.len(),
        "no new snapshot taken"
    );
    claims_gone(&client, ns, "the home, saved").await;
    backend.assert_running();
}
