//! Names no cache shows: asked of the API server when a launch could have given the caller that
//! name (the cache may be behind another replica's launch), and answered at once when none could
//! (issue 46: 2,446 GETs of unknown names made 2,446 API-server reads).

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use outfit_workspaces_core::{model::keys, workspace::progress::Status};

use super::{alice, on_fake, workspace};
use crate::backend::request::RequestError;

#[tokio::test]
async fn another_users_pod_is_neither_deleted_nor_shown() {
    let (backend, fake) = on_fake(&[]);
    // Bob's, under a name a launch could give alice (a user string two ids share).
    let name = "web-alice-dtu-dk";
    fake.put_pod(workspace(name, "bob@dtu.dk"));
    let error = backend
        .delete_pod("alice@dtu.dk", name)
        .await
        .expect_err("not alice's");
    assert!(matches!(error, RequestError::NoSuchPod { .. }), "{error:?}");
    // The cache may be behind, so the API server is asked too; its answer is judged the same.
    assert_eq!(fake.calls(), [format!("get_pod {name}")], "no delete is sent");
    assert!(fake.with(|s| s.pods.contains_key(name)));
    assert!(backend.get_pods("alice@dtu.dk").unwrap().is_empty());
    let gone = backend.watch_delete("alice@dtu.dk", name).await.unwrap();
    assert!(
        gone,
        "about another's pod the answer is deleted, at once and saying nothing"
    );
}

/// Issue 25: a workspace launched a moment ago through another replica is not "not found" on
/// this one while its watch lags (the two-replica soak's users, whose requests go to the replicas
/// in turn, were told so): a name the caches do not hold is asked of the API server, and only an
/// outfit workspace of the asker's is shown.
// Paused time: the backend gives the cache (which is never fed here) a while to show it.
#[tokio::test(start_paused = true)]
async fn a_workspace_the_cache_does_not_show_yet_is_read_from_the_api_server() {
    let (backend, fake) = on_fake(&[]);
    let mut made_elsewhere = workspace("web-alice-dtu-dk", "alice@dtu.dk");
    made_elsewhere
        .labels_mut()
        .insert(keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned());
    let mut bobs = made_elsewhere.clone();
    // Bob's and not outfit's, under names a launch could give alice: judged by the API server's.
    bobs.metadata.name = Some("web-alice-dtu-dk-1".to_owned());
    bobs.annotations_mut()
        .insert(keys::ANNOTATION_USER_ID.to_owned(), "bob@dtu.dk".to_owned());
    let not_outfits = workspace("other-alice-dtu-dk", "alice@dtu.dk");
    // In the API server only: the cache has not seen them.
    fake.with(|s| {
        for pod in [made_elsewhere, bobs, not_outfits] {
            s.pods.insert(pod.name_any(), pod);
        }
    });

    let shown = backend.workspace(&alice(), "web-alice-dtu-dk").await.unwrap();
    // Running, with no start under way: as the cache would show it, not as gone.
    assert_eq!(
        (shown.name.as_str(), shown.status),
        ("web-alice-dtu-dk", Status::Ready)
    );
    assert_eq!(
        backend.follow(&alice(), "web-alice-dtu-dk").await.unwrap(),
        "uid-web-alice-dtu-dk"
    );
    for name in ["web-alice-dtu-dk-1", "other-alice-dtu-dk", "none-alice-dtu-dk"] {
        let refused = backend.workspace(&alice(), name).await;
        assert!(
            matches!(refused, Err(RequestError::NoSuchPod { .. })),
            "{name}: {refused:?}"
        );
    }
    assert_eq!(
        fake.count_calls("get_pod"),
        5,
        "each name asked: {:?}",
        fake.calls()
    );
}

/// Names no launch gives alice (another user's, or of no launch's shape) are answered not found
/// without asking the API server, whichever call asks: a flood of them costs it nothing. On the
/// code before, each was a GET.
#[tokio::test(start_paused = true)]
async fn names_no_launch_gives_the_caller_are_answered_without_the_api_server() {
    let (backend, fake) = on_fake(&[]);
    let mut bobs: Pod = workspace("web-bob-dtu-dk", "bob@dtu.dk");
    bobs.labels_mut()
        .insert(keys::LABEL_MANAGED_BY.to_owned(), keys::MANAGED_BY.to_owned());
    // In the API server only, as if launched through another replica a moment ago.
    fake.with(|s| s.pods.insert(bobs.name_any(), bobs));
    for name in ["web-bob-dtu-dk", "random-name", "x", "web-alice-dtu-dk-10"] {
        let not_found =
            |result: &Result<_, RequestError>| matches!(result, Err(RequestError::NoSuchPod { .. }));
        assert!(
            not_found(&backend.workspace(&alice(), name).await.map(|_| ())),
            "{name}"
        );
        assert!(
            not_found(&backend.follow(&alice(), name).await.map(|_| ())),
            "{name}"
        );
        assert!(
            not_found(&backend.remove(&alice(), name).await.map(|_| ())),
            "{name}"
        );
        assert!(backend.stop(&alice(), name).await.is_err(), "{name}");
        assert!(
            not_found(&backend.delete_pod("alice@dtu.dk", name).await),
            "{name}"
        );
        let outcome = backend.watch_create("alice@dtu.dk", name).await.unwrap();
        assert!(!outcome.ready, "{name}");
    }
    assert_eq!(
        fake.count_calls("get_"),
        0,
        "no API-server read: {:?}",
        fake.calls()
    );
    // A name a launch of alice's could have given is asked: the cache may be behind.
    let refused = backend.workspace(&alice(), "web-alice-dtu-dk-7").await;
    assert!(
        matches!(refused, Err(RequestError::NoSuchPod { .. })),
        "{refused:?}"
    );
    assert_eq!(fake.calls(), ["get_pod web-alice-dtu-dk-7"]);
}
