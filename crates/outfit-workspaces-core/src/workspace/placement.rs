//! Placement by image (issue 35): a workspace's pod prefers the nodes that already hold every
//! image it runs (`node.status.images`, as the kubelet reports them), so that a start does not
//! wait for a pull where a node that needs none is free. A preference, never a requirement: a
//! full node still lets the scheduler place the pod elsewhere. kube-scheduler's own
//! `ImageLocality` score leans the same way, but weakly (it is one score among many and scaled
//! down for images on few nodes); this is the strongest preference an affinity can state.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
};

/// The most nodes preferred: each is a term of its own (below), so past it the terms would grow
/// the pod by kilobytes for little (with that many holders, a pull is rarely needed anyway).
pub const MAX_PREFERRED_NODES: usize = 32;

/// The weight of each node's preference: the most a preferred term may have.
const WEIGHT: i32 = 100;

/// `image` as the kubelet lists it in `node.status.images`: with its registry (`docker.io` when
/// it names none, `library/` for Docker Hub's official images) and its tag (`latest` when it has
/// none), or its digest.
pub fn normalize(image: &str) -> String {
    let (name, pin) = match image.split_once('@') {
        Some((name, digest)) => (name, format!("@{digest}")),
        None => {
            let slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[slash..].rfind(':') {
                Some(colon) => (
                    &image[..slash + colon],
                    format!(":{}", &image[slash + colon + 1..]),
                ),
                None => (image, ":latest".to_owned()),
            }
        }
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let repository = if has_registry {
        name.to_owned()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{repository}{pin}")
}

/// The images `pod` runs (its containers' and init containers'), as [`normalize`] writes them.
pub fn images_of(pod: &Pod) -> BTreeSet<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeSet::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| c.image.as_deref())
        .map(normalize)
        .collect()
}

/// The nodes among `nodes` (name, the images it holds as [`normalize`] writes them) that hold
/// every one of `wanted`, in name order, at most [`MAX_PREFERRED_NODES`]. None when every node
/// holds them (a preference would say nothing) or `wanted` is empty.
pub fn holders<'a>(
    wanted: &BTreeSet<String>,
    nodes: impl IntoIterator<Item = (&'a str, &'a BTreeSet<String>)>,
) -> Vec<String> {
    if wanted.is_empty() {
        return Vec::new();
    }
    let mut all = 0;
    let mut holding: Vec<String> = nodes
        .into_iter()
        .inspect(|_| all += 1)
        .filter(|(_, images)| wanted.is_subset(images))
        .map(|(name, _)| name.to_owned())
        .collect();
    if holding.len() == all {
        return Vec::new();
    }
    holding.sort();
    holding.truncate(MAX_PREFERRED_NODES);
    holding
}

/// Adds to `pod` a preference for `nodes` (nothing when there are none), beside whatever
/// affinity its manifest states: a term per node, since the API server allows one value only
/// in a `matchFields` requirement (a node matches its own term, so each holder scores the same).
pub fn prefer_nodes(pod: &mut Pod, nodes: Vec<String>) {
    if nodes.is_empty() {
        return;
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    let terms = node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new);
    terms.extend(nodes.into_iter().map(|node| PreferredSchedulingTerm {
        weight: WEIGHT,
        preference: NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node]),
            }]),
        },
    }));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn images_are_named_as_the_kubelet_lists_them() {
        for (given, listed) in [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.25", "docker.io/library/nginx:1.25"),
            ("jupyter/base-notebook", "docker.io/jupyter/base-notebook:latest"),
            (
                "quay.io/jupyter/scipy-notebook:2024",
                "quay.io/jupyter/scipy-notebook:2024",
            ),
            ("localhost/ws:dev", "localhost/ws:dev"),
            ("registry:5000/team/ws", "registry:5000/team/ws:latest"),
            ("registry:5000/team/ws:v2", "registry:5000/team/ws:v2"),
            ("nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"),
            ("docker.io/library/nginx:1.25", "docker.io/library/nginx:1.25"),
        ] {
            assert_eq!(normalize(given), listed, "{given}");
        }
    }

    #[test]
    fn the_nodes_holding_every_image_are_preferred_beside_the_manifests_affinity() {
        let mut pod: Pod = serde_json::from_value(json!({
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{"name": "nb", "image": "jupyter/base-notebook:2024"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}
                ]}}
            }
        }))
        .unwrap();
        let wanted = images_of(&pod);
        let set = |names: &[&str]| names.iter().map(|n| normalize(n)).collect::<BTreeSet<_>>();
        let (both, one, none) = (
            set(&["busybox:latest", "jupyter/base-notebook:2024", "nginx"]),
            set(&["jupyter/base-notebook:2024"]),
            set(&[]),
        );
        let nodes = [("n3", &both), ("n1", &both), ("n2", &one), ("n4", &none)];
        let holding = holders(&wanted, nodes);
        assert_eq!(holding, ["n1", "n3"]);
        assert!(
            holders(&wanted, [("n1", &both), ("n3", &both)]).is_empty(),
            "all hold it"
        );
        assert!(holders(&BTreeSet::new(), nodes).is_empty());

        prefer_nodes(&mut pod, holding);
        let terms = serde_json::to_value(&pod).unwrap()["spec"]["affinity"]["nodeAffinity"]
            ["preferredDuringSchedulingIgnoredDuringExecution"]
            .clone();
        assert_eq!(terms[0]["weight"], 5, "the manifest's own stays");
        // A term per node: the API server refuses a `matchFields` requirement of two values.
        for (term, node) in [(&terms[1], "n1"), (&terms[2], "n3")] {
            assert_eq!(
                *term,
                json!({"weight": 100, "preference": {"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}
                ]}})
            );
        }
        assert_eq!(terms.as_array().unwrap().len(), 3);
        let before = pod.clone();
        prefer_nodes(&mut pod, Vec::new());
        assert_eq!(pod, before, "no holders, no preference");
    }
}
