//! What a workspace keeps and loses over time on the real node: its home across a stop and a
//! start and back from a snapshot, and its pod when its own server says it is idle.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use outfit_test_support::provisioner;

use super::{
    super::{
        snapshots::{follow_restore_to_ready, lose_home, restored_from, stop_until_snapshot},
        storage::{launched_ready, only_claim, uid},
    },
    *,
};

/// Fails on kwok: no kubelet mounts the claim there, and `exec` runs on this machine, where
/// `/home/jovyan/work` does not exist. Here the real kubelet mounts the user's claim (a CSI volume
/// of the provisioner stand-in's node-local class, bind-mounted by the node's CSI driver) into the
/// container; a file written in it by the workspace's user outlives the pod, the next start mounts
/// it again, and when the claim is lost while the workspace is stopped, the start makes the home
/// again from the snapshot of that stop, the file in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_the_home_survives_a_stop_and_a_start_and_comes_back_from_its_snapshot() {
    provisioner::ensure(ControlPlane::with_real_node()).await;
    let ns = "rn-home";
    // The catalogue entry mounts the home where deic-dk's manifests do.
    let web = deic_manifest("web", "").replace("LOCALREGISTRY", "registry.outfit.test");
    let extra = format!(
        "storageStrategy: per-user\nstorageClassName: {}\nsnapshotClassName: {}\nsnapshotTimeout: 60s\n",
        provisioner::NODE_LOCAL_CLASS,
        provisioner::SNAPSHOT_CLASS
    );
    let OnRealNode { client, backend, .. } = on_real_node(ns, &[("web", &web)], &extra).await;
    let alice = ALICE;
    let name = launched_ready(&backend, alice, "web").await;

    // Written by the workspace's user (1000, the image's), in the home the kubelet mounted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let write = "id -u > /home/jovyan/work/kept && cat /home/jovyan/work/kept";
    let written = exec(&pods, &name, &["sh", "-c", write]).await;
    assert_eq!(written.trim(), "1000");

    let start = |name: &str| {
        let path = format!("/api/v1/workspaces/{name}/start");
        let backend = &backend;
        async move {
            let (status, answer) = backend.call(alice, "POST", &path, None).await;
            assert_eq!(status, 202, "{answer}");
        }
    };
    let pod_gone = || async {
        eventually("the pod gone", Duration::from_secs(60), || async {
            pods.get_opt(&name).await.unwrap().is_none()
        })
        .await
    };
    stop_until_snapshot(&backend, (&client, ns), alice, (&name, "SnapshotReady")).await;
    pod_gone().await;
    start(&name).await;
    backend.follow_to_ready(alice, &name).await;
    let kept = exec(&pods, &name, &["cat", "/home/jovyan/work/kept"]).await;
    assert_eq!(kept.trim(), "1000", "the file written before the stop");

    // Lost while stopped (its claim deleted by hand): the start makes it again from the newest
    // snapshot, the one of that stop, and the file is in it.
    stop_until_snapshot(&backend, (&client, ns), alice, (&name, "SnapshotReady")).await;
    pod_gone().await;
    let (lost, newest) = lose_home(&client, ns, &name).await;
    start(&name).await;
    follow_restore_to_ready(&backend, (&client, ns), alice, &name).await;
    let again = only_claim(&client, ns).await;
    assert_ne!(uid(&again), uid(&lost));
    assert_eq!(restored_from(&client, &again).await, (newest.clone(), newest));
    let restored = exec(&pods, &name, &["cat", "/home/jovyan/work/kept"]).await;
    assert_eq!(restored.trim(), "1000", "the file, from the snapshot");
}

/// Fails on kwok: nothing answers at a kwok pod's address, so the busy workspace would be culled
/// as idle too. Here each workspace's own server reports its last activity (Jupyter Server's
/// `/api/status`, at the `outfit.dev/activity-url` of its manifest): the one whose server keeps
/// reporting activity stays, the one whose activity ended at its start is stopped as idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_culling_follows_what_the_workspace_itself_reports() {
    let ns = "rn-cull";
    let reporting = WEB.replace(
        "annotations: {",
        "annotations: {outfit.dev/activity-url: 'http://{ip}:8888/api/status', ",
    );
    let busy = reporting.replace("ports: [", "env: [{name: BUSY, value: '1'}]\n    ports: [");
    let OnRealNode { client, backend, .. } = on_real_node(
        ns,
        &[("idle", &reporting), ("busy", &busy)],
        "idleTimeout: 20s\nactivityCheckInterval: 2s\n",
    )
    .await;
    let alice = ALICE;
    let mut names = Vec::new();
    for entry in ["idle", "busy"] {
        let (status, created) = backend.launch(alice, entry).await;
        assert_eq!(status, 201, "{created}");
        let name = created["name"].as_str().unwrap().to_owned();
        backend.follow_to_ready(alice, &name).await;
        names.push(name);
    }
    let busy_ready = tokio::time::Instant::now();
    let [idle, busy] = &names[..] else { unreachable!() };

    let shown = |name: String| {
        let backend = &backend;
        async move {
            let (_, shown) = backend
                .call(alice, "GET", &format!("/api/v1/workspaces/{name}"), None)
                .await;
            shown
        }
    };
    eventually(
        "the idle workspace stopped as idle",
        Duration::from_secs(120),
        || async {
            let shown = shown(idle.clone()).await;
            shown["stopped"]["reason"] == "idle"
        },
    )
    .await;
    // Half as long again as the idle timeout since its start, the busy one is still up: its own
    // reports kept it, recorded on its pod.
    tokio::time::sleep_until(busy_ready + Duration::from_secs(30)).await;
    let shown = shown(busy.clone()).await;
    assert_eq!(shown["status"], "ready", "{shown}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get(busy).await.unwrap();
    assert!(
        pod.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("outfit.dev/last-activity"),
        "the busy workspace's activity recorded"
    );
}
