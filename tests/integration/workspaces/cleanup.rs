//! What a delete takes with it, without waiting for the garbage collector.

use std::time::Duration;

use k8s_openapi::api::{
    core::v1::{Pod, Service},
    networking::v1::Ingress,
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::support::*;
use crate::control_plane::ControlPlane;

/// deic-dk's delete removes the pod's Services and Ingress itself ("deletion jobs like cleaning
/// up related resources"); outfit does too, rather than leaving them to kube-controller-manager's
/// garbage collector alone (the workspaces soak saw the collector stall for minutes after an API
/// server restart, leaving them behind). A finalizer holds the pod while it terminates, so the
/// collector, which waits for the owner to be gone, cannot be what removed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_removes_the_services_and_ingress_while_the_pod_still_terminates() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-cleanup";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let backend = Backend::start(plane, ns, &manifests, "").await;
    let pod = "web-carol-dtu-dk";
    let carol = json!({"user_id": "carol@dtu.dk", "pod_name": pod});
    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "carol@dtu.dk"}))
        .await;
    assert_eq!(
        (status, created["pod_name"].as_str()),
        (200, Some(pod)),
        "{created}"
    );
    assert_eq!(
        backend.post("/watch_create_pod", carol.clone()).await,
        (200, json!({"ready": true}))
    );
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ns);
    let http = format!("{pod}-http");
    let ingress = format!("{pod}-ingress");
    assert!(services.get_opt(&http).await.unwrap().is_some());
    assert!(ingresses.get_opt(&ingress).await.unwrap().is_some());

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let hold = json!({"metadata": {"finalizers": ["outfit.test/hold"]}});
    pods.patch(pod, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    assert_eq!(
        backend.post("/delete_pod", carol.clone()).await,
        (200, json!({"requested": true}))
    );
    eventually(
        "the Service and Ingress removed",
        Duration::from_secs(10),
        || async {
            services.get_opt(&http).await.unwrap().is_none()
                && ingresses.get_opt(&ingress).await.unwrap().is_none()
        },
    )
    .await;
    let held = pods.get(pod).await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the pod is still terminating, held by its finalizer"
    );

    let release = json!({"metadata": {"finalizers": null}});
    pods.patch(pod, &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    assert_eq!(
        backend.post("/watch_delete_pod", carol).await,
        (200, json!({"deleted": true}))
    );
    nothing_left(&client, ns, "user-storage-carol-dtu-dk").await;
}
