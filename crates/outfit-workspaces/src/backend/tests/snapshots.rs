//! Snapshots of homes on a fake cluster (issue 32): the controller snapshots a stopped
//! workspace's home once per stop, records where it stands on the Workspace, and keeps the last
//! `snapshotsKept`; a home is made from the newest ready one when it is gone.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use outfit_workspaces_core::{
    model::{keys, user::UserId},
    resource::{self, Phase, reconcile},
    workspace::snapshot,
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

/// A backend whose `web` mounts alice's `per-user` home, snapshotted (waiting 1 s for one).
async fn mounting_alices_home() -> (Backend<FakeCluster>, FakeCluster) {
    let url = serve(WEB_WITH_HOME).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    let (backend, fake) = super::on_fake(&[
        ("BACKEND_CATALOGUE", &catalogue),
        ("BACKEND_STORAGESTRATEGY", "per-user"),
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTTIMEOUT", "1s"),
    ]);
    fake.put_claim(alices_home());
    backend.synced().await;
    (backend, fake)
}

/// The removal's answer, which must be a 409 `SnapshotNotReady`: why.
fn not_ready(answer: Result<Vec<String>, RequestError>) -> String {
    match answer {
        Err(RequestError::SnapshotNotReady(why)) => why,
        other => panic!("{other:?}"),
    }
}

/// The snapshots of the fake that are not ready.
fn pending(fake: &FakeCluster) -> Vec<String> {
    fake.with(|s| {
        s.snapshots
            .values()
            .filter(|v| v.state() == outfit_workspaces_core::workspace::snapshot::State::Pending)
            .map(|v| v.name().to_owned())
            .collect()
    })
}

/// Issue 46: 30 `DELETE /api/v1/storage` of a home whose snapshots are slower than
/// `snapshotTimeout` took 30 snapshots, and one made ready was never used. Now they wait for the
/// one taken (at most `PENDING_CAP` pending), each 409 names it and its age, and once it is
/// ready the next removal is answered without taking another.
#[tokio::test(start_paused = true)]
async fn thirty_slow_removals_take_one_snapshot_and_the_next_keeps_it_once_ready() {
    let (backend, fake) = mounting_alices_home().await;
    let home = "user-storage-alice-dtu-dk";
    for _ in 0..30 {
        let why = not_ready(backend.remove_homes(&alice(), None).await);
        let named = pending(&fake);
        assert!(
            named.iter().any(|name| why.contains(name.as_str())) && why.contains("ago"),
            "{why}"
        );
    }
    let taken = fake.count_calls("create_snapshot");
    assert!(
        (1..=snapshot::removal::PENDING_CAP).contains(&taken),
        "{taken} taken: {:?}",
        fake.calls()
    );
    assert!(pending(&fake).len() <= snapshot::removal::PENDING_CAP);
    ready_all(&fake);
    assert_eq!(backend.remove_homes(&alice(), None).await.unwrap(), [home]);
    assert_eq!(
        fake.count_calls("create_snapshot"),
        taken,
        "the ready one is kept"
    );
}

/// A ready snapshot from before a later use of the home is not kept: the create marks the home
/// in use before its pod is made, and a removal after that pod has gone takes a new snapshot
/// (which the next removal keeps once ready).
#[tokio::test(start_paused = true)]
async fn a_ready_snapshot_from_before_a_later_use_of_the_home_is_not_kept() {
    use outfit_workspaces_core::{
        model::keys::ANNOTATION_HOME_USE, workspace::snapshot::removal::making_mark,
    };
    let (backend, fake) = mounting_alices_home().await;
    let home = "user-storage-alice-dtu-dk";
    let _leader = controlling(&backend).drop_guard();
    // A removal's snapshot, ready later: the home as it was then.
    not_ready(backend.remove_homes(&alice(), None).await);
    ready_all(&fake);
    let before = fake.with(|s| s.snapshots.keys().cloned().collect::<Vec<_>>());

    // The home used since: a workspace mounts it, then is deleted.
    let name = launch_web(&backend, &alice()).await.name;
    until(&fake, "the pod", |s| s.pods.contains_key(&name)).await;
    let marks: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("mark_home_use") || c.starts_with("create_pod"))
        // `mark_home_use <claim> <kind>-<time>-<salt>`: its kind.
        .map(|c| match c.rsplit_once(' ') {
            Some((call, mark)) if call.starts_with("mark_home_use") => {
                format!("{call} {}", mark.split('-').next().unwrap_or_default())
            }
            _ => c,
        })
        .collect();
    let (making, used) = (
        format!("mark_home_use {home} making"),
        format!("mark_home_use {home} used"),
    );
    assert!(
        marks
            .windows(3)
            .any(|w| w == [making.clone(), format!("create_pod {name}"), used.clone()]),
        "the create marks the home before and after its pod: {marks:?}"
    );
    backend.remove(&alice(), &name).await.unwrap();
    fake.with(|s| s.pods.remove(&name));
    until(&fake, "the workspace gone", |s| !s.workspaces.contains_key(&name)).await;
    backend.synced().await;
    // A create's mark from long ago (the marks' times are the wall clock, which paused time
    // leaves be): settled by the next removal, no pod using the home.
    let long_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let mut claim = fake.with(|s| s.claims[home].clone());
    claim
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_HOME_USE.to_owned(), making_mark(long_ago, 1));
    fake.put_claim(claim);

    let taken = fake.count_calls("create_snapshot");
    let why = not_ready(backend.remove_homes(&alice(), None).await);
    assert_eq!(fake.count_calls("create_snapshot"), taken + 1, "a new one: {why}");
    let new = pending(&fake);
    assert!(
        new.iter().all(|n| !before.contains(n)) && new.len() == 1,
        "{new:?}"
    );
    ready_all(&fake);
    assert_eq!(backend.remove_homes(&alice(), None).await.unwrap(), [home]);
    assert_eq!(
        fake.count_calls("create_snapshot"),
        taken + 1,
        "the new one is kept"
    );
}

/// Snapshots of a home never ready, older than the bound, are pruned by the next removal, so
/// they neither pile up nor hold the cap.
#[tokio::test(start_paused = true)]
async fn stale_pending_snapshots_are_pruned_by_a_removal() {
    let (backend, fake) = mounting_alices_home().await;
    let home = "user-storage-alice-dtu-dk";
    let user = UserId::parse("alice@dtu.dk").unwrap();
    let long_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    for n in 0..5 {
        let mut stale = snapshot::volume_snapshot(
            format!("{home}-stale-{n}"),
            (home, &user),
            "csi-snapshots",
            (snapshot::Occasion::Removal, None),
            None,
        );
        stale.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(long_ago));
        fake.with(|s| s.snapshots.insert(stale.name().to_owned(), stale.clone()));
    }
    let why = not_ready(backend.remove_homes(&alice(), None).await);
    assert!(!why.contains("-stale-"), "{why}");
    assert_eq!(fake.count_calls("delete_snapshot"), 5, "{:?}", fake.calls());
    assert_eq!(pending(&fake).len(), 1, "only the new one");
}

/// Issue 46: four snapshots named within one millisecond once shared a name. Snapshots taken at
/// once are ten snapshots.
#[tokio::test]
async fn snapshots_taken_within_one_millisecond_have_distinct_names() {
    let (backend, fake) = mounting_alices_home().await;
    let user = UserId::parse("alice@dtu.dk").unwrap();
    let member = backend.default_cluster();
    let takes = (0..10).map(|_| {
        member.take_snapshot(
            ("user-storage-alice-dtu-dk", &user),
            (snapshot::Occasion::Removal, None),
        )
    });
    let names: std::collections::BTreeSet<String> = futures::future::join_all(takes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    assert_eq!(fake.with(|s| s.snapshots.len()), 10);
}
