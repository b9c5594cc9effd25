//! Users' homes through the native API, on a fake cluster (issue 32): listed by owner, removed
//! only when no workspace of the user is left, `per-workspace` ones never (they go with their
//! Workspace), another user's only by an admin.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::json;

use super::{
    tests::{alice, on_fake},
    *,
};
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

    let homes = backend.homes(&alice(), None).unwrap();
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
        backend.homes(&alice(), Some("bob@dtu.dk")),
        Err(RequestError::Forbidden(_))
    ));
    let admin = Identity {
        admin: true,
        ..alice()
    };
    let bobs = backend.homes(&admin, Some("bob@dtu.dk")).unwrap();
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
