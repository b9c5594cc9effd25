//! The groups claim decides a PodPolicy (issue 42), end to end: users sign in with the site's
//! provider (the real one of `sign_in`) and launch through the native API; the backend records
//! each owner's groups on the Workspace and its pod (`outfit.dev/user-groups`), and `outfit
//! serve`, registered for the namespace, trusts them as it trusts the owner: from the backend's
//! ServiceAccount only (`spec.match.owner.groupsAnnotation`). The policy is seed 000's: a GPU
//! for `gpu-users` (an env var here, since kwok's nodes have no GPU to schedule on).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

use super::{
    native::WEB_FIELDS,
    sign_in::{Provider, annotation, gpu, gpu_policy, oidc_config, session_of, webhook_with},
    stop_start::pod_until,
    support::*,
};
use crate::control_plane::{ControlPlane, create, resource};

const SYSTEM: &str = "ws-groups-system";
const NAMESPACE: &str = "ws-groups";

/// Launches `web` with the session `cookie` and answers its pod once the controller made it.
async fn launch(backend: &Backend, cookie: &str, pods: &Api<Pod>) -> Pod {
    let (status, launched) = backend.launch(Caller::Cookie(cookie), "web").await;
    assert_eq!(status, 201, "{launched}");
    let name = launched["name"].as_str().expect("a name");
    pod_until(pods, name, true).await.expect("its pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_claim_decides_a_pod_policy_through_the_backend() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    namespace(&client, NAMESPACE).await;
    let kubeconfig = least_privilege(plane, &client, SYSTEM, NAMESPACE).await;
    let provisioners = format!("{{serviceAccounts: [{SYSTEM}/outfit-workspaces]}}");
    let (webhook, dir) = webhook_with(&client, NAMESPACE, &gpu_policy(&provisioners)).await;
    let manifests = Manifests::start().await;
    let web = manifests.put("web.yaml", WEB_FIELDS);
    let port = free_port();
    let provider = Provider::start(NAMESPACE, &format!("http://127.0.0.1:{port}/auth/callback")).await;
    let extra = format!(
        "catalogue:\n- {{name: web, url: '{web}'}}\n{}",
        oidc_config(&provider, port, NAMESPACE)
    );
    let backend = Backend::start_on(plane, NAMESPACE, &manifests, &extra, kubeconfig, port).await;
    let pods = Api::<Pod>::namespaced(client.clone(), NAMESPACE);

    // Alice is in gpu-users by the provider's groups claim: her pod gets the GPU.
    let alice = session_of(port, &provider, "alice").await;
    let pod = launch(&backend, &alice, &pods).await;
    let name = pod.metadata.name.clone().unwrap();
    assert_eq!(
        annotation(&pod, "outfit.dev/user-groups").as_deref(),
        Some("gpu-users\nstaff")
    );
    assert_eq!(gpu(&pod).as_deref(), Some("granted"), "{:?}", pod.metadata);
    let mutated_by = annotation(&pod, "outfit.dev/mutated-by").unwrap_or_default();
    assert!(
        mutated_by.contains("PodPolicy//gpus-for-gpu-users"),
        "{mutated_by}"
    );

    // Bob is in staff only: his pod comes as the manifest made it.
    let bob = session_of(port, &provider, "bob").await;
    let bobs = launch(&backend, &bob, &pods).await;
    assert_eq!(
        annotation(&bobs, "outfit.dev/user-groups").as_deref(),
        Some("staff")
    );
    assert_eq!(gpu(&bobs), None, "{:?}", bobs.metadata);

    // Stopped and started by her, the controller makes her pod again from the record: the GPU
    // again, from the groups of her session now.
    let path = |verb: &str| format!("/api/v1/workspaces/{name}/{verb}");
    let (status, answer) = backend
        .call(Caller::Cookie(&alice), "POST", &path("stop"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    pod_until(&pods, &name, false).await;
    let (status, answer) = backend
        .call(Caller::Cookie(&alice), "POST", &path("start"), None)
        .await;
    assert_eq!(status, 202, "{answer}");
    let again = pod_until(&pods, &name, true).await.expect("her pod again");
    assert_eq!(gpu(&again).as_deref(), Some("granted"));

    // Anyone else who writes the annotation is not trusted with it: a pod alice's groups name,
    // created by the cluster's admin, is admitted as it came.
    let forged = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "forged", "annotations": {
            "outfit.dev/user-id": "mallory", "outfit.dev/user-groups": "gpu-users"}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}
    });
    let stored: Value = create(
        &client,
        Some(NAMESPACE),
        &resource("", "v1", "Pod", "pods"),
        forged,
    )
    .await
    .expect("the admin may create a pod");
    assert!(stored["spec"]["containers"][0]["env"].is_null(), "{stored}");
    webhook.assert_running();
    let _ = std::fs::remove_dir_all(&dir);
}
