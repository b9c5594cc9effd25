//! The image kubelet stand-in itself (`outfit_test_support::kubelet`), on two nodes of its own
//! in the shared node-mode cluster: a pod waits for its image's pull, then runs; the node then
//! lists the image and the next pod of it starts without a pull; two pulls at once on a node take
//! longer than one alone; a pull pod succeeds; a missing image backs off; a deletion completes.
//! Bounds are orderings and relations, with generous limits, never a wall-clock budget.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use outfit_test_support::{
    kubelet::{ImageKubelet, ModelConfig, PRE_PULL_LABEL, PodKind, TICK},
    wait::eventually,
};
use serde_json::json;

use crate::control_plane::{ControlPlane, create, resource};

/// The pool of this test's nodes.
const POOL: &str = "outfit.test/image-kubelet";
const NAMESPACE: &str = "image-kubelet";
const A: &str = "outfit-test/kubelet-a:1";
const B: &str = "outfit-test/kubelet-b:1";
const C: &str = "outfit-test/kubelet-c:1";
const MISSING: &str = "outfit-test/kubelet-missing:1";
/// How long anything may take on a loaded machine.
const LIMIT: Duration = Duration::from_secs(60);

/// A pod of `image` pinned to `node`; a pull pod (as the planner makes them) if `pull`.
fn pod(name: &str, node: &str, image: &str, pull: bool) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node, POOL: "yes"},
            "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": image}]
        }
    });
    if pull {
        pod["metadata"]["labels"] = json!({PRE_PULL_LABEL: "true"});
        pod["spec"]["restartPolicy"] = json!("Never");
        pod["spec"]["containers"] = json!([{"name": "pull", "image": image, "command": ["true"]}]);
    }
    serde_json::from_value(pod).unwrap()
}

/// The waiting reason of the pod's first container, or `running`, or `terminated:<exit code>`.
fn state(pod: &Pod) -> String {
    let status = serde_json::to_value(&pod.status).unwrap();
    let state = &status["containerStatuses"][0]["state"];
    if let Some(reason) = state["waiting"]["reason"].as_str() {
        reason.to_owned()
    } else if !state["running"].is_null() {
        "running".to_owned()
    } else {
        format!("terminated:{}", state["terminated"]["exitCode"])
    }
}

fn ready(pod: &Pod) -> bool {
    let status = serde_json::to_value(&pod.status).unwrap();
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Waits until the pod `name` is in `wanted` state (see [`state`]); returns it.
async fn reaches(pods: &Api<Pod>, name: &str, wanted: &str) -> Pod {
    eventually(&format!("{name} {wanted}"), LIMIT, || async {
        let pod = pods.get(name).await.ok()?;
        (state(&pod) == wanted).then_some(pod)
    })
    .await
}

/// The images `node` lists, each name with its size.
async fn listed(client: &Client, node: &str) -> Vec<(String, i64)> {
    let node = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    node.status
        .and_then(|s| s.images)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|i| {
            let size = i.size_bytes.unwrap_or_default();
            i.names.unwrap_or_default().into_iter().map(move |n| (n, size))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_kubelet_pulls_shares_bandwidth_and_lists_images() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    create(
        &client,
        None,
        &resource("", "v1", "Namespace", "namespaces"),
        namespace,
    )
    .await
    .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    eventually("the default ServiceAccount", LIMIT, || async {
        accounts.get_opt("default").await.ok().flatten().is_some()
    })
    .await;

    // 150 MB at 100 MB/s after 200 ms: 1.7 s alone, some 3.2 s each for two at once.
    let mut config = ModelConfig::new("image-kubelet-", POOL);
    config.latency = Duration::from_millis(200);
    config.default_size = 150_000_000;
    config.missing = vec![MISSING.to_owned()];
    let kubelet = ImageKubelet::start(plane, config.clone());
    kubelet.wait_ready(LIMIT).await;
    let [one, two] = <[String; 2]>::try_from(kubelet.node_names()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let make = |name: &str, node: &str, image: &str, pull: bool| {
        let (pods, pod) = (pods.clone(), pod(name, node, image, pull));
        async move { pods.create(&PostParams::default(), &pod).await.unwrap() }
    };
    // One pull alone on the first node, two at once on the second, a missing image.
    make("alone", &one, A, false).await;
    make("first", &two, B, false).await;
    make("second", &two, C, false).await;
    make("unpullable", &one, MISSING, false).await;

    let waiting = reaches(&pods, "alone", "ContainerCreating").await;
    assert!(!ready(&waiting));
    assert_eq!(waiting.status.unwrap().phase.as_deref(), Some("Pending"));
    let alone = reaches(&pods, "alone", "running").await;
    assert!(ready(&alone));
    let status = alone.status.unwrap();
    assert!(status.pod_ip.unwrap().starts_with("10.24"));
    assert!(status.host_ip.is_some() && status.start_time.is_some());
    for name in ["first", "second"] {
        assert!(ready(&reaches(&pods, name, "running").await), "{name}");
    }
    let records = kubelet.records();
    let start = records.start_of(NAMESPACE, "alone").unwrap();
    assert!(start.waited_for_pull);
    // Never faster than the model (the simulation runs in real time; a tick of slack).
    assert!(
        start.bound_to_ready().unwrap() + TICK >= config.pull_time(A),
        "{start:?}"
    );
    let a_on_one = "docker.io/outfit-test/kubelet-a:1";
    let pulls: Vec<_> = records.pulls_of(&one, a_on_one).collect();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let alone_pull = pulls[0].duration().unwrap();
    assert!(alone_pull + TICK >= config.pull_time(A));
    assert_eq!(pulls[0].started_for, PodKind::Workload);
    let b = records
        .pulls_of(&two, "docker.io/outfit-test/kubelet-b:1")
        .next()
        .unwrap();
    let c = records
        .pulls_of(&two, "docker.io/outfit-test/kubelet-c:1")
        .next()
        .unwrap();
    assert!(
        b.started < c.finished.unwrap() && c.started < b.finished.unwrap(),
        "the two pulls ran at once: {b:?} {c:?}"
    );
    let slower = b.duration().unwrap().max(c.duration().unwrap());
    assert!(
        slower > alone_pull + Duration::from_millis(500),
        "two pulls at once ({slower:?}) take longer than one ({alone_pull:?})"
    );

    // The node lists the image, and the next pod of it there starts without a pull.
    eventually("the image listed", LIMIT, || async {
        listed(&client, &one)
            .await
            .contains(&(a_on_one.to_owned(), 150_000_000))
    })
    .await;
    assert!(
        listed(&client, &one)
            .await
            .iter()
            .any(|(n, _)| n == "registry.k8s.io/pause:3.10")
    );
    make("again", &one, A, false).await;
    assert!(ready(&reaches(&pods, "again", "running").await));
    let records = kubelet.records();
    assert!(!records.start_of(NAMESPACE, "again").unwrap().waited_for_pull);
    assert_eq!(records.pulls_of(&one, a_on_one).count(), 1);

    // A pull pod ends Succeeded once its image is there; the node then lists it too.
    make("pull", &one, B, true).await;
    let pulled = reaches(&pods, "pull", "terminated:0").await;
    assert_eq!(pulled.status.unwrap().phase.as_deref(), Some("Succeeded"));
    let b_on_one = "docker.io/outfit-test/kubelet-b:1";
    eventually("the pulled image listed", LIMIT, || async {
        listed(&client, &one).await.iter().any(|(n, _)| n == b_on_one)
    })
    .await;
    let records = kubelet.records();
    let ahead = records.pulls_of(&one, b_on_one).next().unwrap();
    assert_eq!(ahead.started_for, PodKind::PullPod);
    // It ran while the unpullable workspace pod was (forever) starting on the same node.
    assert_eq!(records.overlapping_pulls(), 1);

    // The missing image: ErrImagePull, then ImagePullBackOff, never ready.
    let backing_off = reaches(&pods, "unpullable", "ImagePullBackOff").await;
    assert!(!ready(&backing_off));
    let start = kubelet.records();
    let start = start.start_of(NAMESPACE, "unpullable").unwrap();
    assert!(start.unpullable && start.ready.is_none());

    // A deletion completes (the kubelet's confirmation).
    pods.delete("again", &DeleteParams::default()).await.unwrap();
    eventually("again deleted", LIMIT, || async {
        matches!(pods.get_opt("again").await, Ok(None))
    })
    .await;
    let figures = kubelet.records().bound_to_ready().unwrap();
    assert_eq!(figures.count, 4, "alone, first, second, again: {figures:?}");
    kubelet.stop();
}
