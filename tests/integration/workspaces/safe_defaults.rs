//! What a default install of the backend gives a cluster (issue 33), on the real API server:
//! deic-dk's API asks for the install's own token, the workspace namespace enforces Pod
//! Security's `baseline`, workspaces may run in user namespaces of their own, and outfit's
//! webhook mutates before the guard validates: a PodPolicy that adds a device path the install
//! allows passes, one that adds another is refused naming the guard, the path and the policy;
//! and the workspace namespace, every home in it, is deleted only once annotated to be.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use serde_json::{Value, json};

use super::support::*;
use crate::{
    control_plane::{ControlPlane, create, resource},
    e2e::{Webhook, register},
};

/// The install `outfit manifests --workspaces` prints for `system` and `workspaces`.
fn printed(system: &str, workspaces: &str) -> Vec<Value> {
    crate::support::manifests(&[
        "--workspaces",
        "--namespace",
        system,
        "--workspaces-namespace",
        workspaces,
    ])
    .into_iter()
    .map(|d| d.value)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_install_asks_for_its_token_and_holds_workspaces_to_baseline() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let (system, ns) = ("ws-defaults-system", "ws-defaults");
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let kubeconfig = least_privilege(plane, &client, system, ns).await;

    // The printed install's token and its keys for deic-dk's callers, run as the pod would read
    // them (the token's directory is this test's).
    let install = printed(system, ns);
    let of = |kind: &str| {
        install
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("{kind}"))
    };
    let token = of("Secret")["stringData"]["token"].as_str().unwrap().to_owned();
    assert!(token.len() >= 32, "a random token: {token}");
    let config = of("ConfigMap")["data"]["config.yaml"].as_str().unwrap();
    let dir = std::env::temp_dir().join(format!("outfit-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), &token).unwrap();
    let callers: String = config
        .lines()
        .filter(|l| l.starts_with("allowedSourceCidrs:") || l.starts_with("bearerTokenFile:"))
        .map(|l| format!("{}\n", l.replace("/etc/outfit-workspaces", dir.to_str().unwrap())))
        .collect();
    assert!(callers.contains("bearerTokenFile:"), "{config}");
    let extra = format!("{callers}hostUsers: false\n");
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;

    // Without the token, or with another, deic-dk's API does nothing for anyone.
    let launch = json!({"yaml_url": url, "user_id": "dora@x.dk"}).to_string();
    for headers in [vec![], vec![("authorization", "Bearer not-the-token")]] {
        let (status, answer) = http_with(backend.port, "POST", "/create_pod", &headers, &launch).await;
        assert_eq!(status, 401, "{headers:?}: {answer}");
    }
    let bearer = format!("Bearer {token}");
    let with_token = [("authorization", bearer.as_str())];
    let (status, answer) = http_with(backend.port, "POST", "/create_pod", &with_token, &launch).await;
    assert_eq!(status, 200, "{answer}");
    let pod_name = serde_json::from_str::<Value>(&answer).unwrap()["pod_name"]
        .as_str()
        .unwrap()
        .to_owned();
    let watch = json!({"user_id": "dora@x.dk", "pod_name": pod_name}).to_string();
    let (status, ready) = http_with(backend.port, "POST", "/watch_create_pod", &with_token, &watch).await;
    assert_eq!((status, ready.trim()), (200, r#"{"ready":true}"#));

    // The workspace runs in a user namespace of its own (hostUsers: false), in a namespace that
    // enforces baseline: a privileged pod there is refused by Pod Security, the admin's too.
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get(&pod_name)
        .await
        .unwrap();
    assert_eq!(pod.spec.unwrap().host_users, Some(false));
    let labels = Api::<Namespace>::all(client.clone())
        .get(ns)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "baseline");
    let privileged = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": "i", "securityContext": {"privileged": true}}]}});
    let refused = create(&client, Some(ns), &resource("", "v1", "Pod", "pods"), privileged)
        .await
        .expect_err("baseline refuses a privileged pod");
    assert!(
        refused.to_string().contains("PodSecurity \"baseline"),
        "{refused}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two PodPolicies: one adds the GPU's device path the install allows, one `/dev/mem`.
const DEVICE_POLICIES: &str = r#"
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: gpu-devices}
spec:
  match: {selector: {matchLabels: {user: gpu}}}
  add:
    volumes: [{name: dri, hostPath: {path: /dev/dri}}]
    volumeMounts: [{name: dri, mountPath: /dev/dri}]
---
apiVersion: outfit.dev/v1alpha1
kind: PodPolicy
metadata: {name: raw-memory}
spec:
  match: {selector: {matchLabels: {user: mallory}}}
  add:
    volumes: [{name: mem, hostPath: {path: /dev/mem}}]
    volumeMounts: [{name: mem, mountPath: /dev/mem}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_policy_may_add_only_the_device_paths_the_install_allows() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-devices";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB);
    let kubeconfig = least_privilege_with(
        plane,
        &client,
        "ws-devices-system",
        ns,
        &["--allowed-host-path", "/dev/dri"],
    )
    .await;
    let dir = std::env::temp_dir().join(format!("outfit-devices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policies.yaml"), DEVICE_POLICIES).unwrap();
    let webhook = Webhook::start_with(&["--policies", dir.to_str().unwrap()], &[]);
    register(&client, &webhook, "ws-devices", ns).await;
    let backend = Backend::start_as(plane, ns, &manifests, "", kubeconfig).await;

    // The allowed device path: the webhook adds it, the guard lets it through.
    let (status, created) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "gpu@x.dk"}))
        .await;
    assert_eq!(status, 200, "{created}");
    let name = created["pod_name"].as_str().unwrap();
    let pod = Api::<Pod>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap();
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations["outfit.dev/mutated-by"].contains("PodPolicy//gpu-devices"),
        "{annotations:?}"
    );
    let volumes = pod.spec.unwrap().volumes.unwrap_or_default();
    assert!(
        volumes
            .iter()
            .any(|v| v.host_path.as_ref().is_some_and(|h| h.path == "/dev/dri")),
        "{volumes:?}"
    );

    // Another path: refused by the guard, which names itself, the path and the policy.
    let (status, refused) = backend
        .post("/create_pod", json!({"yaml_url": url, "user_id": "mallory@x.dk"}))
        .await;
    assert_ne!(status, 200, "{refused}");
    let error = refused.to_string();
    for part in [
        "outfit-workspaces-guard",
        "may not mount the host path /dev/mem",
        "allows: /dev/dri",
        "PodPolicy//raw-memory",
    ] {
        assert!(error.contains(part), "names {part}: {error}");
    }
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 1, "mallory's pod was never stored");
    webhook.assert_running();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 46, point 5: deleting the workspace namespace deleted every home and snapshot in it at
/// once (12 s in the probe, no removal snapshot). The install's policy refuses it, saying what
/// would go and how to do it anyway; annotated, it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_namespace_is_deleted_only_once_annotated_to_delete_its_homes() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-homes-guard";
    namespace(&client, ns).await;
    least_privilege(plane, &client, "ws-homes-guard-system", ns).await;
    let namespaces = Api::<Namespace>::all(client.clone());
    let dry_run = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    // The API server takes up a new policy a moment after it is stored: asked until it refuses.
    let refusal = outfit_test_support::wait::eventually(
        "the policy refusing the namespace's delete",
        std::time::Duration::from_secs(30),
        || async {
            match namespaces.delete(ns, &dry_run).await {
                Err(kube::Error::Api(status)) => Some(status),
                Ok(_) => None,
                Err(other) => panic!("deleting namespace {ns}: {other}"),
            }
        },
    )
    .await;
    assert_eq!(refusal.code, 403, "{refusal:?}");
    for part in [
        "outfit-workspaces-homes",
        "deletes every workspace's home and snapshot",
        "annotate it outfit.dev/delete-homes=true",
    ] {
        assert!(
            refusal.message.contains(part),
            "names {part}: {}",
            refusal.message
        );
    }
    assert!(namespaces.get_opt(ns).await.unwrap().is_some(), "still there");

    // Said twice, it goes.
    let annotated = json!({"metadata": {"annotations": {"outfit.dev/delete-homes": "true"}}});
    namespaces
        .patch(
            ns,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(annotated),
        )
        .await
        .expect("annotate the namespace");
    namespaces
        .delete(ns, &Default::default())
        .await
        .expect("the annotated namespace is deleted");
}
