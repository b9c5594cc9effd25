use serde_json::json;

use super::*;

fn config(pulls_per_node: usize, nodes_per_image: usize) -> PrePull {
    PrePull {
        enabled: true,
        pulls_per_node,
        nodes_per_image,
        ..PrePull::default()
    }
}

fn images(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn wanted(image: &str, launches: usize) -> Wanted {
    Wanted {
        image: image.to_owned(),
        launches,
    }
}

fn pull(node: &str, image: &str) -> Pull {
    Pull {
        node: node.to_owned(),
        image: image.to_owned(),
    }
}

/// Ten eligible nodes holding nothing, each name with its (empty) images.
fn empty_nodes(held: &BTreeSet<String>) -> Vec<NodeView<'_>> {
    const NAMES: [&str; 10] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"];
    NAMES
        .iter()
        .map(|name| NodeView {
            name,
            images: held,
            eligible: true,
            starting: false,
        })
        .collect()
}

#[test]
fn each_image_goes_to_its_share_of_the_nodes_and_at_least_the_floor() {
    assert_eq!(target(0, 0, 10, 2), 2);
    assert_eq!(target(6, 10, 10, 2), 6);
    assert_eq!(target(1, 100, 10, 2), 2);
    assert_eq!(target(1, 3, 10, 2), 4, "a third of ten nodes, rounded up");
    assert_eq!(target(5, 5, 3, 2), 3, "never more than the nodes");
    assert_eq!(target(0, 0, 1, 2), 1);
}

#[test]
fn the_plan_shares_nodes_by_launches_and_rolls_a_new_image_out_first() {
    let none = BTreeSet::new();
    let nodes = empty_nodes(&none);
    // Plenty of pulls per node: the shares alone decide.
    let want = [wanted("popular", 8), wanted("rare", 2), wanted("new", 0)];
    let planned = plan(&want, &nodes, &[], &BTreeSet::new(), &config(10, 2));
    let count = |image: &str| planned.iter().filter(|p| p.image == image).count();
    assert_eq!(count("popular"), 8);
    assert_eq!(count("rare"), 2);
    assert_eq!(
        count("new"),
        2,
        "a new entry's image reaches nodesPerImage before any launch"
    );
    // One pull per node at once: every image gets its two nodes first (the new one too), the
    // most launched first; the popular one then fills what is left.
    let planned = plan(&want, &nodes, &[], &BTreeSet::new(), &config(1, 2));
    assert_eq!(planned.len(), 10);
    let first: Vec<&str> = planned[..6].iter().map(|p| p.image.as_str()).collect();
    assert_eq!(first, ["popular", "popular", "rare", "rare", "new", "new"]);
    assert_eq!(planned.iter().filter(|p| p.image == "popular").count(), 6);
    let mut nodes_used: Vec<&str> = planned.iter().map(|p| p.node.as_str()).collect();
    nodes_used.sort();
    nodes_used.dedup();
    assert_eq!(nodes_used.len(), 10, "one pull per node");
}

#[test]
fn nodes_that_hold_run_start_or_are_not_eligible_get_no_pull() {
    let none = BTreeSet::new();
    let held = images(&["img"]);
    let mut nodes = empty_nodes(&none);
    nodes[0].images = &held;
    nodes[1].starting = true;
    nodes[2].eligible = false;
    let running = [pull("n3", "img"), pull("n4", "other")];
    let resting = BTreeSet::from([pull("n5", "img")]);
    let planned = plan(&[wanted("img", 1)], &nodes, &running, &resting, &config(1, 10));
    let targets: BTreeSet<&str> = planned.iter().map(|p| p.node.as_str()).collect();
    // Ten wanted, nine eligible; n0 holds it and n3 pulls it already: seven short, but n1 starts
    // a workspace, n4 is busy and n5 failed lately.
    assert_eq!(targets, BTreeSet::from(["n6", "n7", "n8", "n9"]));
    // Covered: nothing to do.
    let all = images(&["img"]);
    let full = empty_nodes(&all);
    assert!(plan(&[wanted("img", 5)], &full, &[], &BTreeSet::new(), &config(1, 2)).is_empty());
}

#[test]
fn an_image_keeps_going_to_the_same_nodes_and_images_spread() {
    let none = BTreeSet::new();
    let nodes = empty_nodes(&none);
    let first = plan(&[wanted("a", 0)], &nodes, &[], &BTreeSet::new(), &config(1, 2));
    let again = plan(&[wanted("a", 0)], &nodes, &[], &BTreeSet::new(), &config(1, 2));
    assert_eq!(first, again);
    let nodes_of = |image: &str| -> BTreeSet<String> {
        (0..20)
            .flat_map(|i| {
                let image = format!("{image}-{i}");
                plan(&[wanted(&image, 0)], &nodes, &[], &BTreeSet::new(), &config(1, 2))
            })
            .map(|p| p.node)
            .collect()
    };
    assert!(
        nodes_of("img").len() > 5,
        "twenty images do not all go to the same two nodes"
    );
}

#[test]
fn eligibility_follows_the_node_selector_and_the_tolerations() {
    let mut config = config(1, 2);
    config.node_selector = BTreeMap::from([("pool".to_owned(), "ws".to_owned())]);
    config.tolerations = serde_json::from_value(json!([
        {"key": "ws", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Equal", "value": "yes"}
    ]))
    .unwrap();
    let labels = BTreeMap::from([("pool".to_owned(), "ws".to_owned())]);
    let taint = |key: &str, value: Option<&str>, effect: &str| Taint {
        key: key.to_owned(),
        value: value.map(str::to_owned),
        effect: effect.to_owned(),
        time_added: None,
    };
    assert!(eligible(true, false, &labels, &[], &config));
    assert!(!eligible(false, false, &labels, &[], &config), "not Ready");
    assert!(!eligible(true, true, &labels, &[], &config), "cordoned");
    assert!(
        !eligible(true, false, &BTreeMap::new(), &[], &config),
        "another pool"
    );
    assert!(eligible(
        true,
        false,
        &labels,
        &[taint("ws", Some("x"), "NoSchedule")],
        &config
    ));
    assert!(!eligible(
        true,
        false,
        &labels,
        &[taint("ws", None, "NoExecute")],
        &config
    ));
    assert!(eligible(
        true,
        false,
        &labels,
        &[taint("gpu", Some("yes"), "NoExecute")],
        &config
    ));
    assert!(!eligible(
        true,
        false,
        &labels,
        &[taint("gpu", Some("no"), "NoSchedule")],
        &config
    ));
    assert!(
        eligible(
            true,
            false,
            &labels,
            &[taint("other", None, "PreferNoSchedule")],
            &config
        ),
        "a preference keeps no pod off"
    );
}

#[test]
fn a_pull_pod_is_pinned_low_and_ends_at_once() {
    let mut config = config(1, 2);
    config.tolerations = serde_json::from_value(json!([{"operator": "Exists"}])).unwrap();
    let p = pull("node-7", "docker.io/jupyter/scipy-notebook:2024");
    let secrets = [LocalObjectReference {
        name: "registry".to_owned(),
    }];
    let pod = pod(&p, "jupyter/scipy-notebook:2024", &secrets, &config);
    assert_eq!(pull_of(&pod), Some(p.clone()));
    let pod = serde_json::to_value(pod).unwrap();
    assert_eq!(pod["metadata"]["name"], name(&p));
    assert!(name(&p).starts_with("outfit-pull-") && name(&p).len() <= 63);
    assert_eq!(pod["metadata"]["labels"], json!({LABEL: "true"}));
    let spec = &pod["spec"];
    assert_eq!(
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"],
        json!([{"key": "metadata.name", "operator": "In", "values": ["node-7"]}])
    );
    assert_eq!(spec["priorityClassName"], placeholder::PRIORITY_CLASS);
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["activeDeadlineSeconds"], 600);
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(spec["tolerations"], json!([{"operator": "Exists"}]));
    let container = &spec["containers"][0];
    assert_eq!(container["image"], "jupyter/scipy-notebook:2024");
    assert_eq!(container["command"], json!(["true"]));
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["securityContext"]["runAsNonRoot"], true);
    assert_ne!(name(&p), name(&pull("node-8", &p.image)));
}

#[test]
fn a_pull_is_done_once_its_container_was_made_and_failed_when_the_kubelet_gives_up() {
    let with_status = |status: serde_json::Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    };
    let waiting = |reason: &str| {
        with_status(json!({"phase": "Pending", "containerStatuses": [{
            "name": "pull", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason}}
        }]}))
    };
    assert_eq!(state(&with_status(json!({}))), PullState::Running);
    assert_eq!(
        state(&with_status(json!({"phase": "Pending"}))),
        PullState::Running
    );
    assert_eq!(state(&waiting("ContainerCreating")), PullState::Running);
    assert_eq!(
        state(&waiting("ImagePullBackOff")),
        PullState::Failed("ImagePullBackOff".into())
    );
    assert_eq!(
        state(&waiting("ErrImagePull")),
        PullState::Failed("ErrImagePull".into())
    );
    assert_eq!(
        state(&with_status(json!({"phase": "Succeeded"}))),
        PullState::Done
    );
    let ended = with_status(json!({"phase": "Failed", "containerStatuses": [{
        "name": "pull", "image": "i", "imageID": "x", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 128, "reason": "StartError"}}
    }]}));
    assert_eq!(
        state(&ended),
        PullState::Done,
        "no `true` in the image: pulled all the same"
    );
    assert_eq!(
        state(&with_status(
            json!({"phase": "Failed", "reason": "DeadlineExceeded"})
        )),
        PullState::Failed("DeadlineExceeded".into())
    );
}
