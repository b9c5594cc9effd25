//! Users' homes through the native API, on a fake cluster (issue 32): listed by owner, removed
//! only when no workspace of the user is left, `per-workspace` ones never (they go with their
//! Workspace), another user's only by an admin; with snapshots, saved before they go.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use outfit_workspaces_core::model;
use serde_json::json;

use super::*;
use crate::io::auth::Identity;

fn claim(name: &str, owner: &str, strategy: Option<&str>) -> PersistentVolumeClaim {
    let mut annotations = json!({"outfit.dev/user-id": owner});
    if let Some(strategy) = strategy {
        annotations["outfit.dev/storage-strategy"] = json!(strategy);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}})).unwrap()
}

#[tokio::test]
async fn homes_are_listed_by_owner_and_removed_only_when_asked_and_unused() {
    let (backend, fake) = on_fake(&[]);
    fake.put_claim(claim(
        "user-storage-alice-dtu-dk",
        "alice@dtu.dk",
        Some("per-user"),
    ));
    fake.put_claim(claim("web-alice-home", "alice@dtu.dk", Some("per-workspace")));
    fake.put_claim(claim("user-storage-bob-dtu-dk", "bob@dtu.dk", None));
    backend.synced().await;

    let (homes, snapshots) = backend.homes(&alice(), None).await.unwrap();
    assert!(snapshots.is_empty(), "no snapshotClassName: none listed");
    let names: Vec<(&str, &str)> = homes.iter().map(|h| (h.name.as_str(), h.strategy)).collect();
    assert_eq!(
        names,
        [
            ("user-storage-alice-dtu-dk", "per-user"),
            ("web-alice-home", "per-workspace")
        ]
    );
    // Only an admin names another user.
    assert!(matches!(
        backend.homes(&alice(), Some("bob@dtu.dk")).await,
        Err(RequestError::Forbidden(_))
    ));
    let admin = Identity {
        admin: true,
        ..alice()
    };
    let (bobs, _) = backend.homes(&admin, Some("bob@dtu.dk")).await.unwrap();
    assert_eq!((bobs.len(), bobs[0].strategy), (1, "nfs"));

    // The per-user home goes; the per-workspace one is its Workspace's to take.
    let removed = backend.remove_homes(&alice(), None).await.unwrap();
    assert_eq!(removed, ["user-storage-alice-dtu-dk"]);
    assert!(
        fake.calls()
            .contains(&"delete_storage user-storage-alice-dtu-dk".to_owned())
    );
    assert!(!fake.calls().iter().any(|c| c.contains("web-alice-home")));
}

/// A stand-in for the snapshot controller and driver: every snapshot turns ready.
fn ready_driver(fake: &crate::io::fake::FakeCluster) -> tokio::task::JoinHandle<()> {
    let fake = fake.clone();
    tokio::spawn(async move {
        loop {
            fake.with(|s| {
                for snapshot in s.snapshots.values_mut() {
                    snapshot.status = Some(
                        serde_json::from_value(json!({"readyToUse": true, "restoreSize": "10Gi"})).unwrap(),
                    );
                }
            });
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
}

/// alice's `per-user` home.
const ALICES_HOME: &str = "user-storage-alice-dtu-dk";

/// A backend that snapshots homes (waiting 1 s for one), and alice's home.
async fn with_alices_home_snapshotted() -> (Backend<FakeCluster>, FakeCluster) {
    let (backend, fake) = on_fake(&[
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTTIMEOUT", "1s"),
    ]);
    fake.put_claim(claim(ALICES_HOME, "alice@dtu.dk", Some("per-user")));
    backend.synced().await;
    (backend, fake)
}

#[tokio::test]
async fn with_snapshots_a_home_is_removed_only_once_its_snapshot_is_ready() {
    let (backend, fake) = with_alices_home_snapshotted().await;
    let home = ALICES_HOME;

    // A driver that never readies it: the home is kept, and the caller is told why.
    let refused = backend.remove_homes(&alice(), None).await;
    let Err(RequestError::SnapshotNotReady(why)) = refused else {
        panic!("{refused:?}");
    };
    assert!(why.contains(home) && why.contains("snapshotTimeout"), "{why}");
    assert!(!fake.calls().iter().any(|c| c.starts_with("delete_storage")));

    // One that readies it: saved, then removed; the snapshot outlives the home and is listed.
    let driver = ready_driver(&fake);
    let removed = backend.remove_homes(&alice(), None).await;
    driver.abort();
    assert_eq!(removed.unwrap(), [home]);
    let (_, snapshots) = backend.homes(&alice(), None).await.unwrap();
    assert!(
        snapshots
            .iter()
            .any(|s| s.ready && s.reason.as_deref() == Some("removal") && s.home.as_deref() == Some(home)),
        "{snapshots:?}"
    );
}

/// Removals of one home asked at once share one snapshot (issue 46: 20 parallel `DELETE
/// /api/v1/storage` took 20), and each is told why the home is kept.
#[tokio::test]
async fn parallel_removals_of_one_home_share_one_snapshot() {
    let (backend, fake) = with_alices_home_snapshotted().await;
    let home = ALICES_HOME;
    let identity = alice();
    let removals = (0..20).map(|_| backend.remove_homes(&identity, None));
    for refused in futures::future::join_all(removals).await {
        let Err(RequestError::SnapshotNotReady(why)) = refused else {
            panic!("{refused:?}");
        };
        assert!(why.contains(home) && why.contains("snapshotTimeout"), "{why}");
    }
    let taken = fake.count_calls("create_snapshot");
    assert_eq!(taken, 1, "{:?}", fake.calls());
    // Once that one has ended, a removal keeps it (ready now) rather than take another: the
    // home has not been used since (its use mark is the one the snapshot carries).
    let driver = ready_driver(&fake);
    assert_eq!(backend.remove_homes(&identity, None).await.unwrap(), [home]);
    driver.abort();
    let taken = fake.count_calls("create_snapshot");
    assert_eq!(taken, 1, "{:?}", fake.calls());
}

/// Removals of one home at the same moment on two replicas take one snapshot: each names it
/// alike from the same snapshots and use mark, and the second create, refused as taken, waits
/// for the first's (before, sharing was per replica: each took its own).
#[tokio::test]
async fn removals_at_once_on_two_replicas_take_one_snapshot() {
    let (backend, fake) = with_alices_home_snapshotted().await;
    let replica = replica_of(&backend, &fake);
    // Each create takes a moment, as on an API server, so that the two interleave.
    fake.with(|s| s.snapshot_latency = std::time::Duration::from_millis(20));
    let identity = alice();
    let (first, second) = tokio::join!(
        backend.remove_homes(&identity, None),
        replica.remove_homes(&identity, None)
    );
    for refused in [first, second] {
        let Err(RequestError::SnapshotNotReady(why)) = refused else {
            panic!("{refused:?}");
        };
        assert!(why.contains(ALICES_HOME), "{why}");
    }
    assert_eq!(fake.count_calls("create_snapshot"), 2, "{:?}", fake.calls());
    assert_eq!(
        fake.with(|s| s.snapshots.len()),
        1,
        "one made: {:?}",
        fake.calls()
    );
}

#[tokio::test]
async fn delete_all_user_saves_every_provisioned_home_before_any_goes() {
    let (backend, fake) = on_fake(&[
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTTIMEOUT", "1s"),
    ]);
    fake.put_claim(claim(
        "user-storage-alice-dtu-dk",
        "alice@dtu.dk",
        Some("per-user"),
    ));
    fake.put_claim(claim("web-alice-home", "alice@dtu.dk", Some("per-workspace")));
    fake.put_claim(claim("user-storage-alice-old", "alice@dtu.dk", None));
    backend.synced().await;

    // Not ready in time: nothing is deleted.
    let refused = backend.delete_all_user("alice@dtu.dk").await;
    assert!(
        matches!(refused, Err(RequestError::SnapshotNotReady(_))),
        "{refused:?}"
    );
    assert!(!fake.calls().iter().any(|c| c.starts_with("delete_")));

    let driver = ready_driver(&fake);
    let done = backend.delete_all_user("alice@dtu.dk").await;
    driver.abort();
    assert!(done.unwrap());
    let calls = fake.calls();
    let first_delete = calls
        .iter()
        .position(|c| c.starts_with("delete_storage"))
        .unwrap();
    let saved: Vec<&String> = calls[..first_delete]
        .iter()
        .filter(|c| c.starts_with("create_snapshot"))
        .collect();
    // Both provisioned homes (not the nfs one: no CSI driver to snapshot it), before any delete.
    for home in ["user-storage-alice-dtu-dk", "web-alice-home"] {
        assert!(saved.iter().any(|c| c.contains(home)), "{home}: {calls:?}");
    }
    assert!(
        !saved.iter().any(|c| c.contains("user-storage-alice-old")),
        "{calls:?}"
    );
}

/// Issue 46: a lost `per-user` home comes back from its owner's snapshot whichever of the owner's
/// two names it has. `m.n@dtu.dk` and `m-n@dtu.dk` share a user string: once m.n's home is
/// removed (saved first), m-n may take its name, and m.n's next home, under m.n's own name, is
/// made from m.n's snapshot all the same (it was keyed by the claim's name, and found nothing).
#[tokio::test]
async fn a_home_under_its_owners_other_name_is_made_from_the_owners_snapshot() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n    volumeMounts: [{name: sciencedata, mountPath: /home}]\n";
    let url = super::serve(manifest).await;
    let catalogue = format!(r#"[{{"name": "web", "url": "{url}"}}]"#);
    let (backend, fake) = on_fake(&[
        ("BACKEND_CATALOGUE", &catalogue),
        ("BACKEND_STORAGESTRATEGY", "per-user"),
        ("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"),
        ("BACKEND_SNAPSHOTTIMEOUT", "5s"),
    ]);
    let mn = Identity {
        username: "m.n".to_owned(),
        groups: Vec::new(),
        user: model::user::UserId::parse("m.n@dtu.dk").unwrap(),
        admin: false,
    };
    let plain = model::names::storage_name(&mn.user);
    let own = model::names::storage_name_for(&mn.user);
    fake.put_claim(claim(&plain, "m.n@dtu.dk", Some("per-user")));
    backend.synced().await;
    let driver = ready_driver(&fake);
    assert_eq!(
        backend.remove_homes(&mn, None).await.unwrap(),
        std::slice::from_ref(&plain)
    );
    let saved = fake.with(|s| s.snapshots.keys().cloned().collect::<Vec<_>>());
    let [saved] = <[String; 1]>::try_from(saved).expect("one snapshot");

    fake.put_claim(claim(&plain, "m-n@dtu.dk", Some("per-user")));
    let _leader = super::controlling(&backend).drop_guard();
    backend
        .launch(&mn, &super::launch("web", None), super::SILO)
        .await
        .unwrap();
    driver.abort();
    let home = fake
        .with(|s| s.claims.get(&own).cloned())
        .expect("m.n's home under m.n's own name");
    let source = home
        .spec
        .and_then(|spec| spec.data_source)
        .map(|source| source.name);
    assert_eq!(
        source.as_deref(),
        Some(saved.as_str()),
        "made from m.n's snapshot"
    );
    let taken = fake.with(|s| s.claims[&plain].clone());
    assert_eq!(
        taken.annotations()["outfit.dev/user-id"],
        "m-n@dtu.dk",
        "m-n's claim untouched"
    );
}

/// With the snapshots watched, `GET /api/v1/storage` lists them from the watch, with no call to
/// the API server (issue 46: 2,157 requests made 2,157 LISTs); while the watch can't say (not
/// listed yet, or failed since), they are asked of it as before.
#[tokio::test]
async fn storage_lists_come_from_the_snapshots_watch_while_it_can_say() {
    use kube::runtime::watcher::Event;
    use outfit_workspaces_core::workspace::snapshot;

    use crate::io::snapshot_watch::SnapshotWatch;

    let whitelist = ("BACKEND_WHITELISTMANIFESTREGEX", r"http://127\.0\.0\.1:");
    let env = [("BACKEND_SNAPSHOTCLASSNAME", "csi-snapshots"), whitelist];
    let (config, fake, cache) = crate::io::fake::on_fake(&env);
    let (watch, mut writer) = SnapshotWatch::fed(crate::io::fake::NAMESPACE);
    let cache = cache.watching_snapshots(watch.clone());
    let member = ClusterWorkspaces::new(config.default_cluster.clone(), config, fake.clone(), cache);
    let backend = Backend::new(member);
    let owner = |id: &str| UserId::parse(id).unwrap();
    let taken = |name: &str, user: &UserId| {
        snapshot::volume_snapshot(
            name.to_owned(),
            (ALICES_HOME, user),
            "csi-snapshots",
            (snapshot::Occasion::Removal, None),
            None,
        )
    };
    // The watch shows one of alice's and one of bob's; the API server has another of alice's.
    writer.apply_watcher_event(&Event::Apply(taken("watched", &owner("alice@dtu.dk"))));
    writer.apply_watcher_event(&Event::Apply(taken("bobs", &owner("bob@dtu.dk"))));
    let asked = taken("asked", &owner("alice@dtu.dk"));
    fake.with(|s| s.snapshots.insert("asked".to_owned(), asked));

    for _ in 0..20 {
        let (_, snapshots) = backend.homes(&alice(), None).await.unwrap();
        let names: Vec<&str> = snapshots.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["watched"]);
    }
    assert_eq!(fake.count_calls("snapshots_of"), 0, "{:?}", fake.calls());

    // The watch failed: until it lists again, the API server is asked.
    watch.failed();
    let (_, snapshots) = backend.homes(&alice(), None).await.unwrap();
    let names: Vec<&str> = snapshots.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["asked"]);
    assert_eq!(fake.count_calls("snapshots_of"), 1);
}
