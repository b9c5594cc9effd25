//! Pulling the catalogue's images ahead (issue 35, `prePull`), pure: which node pulls which image
//! next ([`plan`]), the short-lived pod that pulls it there ([`pod`]), and where a pull stands
//! ([`state`]).
//!
//! Not a DaemonSet of every image on every node (what the image pullers of zero-to-jupyterhub and
//! Che do): each image goes to as many nodes as its share of recent launches asks, at least
//! `nodesPerImage` (so a new entry is on a few nodes before its first launch), the most launched
//! first, at most `pullsPerNode` at once on a node and none where a workspace is starting (a pull
//! competes with the start for the node's disk and network). Spread by rendezvous hashing, so
//! each image keeps going to the same nodes and different images to different ones. Images no
//! entry uses any more are left to the kubelet's image garbage collection.

use std::{
    collections::{BTreeMap, BTreeSet},
    hash::Hasher,
};

use k8s_openapi::{
    api::core::v1::{
        Affinity, Container, LocalObjectReference, NodeAffinity, NodeSelector, NodeSelectorRequirement,
        NodeSelectorTerm, Pod, PodSpec, Taint, Toleration,
    },
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};

use crate::{
    model::config::PrePull,
    workspace::placeholder::{self, own_container},
};

/// The label every pull pod carries (`true`), and that finds them.
pub const LABEL: &str = "outfit.dev/pre-pull";
/// The image a pull pod pulls, as [`crate::workspace::placement::normalize`] writes it.
pub const ANNOTATION_IMAGE: &str = "outfit.dev/pre-pull-image";
/// The node it pulls on.
pub const ANNOTATION_NODE: &str = "outfit.dev/pre-pull-node";
/// Pull pods are named `outfit-pull-<hash of node and image>`.
const PREFIX: &str = "outfit-pull-";

/// One node as the planner sees it.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    /// Its name.
    pub name: &'a str,
    /// The images it holds, normalized.
    pub images: &'a BTreeSet<String>,
    /// Whether pulls may go there ([`eligible`]).
    pub eligible: bool,
    /// Whether a workspace is starting there (no pull goes there meanwhile).
    pub starting: bool,
}

/// An image the catalogue wants ahead, and how many launches in the window ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The image, normalized (as nodes list it).
    pub image: String,
    /// The launches of the entries that run it.
    pub launches: usize,
}

/// One pull: `image` (normalized) onto `node`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pull {
    /// The node.
    pub node: String,
    /// The image, normalized.
    pub image: String,
}

/// The pulls to start now, given what the catalogue wants (`wanted`), the nodes, the pulls
/// running (`running`) and the ones to leave alone for now (`resting`: failed lately).
pub fn plan<'a>(
    wanted: &'a [Wanted],
    nodes: &[NodeView<'a>],
    running: &'a [Pull],
    resting: &BTreeSet<Pull>,
    config: &PrePull,
) -> Vec<Pull> {
    let eligible: Vec<&NodeView<'a>> = nodes.iter().filter(|n| n.eligible).collect();
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for pull in running {
        *load.entry(pull.node.as_str()).or_default() += 1;
    }
    let total: usize = wanted.iter().map(|w| w.launches).sum();
    let mut order: Vec<&Wanted> = wanted.iter().collect();
    order.sort_by(|a, b| {
        (std::cmp::Reverse(a.launches), &a.image).cmp(&(std::cmp::Reverse(b.launches), &b.image))
    });
    let mut planned: Vec<Pull> = Vec::new();
    // What each node pulls already or is planned to: (node, image), looked up for every pair.
    let mut pulling: BTreeSet<(&str, &str)> = running
        .iter()
        .map(|p| (p.node.as_str(), p.image.as_str()))
        .collect();
    // Every image to `nodesPerImage` first (a new entry's before its first launch), the most
    // launched first; then each to its share.
    for floor_only in [true, false] {
        for wanted in &order {
            let share = target(wanted.launches, total, eligible.len(), config.nodes_per_image);
            let want = if floor_only {
                share.min(config.nodes_per_image)
            } else {
                share
            };
            let image = wanted.image.as_str();
            let covered = eligible
                .iter()
                .filter(|n| n.images.contains(image) || pulling.contains(&(n.name, image)))
                .count();
            let mut short = want.saturating_sub(covered);
            let mut candidates: Vec<&&NodeView<'a>> = eligible
                .iter()
                .filter(|n| !n.starting && !n.images.contains(image) && !pulling.contains(&(n.name, image)))
                .collect();
            candidates.sort_by_key(|n| std::cmp::Reverse(score(image, n.name)));
            for node in candidates {
                if short == 0 {
                    break;
                }
                let pull = Pull {
                    node: node.name.to_owned(),
                    image: image.to_owned(),
                };
                let busy = load.entry(node.name).or_default();
                if *busy >= config.pulls_per_node || resting.contains(&pull) {
                    continue;
                }
                *busy += 1;
                short -= 1;
                pulling.insert((node.name, image));
                planned.push(pull);
            }
        }
    }
    planned
}

/// How many of `eligible` nodes should hold an image that `launches` of all `total` launches
/// ran: its share of the nodes, at least `floor`, at most all.
pub fn target(launches: usize, total: usize, eligible: usize, floor: usize) -> usize {
    let share = if total == 0 {
        0
    } else {
        (launches * eligible).div_ceil(total)
    };
    share.max(floor).min(eligible)
}

/// Rendezvous hashing: the nodes an image goes to are those scoring highest for it.
fn score(image: &str, node: &str) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(image.as_bytes());
    hasher.write(&[0]);
    hasher.write(node.as_bytes());
    hasher.finish()
}

/// Whether a node may be pulled onto: Ready, schedulable, labelled as `config.nodeSelector`
/// asks, and every taint that keeps pods off tolerated by `config.tolerations`.
pub fn eligible(
    ready: bool,
    unschedulable: bool,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    config: &PrePull,
) -> bool {
    ready
        && !unschedulable
        && config
            .node_selector
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
        && taints
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .all(|taint| config.tolerations.iter().any(|t| tolerates(t, taint)))
}

/// Whether `toleration` tolerates `taint`, as the scheduler decides it.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

/// The pull pod's name for `pull`: the same on every replica, so a second create of it is a
/// conflict rather than a second pull.
pub fn name(pull: &Pull) -> String {
    format!("{PREFIX}{:016x}", score(&pull.image, &pull.node))
}

/// The pod that pulls `reference` (an image as the manifest names it; `pull.image` is its
/// normalized form) onto `pull.node`, with `secrets`: pinned to the node by a required affinity
/// (so the scheduler still counts it, and a workspace may preempt it), of the placeholders' low
/// PriorityClass, a container that does nothing (`true`) and ends, gone after `config.timeout`.
pub fn pod(pull: &Pull, reference: &str, secrets: &[LocalObjectReference], config: &PrePull) -> Pod {
    // A pull takes next to nothing once the image is there; the request keeps it schedulable on
    // a full node.
    let requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".to_owned())),
        ("memory".to_owned(), Quantity("16Mi".to_owned())),
    ]);
    let pinned = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![pull.node.clone()]),
        }]),
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name(pull)),
            labels: Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())])),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_IMAGE.to_owned(), pull.image.clone()),
                (ANNOTATION_NODE.to_owned(), pull.node.clone()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![pinned],
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            tolerations: (!config.tolerations.is_empty()).then(|| config.tolerations.clone()),
            priority_class_name: Some(placeholder::PRIORITY_CLASS.to_owned()),
            restart_policy: Some("Never".to_owned()),
            termination_grace_period_seconds: Some(0),
            active_deadline_seconds: Some(config.timeout.as_secs().max(1) as i64),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            image_pull_secrets: (!secrets.is_empty()).then(|| secrets.to_vec()),
            containers: vec![Container {
                image_pull_policy: Some("IfNotPresent".to_owned()),
                // The image is pulled before the container is made: whether `true` is in it or
                // not (then the start fails), the pull is done.
                command: Some(vec!["true".to_owned()]),
                ..own_container("pull", reference, requests)
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The pull a pull pod makes, from its annotations.
pub fn pull_of(pod: &Pod) -> Option<Pull> {
    let annotations = pod.metadata.annotations.as_ref()?;
    Some(Pull {
        node: annotations.get(ANNOTATION_NODE)?.clone(),
        image: annotations.get(ANNOTATION_IMAGE)?.clone(),
    })
}

/// Where a pull stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullState {
    /// Not done yet.
    Running,
    /// The image is on the node.
    Done,
    /// It will not be (the kubelet's reason).
    Failed(String),
}

/// Where the pull of `pod` stands: done once its container was made (running or ended, whatever
/// its command did), failed when the kubelet gave up pulling or the pod ended without a
/// container.
pub fn state(pod: &Pod) -> PullState {
    let Some(status) = pod.status.as_ref() else {
        return PullState::Running;
    };
    for container in status.container_statuses.iter().flatten() {
        let Some(state) = container.state.as_ref() else {
            continue;
        };
        if state.running.is_some() || state.terminated.is_some() {
            return PullState::Done;
        }
        let waiting = state.waiting.as_ref().and_then(|w| w.reason.as_deref());
        if let Some(
            reason @ ("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull"),
        ) = waiting
        {
            return PullState::Failed(reason.to_owned());
        }
    }
    match status.phase.as_deref() {
        Some("Succeeded") => PullState::Done,
        Some("Failed") => PullState::Failed(status.reason.clone().unwrap_or_else(|| "Failed".to_owned())),
        _ => PullState::Running,
    }
}

#[cfg(test)]
mod tests;
