//! Issue 35, capacity ahead: a placeholder pod holds room on a node; a launch that finds no other
//! room preempts it (the scheduler's doing, as the placeholder's PriorityClass is below every
//! workspace's), starts there, and the leader makes the placeholder again, pending until there is
//! room (where a cluster autoscaler would add a node). A kwok node of the test's own, small and
//! tainted, shares the test cluster.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams},
};
use outfit_test_support::wait::eventually;
use outfit_workspaces_core::workspace::placeholder;

use super::{storage::launched_ready, support::*};
use crate::control_plane::ControlPlane;

/// The test's node: room for 4 CPUs.
const NODE: &str = "placeholders-a";
/// Its label and taint.
const POOL: &str = "outfit.test/placeholders";

/// A workspace that needs 2 of the node's 4 CPUs, on the test's node only.
const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: roomy
spec:
  nodeSelector: {outfit.test/placeholders: "yes"}
  tolerations: [{key: outfit.test/placeholders, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: outfit-test/roomy:1
    resources: {requests: {cpu: "2", memory: 1Gi}}
"#;

/// Makes the test's node and the placeholders' PriorityClass (as the install does), once.
async fn pool(client: &Client) {
    placeholder_class(client).await;
    pool_node(client, (NODE, POOL), ("10.244.210.0/24", "4")).await;
}

/// The placeholders of `ns` not being deleted.
async fn placeholders(pods: &Api<Pod>) -> Vec<Pod> {
    let selector = format!("{}=true", placeholder::LABEL);
    pods.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The node `pod` was placed on, if any.
fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_preempts_a_placeholder_which_comes_back_pending() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-placeholders";
    namespace(&client, ns).await;
    pool(&client).await;
    let manifests = Manifests::start().await;
    let roomy = manifests.put("roomy.yaml", MANIFEST);
    let extra = format!(
        "storageStrategy: ephemeral\ncatalogue: [{{name: roomy, url: '{roomy}'}}]\n\
         trustedProxyCidrs: [127.0.0.1/32]\n\
         placeholders: {{count: 1, cpu: '3', memory: 1Gi, nodeSelector: {{{POOL}: 'yes'}},\n\
         \x20 tolerations: [{{key: {POOL}, operator: Exists, effect: NoSchedule}}]}}\n"
    );
    // The rights `outfit manifests --workspaces` gives, and its guard: a placeholder passes both.
    let kubeconfig = least_privilege_with(plane, &client, "ws-placeholders-system", ns, &[]).await;
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);

    // The leader keeps one, placed on the node: 3 of its 4 CPUs held.
    let held = eventually("a placeholder placed", Duration::from_secs(60), || async {
        let [one] = <[Pod; 1]>::try_from(placeholders(&pods).await).ok()?;
        (node_of(&one) == Some(NODE)).then_some(one)
    })
    .await;
    assert_eq!(held.spec.as_ref().unwrap().priority, Some(placeholder::PRIORITY));

    // A launch needing 2 finds no other room: the placeholder is preempted, the launch starts
    // there, and a new placeholder waits for room.
    let petra = Caller::Proxy("petra", "staff");
    let name = launched_ready(&backend, petra, "roomy").await;
    let workspace = pods.get(&name).await.unwrap();
    assert_eq!(node_of(&workspace), Some(NODE));
    let replaced = eventually("a new placeholder, pending", Duration::from_secs(60), || async {
        let [one] = <[Pod; 1]>::try_from(placeholders(&pods).await).ok()?;
        (one.uid() != held.uid() && node_of(&one).is_none()).then_some(one)
    })
    .await;
    assert!(
        pods.get_opt(&held.name_any())
            .await
            .unwrap()
            .is_none_or(|p| p.uid() != held.uid())
    );

    // The workspace goes: the placeholder takes the room again.
    let (status, _) = backend
        .call(petra, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
        .await;
    assert_eq!(status, 202);
    eventually(
        "the placeholder placed again",
        Duration::from_secs(60),
        || async {
            let pod = pods.get_opt(&replaced.name_any()).await.unwrap()?;
            (node_of(&pod) == Some(NODE)).then_some(())
        },
    )
    .await;
    backend.assert_running();
    drop(backend);
    // The test's node keeps nothing held for the tests after it.
    for pod in placeholders(&pods).await {
        pods.delete(&pod.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
}
