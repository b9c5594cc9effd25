//! Issue 35, pulls planned ahead: the leader pulls a catalogue entry's image onto
//! `nodesPerImage` of the pool's nodes before anyone launches it, by pull pods pinned to a node
//! each, which it removes once done; a launch then lands on a node that holds the image and starts
//! without a pull, after which the entry's share of the launches (all of them) takes the image to
//! the third node. The nodes are played by the image kubelet stand-in
//! (`outfit_test_support::kubelet`): they hold no image but the pause one, a pull takes its
//! modelled time, and the stand-in records every pull and start.

use std::{collections::BTreeSet, time::Duration};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::ListParams};
use outfit_test_support::{
    kubelet::{ImageKubelet, ModelConfig, PodKind},
    wait::eventually,
};
use outfit_workspaces_core::workspace::{placement::normalize, pre_pull};

use super::{storage::launched_ready, support::*};
use crate::control_plane::ControlPlane;

/// The pool of this test's nodes (their label and taint).
const POOL: &str = "outfit.test/pre-pull";
/// The entry's image, as its manifest names it.
const IMAGE: &str = "outfit-test/pre-pull:1";

/// A workspace of [`IMAGE`] on the pool's nodes only.
const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: ahead
spec:
  nodeSelector: {outfit.test/pre-pull: "yes"}
  tolerations: [{key: outfit.test/pre-pull, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: outfit-test/pre-pull:1
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_entry_is_pulled_onto_two_nodes_ahead_and_its_launch_needs_no_pull() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-pre-pull";
    namespace(&client, ns).await;
    placeholder_class(&client).await;
    // Three nodes holding nothing but pause; the image takes ~2.5 s to pull alone.
    let mut model = ModelConfig::new("pre-pull-", POOL);
    model.nodes = 3;
    model.sizes.insert(IMAGE.to_owned(), 200_000_000);
    let kubelet = ImageKubelet::start(plane, model);
    kubelet.wait_ready(Duration::from_secs(90)).await;
    let manifests = Manifests::start().await;
    let ahead = manifests.put("ahead.yaml", MANIFEST);
    let extra = format!(
        "storageStrategy: ephemeral\ncatalogue: [{{name: ahead, url: '{ahead}'}}]\n\
         trustedProxyCidrs: [127.0.0.1/32]\n\
         prePull: {{enabled: true, nodesPerImage: 2, nodeSelector: {{{POOL}: 'yes'}},\n\
         \x20 tolerations: [{{key: {POOL}, operator: Exists, effect: NoSchedule}}]}}\n"
    );
    // The rights `outfit manifests --workspaces --pre-pull` gives (pods, and nodes read only),
    // and its guard: a pull pod passes both.
    let kubeconfig = least_privilege_with(plane, &client, "ws-pre-pull-system", ns, &["--pre-pull"]).await;
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let image = normalize(IMAGE);

    // Before any launch: the image pulled onto two of the three nodes, by pull pods.
    let holders = eventually(
        "the image pulled ahead onto two nodes",
        Duration::from_secs(90),
        || async {
            let records = kubelet.records();
            let pulled: BTreeSet<String> = records
                .pulls
                .iter()
                .filter(|p| p.image == image && p.finished.is_some())
                .map(|p| p.node.clone())
                .collect();
            (pulled.len() >= 2).then_some(pulled)
        },
    )
    .await;
    assert_eq!(holders.len(), 2, "nodesPerImage: 2, not every node: {holders:?}");
    let records = kubelet.records();
    for pull in records.pulls.iter().filter(|p| p.image == image) {
        assert_eq!(pull.started_for, PodKind::PullPod, "{pull:?}");
        assert!(pull.ahead(), "no workspace waited for it: {pull:?}");
    }
    let pull_pods: Vec<&str> = records
        .starts
        .iter()
        .filter(|s| s.kind == PodKind::PullPod)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(pull_pods.len(), 2, "one pull pod per node: {pull_pods:?}");
    assert!(pull_pods.iter().all(|name| name.starts_with("outfit-pull-")));

    // The pull pods are removed once done; the nodes list the image as a kubelet does.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!("{}=true", pre_pull::LABEL);
    eventually("the pull pods removed", Duration::from_secs(60), || async {
        pods.list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    for name in kubelet.node_names() {
        let node = nodes.get(&name).await.unwrap();
        let listed = node
            .status
            .and_then(|s| s.images)
            .unwrap_or_default()
            .iter()
            .any(|i| i.names.iter().flatten().any(|n| *n == image));
        assert_eq!(listed, holders.contains(&name), "{name}");
    }

    // A launch lands on a holder (placement by image) and starts without a pull.
    let olga = Caller::Proxy("olga", "staff");
    let name = launched_ready(&backend, olga, "ahead").await;
    let pod = pods.get(&name).await.unwrap();
    let node = pod.spec.unwrap().node_name.unwrap();
    assert!(holders.contains(&node), "{node} not in {holders:?}");
    let start = eventually("the stand-in saw the start", Duration::from_secs(30), || async {
        kubelet.records().start_of(ns, &name).cloned()
    })
    .await;
    assert!(!start.waited_for_pull, "{start:?}");
    // Still no third pull: one launch within the window asks for no more than the floor.
    assert_eq!(
        kubelet
            .records()
            .pulls
            .iter()
            .filter(|p| p.image == image)
            .count(),
        2
    );
    backend.assert_running();
}
