//! Root in the workspace without root on the node (seed 002), on the real node: its runtime
//! (containerd 2, runc 1.5) runs `hostUsers: false` pods in user namespaces of their own, with
//! idmapped mounts for their volumes; its second handler (Debian's runc 1.1, the RuntimeClass
//! `runc-without-userns`) cannot, as a node of containerd 1.6 or runc 1.1 cannot.

use std::{os::unix::fs::MetadataExt, time::Duration};

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::{Api, api::ListParams};
use outfit_test_support::provisioner;

use super::{
    super::storage::{launched_ready, only_claim},
    *,
};

/// Fails on kwok, where `exec` runs on this machine and shows its identity map, and no runtime
/// makes a user namespace. Here the workspace's uid 0 is a uid of 65,536 or above on the node
/// (`/proc/self/uid_map`), its user still writes its home, and the file is the user's (1000) on
/// the node's disk too: the kubelet's runtime mounts the volume idmapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_in_a_user_namespace_is_unprivileged_on_the_node_and_writes_its_home() {
    let plane = ControlPlane::with_real_node();
    provisioner::ensure(plane).await;
    let ns = "rn-userns";
    let web = deic_manifest("web", "").replace("LOCALREGISTRY", "registry.outfit.test");
    let extra = format!(
        "hostUsers: false\nstorageStrategy: per-user\nstorageClassName: {}\n",
        provisioner::NODE_LOCAL_CLASS
    );
    let OnRealNode { client, backend, .. } = on_real_node(ns, &[("web", &web)], &extra).await;
    let name = launched_ready(&backend, ALICE, "web").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    assert_eq!(
        pods.get(&name).await.unwrap().spec.unwrap().host_users,
        Some(false)
    );

    // "inside outside count": uid 0 of the workspace is an unprivileged uid of the node.
    let map = exec(&pods, &name, &["cat", "/proc/self/uid_map"]).await;
    let fields: Vec<u64> = map.split_whitespace().map(|f| f.parse().unwrap()).collect();
    assert_eq!(fields.len(), 3, "one range: {map}");
    assert_eq!(fields[0], 0, "{map}");
    assert!(
        fields[1] >= 65_536,
        "uid 0 inside is {} outside: {map}",
        fields[1]
    );

    // The user (1000 inside) writes the home; on the node's disk the file is 1000's too.
    let written = exec(
        &pods,
        &name,
        &[
            "sh",
            "-c",
            "id -u > /home/jovyan/work/mine && cat /home/jovyan/work/mine",
        ],
    )
    .await;
    assert_eq!(written.trim(), "1000");
    let claim = only_claim(&client, ns).await;
    let volume = claim.spec.unwrap().volume_name.unwrap();
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&volume)
        .await
        .unwrap();
    let handle = volume.spec.unwrap().csi.unwrap().volume_handle;
    let on_disk = plane
        .state_dir
        .join("node-local-volumes")
        .join(handle)
        .join("mine");
    let owner = std::fs::metadata(&on_disk)
        .unwrap_or_else(|e| panic!("{}: {e}", on_disk.display()))
        .uid();
    assert_eq!(owner, 1000, "{}", on_disk.display());
}

/// Fails on kwok, where a pod with `hostUsers: false` turns Ready like any other. On a runtime
/// without user namespaces (here the node's second handler, Debian's runc 1.1, by its
/// RuntimeClass) the kubelet can never make its sandbox and retries for ever: the backend fails
/// the start at once, saying why, rather than at the create deadline with a pod stuck in
/// ContainerCreating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_namespace_on_a_runtime_without_them_fails_the_start_and_says_why() {
    let ns = "rn-userns-refused";
    let plane = ControlPlane::with_real_node();
    let handler = plane.env("RUNTIME_CLASS_WITHOUT_USERNS");
    let web = WEB.replace("spec:\n", &format!("spec:\n  runtimeClassName: {handler}\n"));
    let OnRealNode { client, backend, .. } = on_real_node(ns, &[("web", &web)], "hostUsers: false\n").await;

    let (_, events) = launch_and_follow(&backend, "web").await;
    let (last, report) = events.last().expect("events");
    assert_eq!(last, "failed", "{events:?}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("hostUsers: false") && message.contains("does not support user namespaces"),
        "{report}"
    );
    // Failed on the kubelet's word, not at the deadline (timeoutCreate is 100 s here).
    assert!(!message.contains("create deadline"), "{report}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("the failed pod removed", Duration::from_secs(30), || async {
        pods.list(&ListParams::default()).await.unwrap().items.is_empty()
    })
    .await;
}
