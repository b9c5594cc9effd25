//! Issue 35, placement by image: a launch prefers the nodes that already hold its images, as the
//! backend reads them from `node.status.images` through its watch of the Nodes. Two kwok nodes
//! of this test's own (tainted, so no other test's pod lands there) share the test cluster; the
//! image moves from one to the other between launches, and each launch follows it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use outfit_test_support::wait::eventually;
use serde_json::json;

use super::{storage::launched_ready, support::*};
use crate::control_plane::ControlPlane;

/// This test's nodes: tainted and labelled so that only its workspaces go there.
const NODES: [&str; 2] = ["placement-a", "placement-b"];
/// The image its workspaces run, as the kubelet would list it once pulled.
const IMAGE: &str = "docker.io/outfit-test/placement:1";

/// A workspace that runs [`IMAGE`] on this test's nodes only.
const MANIFEST: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: placed
spec:
  nodeSelector: {outfit.test/placement: "yes"}
  tolerations: [{key: outfit.test/placement, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: outfit-test/placement:1
"#;

/// Makes this test's kwok nodes (once per cluster) and waits until the scheduler may use them.
async fn placement_nodes(client: &Client) {
    for (i, name) in NODES.iter().enumerate() {
        let cidr = format!("10.244.{}.0/24", 200 + i);
        pool_node(client, (name, "outfit.test/placement"), (&cidr, "1k")).await;
    }
}

/// Makes `holder` the only one of this test's nodes that lists [`IMAGE`] (as its kubelet would
/// after a pull), and waits until the API server shows it.
async fn image_on(client: &Client, holder: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in NODES {
        let images = if name == holder {
            json!([{"names": [IMAGE], "sizeBytes": 734_003_200}])
        } else {
            json!([])
        };
        nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"images": images}})),
            )
            .await
            .unwrap();
    }
    eventually("the images shown", Duration::from_secs(30), || async {
        let shown = nodes.get(holder).await.unwrap();
        let listed = shown.status.and_then(|s| s.images).unwrap_or_default();
        listed
            .iter()
            .any(|i| i.names.iter().flatten().any(|n| n == IMAGE))
            .then_some(())
    })
    .await;
    // The backend's watch of the Nodes sees it a moment later.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_lands_on_the_node_that_holds_its_image() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-placement";
    namespace(&client, ns).await;
    placement_nodes(&client).await;
    let manifests = Manifests::start().await;
    let placed = manifests.put("placed.yaml", MANIFEST);
    let extra = format!(
        "storageStrategy: ephemeral\ncatalogue: [{{name: placed, url: '{placed}'}}]\n\
         trustedProxyCidrs: [127.0.0.1/32]\n"
    );
    // The rights `outfit manifests --workspaces` gives: nodes are listed and watched, no more.
    let kubeconfig = least_privilege_with(plane, &client, "ws-placement-system", ns, &[]).await;
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let olga = Caller::Proxy("olga", "staff");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);

    // The image moves between the two nodes; each launch follows it (by chance alone, three
    // launches would land right one time in eight).
    for holder in ["placement-b", "placement-a", "placement-b"] {
        image_on(&client, holder).await;
        let name = launched_ready(&backend, olga, "placed").await;
        let pod = pods.get(&name).await.unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(holder), "{name}");
        let preferred = serde_json::to_value(&spec.affinity).unwrap()["nodeAffinity"]
            ["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchFields"][0]["values"]
            .clone();
        assert_eq!(preferred, json!([holder]));
        let (status, _) = backend
            .call(olga, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
            .await;
        assert_eq!(status, 202);
    }
    backend.assert_running();
}
