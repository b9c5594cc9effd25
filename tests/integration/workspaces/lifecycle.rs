//! What follows a create when nobody is watching: deadlines, restarts, replicas.

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    core::v1::{Event, Pod, Service},
    networking::v1::Ingress,
};
use kube::{Api, api::ListParams};
use serde_json::{Value, json};

use super::support::*;
use crate::control_plane::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_never_turns_ready_is_removed_at_its_deadline_with_the_reason() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-deadline";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("stuck.yaml", UNSCHEDULABLE);
    // A deadline of 15 s rather than the tests' 60 s: the wait is the test's whole length.
    let backend = Backend::start(plane, ns, &manifests, "timeoutCreate: 15s\n").await;

    // The deadline is set when the create arrives, so it is at least timeoutCreate from here.
    let creating = Instant::now();
    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "carol"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let pod_name = created["pod_name"].as_str().unwrap().to_owned();
    assert_eq!(pod_name, "stuck-carol");
    let (_, listed) = backend.post("/get_pods", json!({"user_id": "carol"})).await;
    assert_eq!(listed[0]["status"], "Creating");

    let (status, answer) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "carol", "pod_name": pod_name}),
        )
        .await;
    let waited = creating.elapsed();
    assert_eq!((status, &answer["ready"]), (200, &json!(false)), "{answer}");
    let reason = answer["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("scheduling:"), "{reason}");
    // The answer came at the deadline (timeoutCreate 15s after the create), not before it nor
    // long after (the upper bound leaves room for a loaded machine).
    assert!(
        waited >= Duration::from_secs(15) && waited < Duration::from_secs(75),
        "answered {waited:?} after the create; timeoutCreate is 15s"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("removal of the stuck pod", Duration::from_secs(30), || async {
        pods.get_opt(&pod_name).await.unwrap().is_none()
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let failed = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("CreateFailed"))
        .expect("a CreateFailed event");
    assert!(
        failed.message.as_deref().unwrap_or("").contains("scheduling"),
        "{failed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_survives_a_restart_of_the_backend() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-restart";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", &JUPYTER.replace("TOKEN_KEY", "none-such"));
    let mut backend = Backend::start(plane, ns, &manifests, "").await;

    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "dave"}))
        .await;
    assert_eq!(status, 200, "{created}");
    // Killed before the pod is ready: nothing in memory survives.
    backend.restart().await;
    let watch = json!({"user_id": "dave", "pod_name": "jupyter-dave"});
    assert_eq!(
        backend.post("/watch_create_pod", watch).await,
        (200, json!({"ready": true}))
    );
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    assert!(services.get_opt("jupyter-dave-http").await.unwrap().is_some());
    // A second replica, started now, knows all of it from the cluster and answers alike.
    let replica = Backend::start(plane, ns, &manifests, "").await;
    let ask = json!({"user_id": "dave"});
    let (first, second) = (
        backend.post("/get_pods", ask.clone()).await,
        replica.post("/get_pods", ask).await,
    );
    let without_age = |mut answer: (u16, Value)| {
        answer.1[0]["age"] = json!(null);
        answer
    };
    assert_eq!(without_age(first.clone()), without_age(second));
    assert_eq!(
        first.1[0]["status"].as_str().map(|s| s.starts_with("Running:")),
        Some(true),
        "{first:?}"
    );
    drop(replica);
    assert!(
        Api::<Ingress>::namespaced(client.clone(), ns)
            .get_opt("jupyter-dave-ingress")
            .await
            .unwrap()
            .is_some()
    );

    // delete_all_user removes the pod and the storage, and says so.
    assert_eq!(
        backend.post("/delete_all_user", json!({"user_id": "dave"})).await,
        (200, json!({"deleted": true}))
    );
    nothing_left(&client, ns, "user-storage-dave").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_the_api_server_refuses_fails_the_create_and_removes_what_it_made() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-services-fail";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    // An underscore is no DNS name: the API server refuses the Ingress host (deic-dk ignores
    // such errors and calls the workspace ready without its URL).
    let backend = Backend::start(plane, ns, &manifests, "ingressDomain: bad_domain.test\n").await;

    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "erin"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let (status, answer) = backend
        .post(
            "/watch_create_pod",
            json!({"user_id": "erin", "pod_name": "web-erin"}),
        )
        .await;
    assert_eq!((status, &answer["ready"]), (200, &json!(false)), "{answer}");
    let reason = answer["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("services:") && reason.contains("Ingress"),
        "{reason}"
    );
    // The pod goes, and the http Service it owned goes with it (garbage collector).
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    eventually(
        "removal of the pod and its Service",
        Duration::from_secs(60),
        || async {
            pods.get_opt("web-erin").await.unwrap().is_none()
                && services.get_opt("web-erin-http").await.unwrap().is_none()
        },
    )
    .await;
}

/// The storage sweep reads the cache, which may be behind a create that has just marked the
/// user's claim as wanted: its delete names the version it saw, and the API server keeps a claim
/// changed since (found by `hack/soak.sh --workspaces`: a launch lost its claim to the sweep).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_delete_from_a_stale_view_keeps_a_claim_wanted_since() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::api::{Patch, PatchParams, PostParams};

    let plane = ControlPlane::get();
    let client = plane.admin_client().await;
    let ns = "sweep-precondition";
    namespace(&client, ns).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "user-storage-erin"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    let seen = claims.create(&PostParams::default(), &claim).await.unwrap();
    let seen_version = seen.metadata.resource_version.clone().unwrap();
    let wanted = json!({"metadata": {"annotations": {"outfit.dev/wanted-until": "2099-01-01T00:00:00Z"}}});
    claims
        .patch(
            "user-storage-erin",
            &PatchParams::default(),
            &Patch::Merge(&wanted),
        )
        .await
        .unwrap();

    let cluster = outfit_workspaces::io::cluster::Cluster::new(client.clone(), ns);
    let error = cluster
        .delete_storage("user-storage-erin", Some(&seen_version))
        .await
        .expect_err("a delete of a version that changed since must be refused");
    assert!(error.is_conflict(), "{error}");
    let kept = claims.get("user-storage-erin").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none(), "{kept:?}");

    let current = kept.metadata.resource_version.clone();
    cluster
        .delete_storage("user-storage-erin", current.as_deref())
        .await
        .unwrap();
    let after = claims.get_opt("user-storage-erin").await.unwrap();
    assert!(
        after.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "the current version is deleted"
    );
}
