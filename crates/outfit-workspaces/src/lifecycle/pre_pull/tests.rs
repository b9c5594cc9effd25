//! The pulls ahead on a fake cluster: which pull pods a pass makes, and what it does once they
//! are done or failed.

use serde_json::json;

use super::*;
use crate::io::fake::{FakeCluster, on_fake};

const IMAGE: &str = "docker.io/outfit-test/notebook:1";

fn enabled(extra: &[(&str, &str)]) -> (Arc<Config>, FakeCluster) {
    let mut env = vec![(
        "BACKEND_PREPULL",
        r#"{"enabled": true, "pullsPerNode": 1, "nodesPerImage": 2}"#,
    )];
    env.extend_from_slice(extra);
    let (config, fake, _) = on_fake(&env);
    (config, fake)
}

fn demand(launches: usize) -> Demand {
    Demand::from([(
        IMAGE.to_owned(),
        (
            launches,
            Source {
                reference: "outfit-test/notebook:1".to_owned(),
                secrets: Vec::new(),
            },
        ),
    )])
}

fn nodes(names: &[&str]) -> NodeImages {
    let nodes = NodeImages::default();
    for name in names {
        nodes.set(name, &[]);
    }
    nodes
}

fn pull_pods(fake: &FakeCluster) -> Vec<Pod> {
    fake.with(|s| {
        s.pods
            .values()
            .filter(|p| p.labels().contains_key(pre_pull::LABEL))
            .cloned()
            .collect()
    })
}

fn set_status(fake: &FakeCluster, name: &str, status: serde_json::Value) {
    fake.with(|s| {
        let pod = s.pods.get_mut(name).unwrap();
        pod.status = Some(serde_json::from_value(status).unwrap());
    });
}

#[tokio::test]
async fn a_pass_pulls_onto_the_nodes_short_of_the_image_and_clears_what_is_done() {
    let (config, fake) = enabled(&[]);
    let metrics = Metrics::default();
    let mut puller = Puller::default();
    let nodes = nodes(&["a", "b", "c", "d"]);
    nodes.set_size(IMAGE, 700_000_000);
    let starting = BTreeSet::from(["c".to_owned()]);
    let under_way = puller
        .pass(&fake, &config, &demand(0), &nodes, &starting, &metrics)
        .await;
    // Two nodes for a new image; never the one where a workspace starts.
    assert_eq!(under_way, 2);
    let pods = pull_pods(&fake);
    let mut on: Vec<String> = pods.iter().map(|p| pre_pull::pull_of(p).unwrap().node).collect();
    on.sort();
    assert_eq!(on.len(), 2);
    assert!(!on.contains(&"c".to_owned()), "{on:?}");
    // Again: nothing new while they run.
    let calls = fake.calls().len();
    puller
        .pass(&fake, &config, &demand(0), &nodes, &starting, &metrics)
        .await;
    assert_eq!(pull_pods(&fake).len(), 2);
    assert!(!fake.calls()[calls..].iter().any(|c| c.starts_with("create_pod")));

    // One ends; the other's node lists the image (as the kubelet does once pulled).
    set_status(&fake, &pods[0].name_any(), json!({"phase": "Succeeded"}));
    let listing = pre_pull::pull_of(&pods[1]).unwrap().node;
    nodes.set(&listing, &[IMAGE]);
    let under_way = puller
        .pass(&fake, &config, &demand(0), &nodes, &starting, &metrics)
        .await;
    assert_eq!(under_way, 0, "both on their nodes, the floor of two is met");
    assert!(pull_pods(&fake).is_empty(), "done pull pods are removed");
    let rendered = metrics.render();
    assert!(
        rendered.contains(r#"outfit_workspaces_pre_pulls_total{outcome="planned"} 2"#),
        "{rendered}"
    );
    assert!(
        rendered.contains(r#"outfit_workspaces_pre_pulls_total{outcome="done"} 2"#),
        "{rendered}"
    );
    assert!(
        rendered.contains("outfit_workspaces_pre_pull_bytes_total 1400000000"),
        "{rendered}"
    );
}

#[tokio::test]
async fn a_failed_pull_rests_and_another_node_takes_its_place() {
    let (config, fake) = enabled(&[]);
    let metrics = Metrics::default();
    let mut puller = Puller::default();
    let nodes = nodes(&["a", "b", "c"]);
    let none = BTreeSet::new();
    puller
        .pass(&fake, &config, &demand(0), &nodes, &none, &metrics)
        .await;
    let pods = pull_pods(&fake);
    let failed = pre_pull::pull_of(&pods[0]).unwrap();
    set_status(
        &fake,
        &pods[0].name_any(),
        json!({"phase": "Pending", "containerStatuses": [{
            "name": "pull", "image": IMAGE, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff"}}
        }]}),
    );
    puller
        .pass(&fake, &config, &demand(0), &nodes, &none, &metrics)
        .await;
    let now: Vec<Pull> = pull_pods(&fake)
        .iter()
        .map(|p| pre_pull::pull_of(p).unwrap())
        .collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&failed), "the failed node rests");
    assert!(
        metrics
            .render()
            .contains(r#"outfit_workspaces_pre_pulls_total{outcome="failed"} 1"#)
    );
}

#[tokio::test]
async fn the_launches_of_the_window_rank_the_entries() {
    let pod = |uid: &str, url: &str, created: &str| -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {
                "name": uid, "uid": uid, "creationTimestamp": created,
                "annotations": {keys::ANNOTATION_MANIFEST: url}
            }}))
            .unwrap(),
        )
    };
    let mut launches = Launches::default();
    let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
    let pods = [
        pod("1", "https://m/a", "2026-11-29T11:30:00Z"),
        pod("2", "https://m/a", "2026-11-29T11:59:00Z"),
        pod("3", "https://m/b", "2026-11-29T10:00:00Z"),
    ];
    let counts = launches.count(&pods, Duration::from_secs(3600), now);
    assert_eq!(counts.get("https://m/a"), Some(&2));
    assert_eq!(counts.get("https://m/b"), None, "older than the window");
    // Gone from the cache, still counted through the window.
    let counts = launches.count(&[], Duration::from_secs(3600), now);
    assert_eq!(counts.get("https://m/a"), Some(&2));
    let later: Timestamp = "2026-11-29T12:45:00Z".parse().unwrap();
    let counts = launches.count(&[], Duration::from_secs(3600), later);
    assert_eq!(counts.get("https://m/a"), Some(&1));
}

#[test]
fn nodes_with_a_workspace_starting_are_found() {
    let pod = |node: &str, annotations: serde_json::Value, ready: bool| -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": node, "annotations": annotations},
                "spec": {"nodeName": node, "containers": []},
                "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
            }))
            .unwrap(),
        )
    };
    let creating = json!({keys::ANNOTATION_CREATE_DEADLINE: "2026-01-01T00:00:00Z"});
    let started =
        json!({keys::ANNOTATION_CREATE_DEADLINE: "2026-01-01T00:00:00Z", keys::ANNOTATION_STARTED: "x"});
    let pods = [
        pod("n1", creating.clone(), false),
        pod("n2", creating, true),
        pod("n3", started, true),
    ];
    assert_eq!(starting_on(&pods), BTreeSet::from(["n1".to_owned()]));
}

#[tokio::test]
async fn with_pre_pull_off_the_pull_pods_left_are_removed() {
    let (config, fake) = enabled(&[]);
    let metrics = Metrics::default();
    let nodes = nodes(&["a", "b"]);
    Puller::default()
        .pass(&fake, &config, &demand(0), &nodes, &BTreeSet::new(), &metrics)
        .await;
    assert_eq!(pull_pods(&fake).len(), 2);
    clear(&fake).await;
    assert!(pull_pods(&fake).is_empty());
}

/// Issue 46: a node that pulled an image is not asked again within `prePull.window`, though its
/// kubelet never lists it (a node lists at most 50 images): before, the pull counted as held for
/// 120 s, and the same pull came back every 120 s, forever.
#[tokio::test(start_paused = true)]
async fn a_done_pull_is_not_asked_again_within_the_window_listed_or_not() {
    let (config, fake) = enabled(&[]);
    let metrics = Metrics::default();
    let mut puller = Puller::default();
    let nodes = nodes(&["a", "b"]);
    let none = BTreeSet::new();
    puller
        .pass(&fake, &config, &demand(1), &nodes, &none, &metrics)
        .await;
    for pod in pull_pods(&fake) {
        set_status(&fake, &pod.name_any(), json!({"phase": "Succeeded"}));
    }
    puller
        .pass(&fake, &config, &demand(1), &nodes, &none, &metrics)
        .await;
    assert!(pull_pods(&fake).is_empty(), "done, and removed");
    let made = |fake: &FakeCluster| fake.count_calls("create_pod");
    let before = made(&fake);
    // Ten minutes of passes, neither node listing the image: no pull again.
    for _ in 0..20 {
        tokio::time::advance(Duration::from_secs(30)).await;
        puller
            .pass(&fake, &config, &demand(1), &nodes, &none, &metrics)
            .await;
    }
    assert_eq!(made(&fake), before, "{:?}", fake.calls());
    // Past the window (1 h by default), it is asked again.
    tokio::time::advance(Duration::from_secs(3600)).await;
    puller
        .pass(&fake, &config, &demand(1), &nodes, &none, &metrics)
        .await;
    assert_eq!(made(&fake), before + 2);
}
