//! The images each node of a cluster holds (`node.status.images`, issue 35), kept current by a
//! watch of the Nodes, for placement by image ([`workspace::placement`]) and the pulls ahead
//! ([`workspace::pre_pull`]). Only what those read is kept (image names as the placement writes
//! them, each image's size, and the node's readiness, labels and taints), not the Nodes: a thousand
//! nodes take a few hundred kilobytes. Best effort: without the right to watch Nodes (an install
//! before this version) or while the watch fails, it holds what it last saw, and a launch is placed
//! as the scheduler alone would place it.
//!
//! [`workspace::placement`]: outfit_workspaces_core::workspace::placement
//! [`workspace::pre_pull`]: outfit_workspaces_core::workspace::pre_pull

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    sync::{Arc, RwLock},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use outfit_workspaces_core::workspace::placement;

/// The most image sizes kept.
const MAX_SIZES: usize = 10_000;

/// What is kept of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// The images it holds, normalized.
    pub images: BTreeSet<String>,
    /// Whether its Ready condition is True.
    pub ready: bool,
    /// Whether it is cordoned.
    pub unschedulable: bool,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
}

/// Each node's facts, by node name.
pub type Holdings = BTreeMap<String, NodeFacts>;

/// The images each node holds, as the watch last saw them.
#[derive(Clone, Default)]
pub struct NodeImages {
    nodes: Arc<RwLock<Holdings>>,
    /// Each image's size as a node lists it (the largest seen), for the pulls' bytes.
    sizes: Arc<RwLock<BTreeMap<String, u64>>>,
}

impl std::fmt::Debug for NodeImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeImages").finish_non_exhaustive()
    }
}

/// Retries of a failed watch: slower than the workspace watches', since nothing waits on it.
fn backoff() -> watcher::ExponentialBackoff {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(60))
        .with_factor(2.0)
        .without_max_times()
        .into()
}

/// What is kept of `node`, and the size of each image it lists.
fn facts_of(node: &Node) -> (NodeFacts, Vec<(String, u64)>) {
    let mut images = BTreeSet::new();
    let mut sizes = Vec::new();
    for image in node.status.iter().flat_map(|s| s.images.iter().flatten()) {
        let size = image.size_bytes.and_then(|b| u64::try_from(b).ok());
        for name in image.names.iter().flatten() {
            let name = placement::normalize(name);
            if let Some(size) = size {
                sizes.push((name.clone(), size));
            }
            images.insert(name);
        }
    }
    let ready = node
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let spec = node.spec.as_ref();
    let facts = NodeFacts {
        images,
        ready,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
    };
    (facts, sizes)
}

impl NodeImages {
    /// The images of `client`'s cluster's nodes, and the task that keeps them current (run it
    /// until shutdown).
    pub fn watch(client: &Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let this = Self::default();
        let nodes = this.nodes.clone();
        let sizes = this.sizes.clone();
        let keep = move |node: &Node| {
            let (facts, listed) = facts_of(node);
            let mut sizes = sizes.write().expect("image sizes");
            // Bounded: images come and go on a long-lived cluster; the sizes are relearned.
            if sizes.len() > MAX_SIZES {
                sizes.clear();
            }
            for (image, size) in listed {
                let kept = sizes.entry(image).or_default();
                *kept = (*kept).max(size);
            }
            facts
        };
        let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).backoff(backoff());
        let task = async move {
            let mut stream = std::pin::pin!(stream);
            // A (re)list is gathered apart and then replaces the whole view, so that nodes gone
            // meanwhile leave it.
            let mut listing: Option<Holdings> = None;
            let mut warned = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Init) => listing = Some(Holdings::new()),
                    Ok(watcher::Event::InitApply(node)) => {
                        if let Some(listing) = listing.as_mut() {
                            listing.insert(node.name_any(), keep(&node));
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listing) = listing.take() {
                            *nodes.write().expect("node images") = listing;
                        }
                        warned = false;
                    }
                    Ok(watcher::Event::Apply(node)) => {
                        let facts = keep(&node);
                        nodes.write().expect("node images").insert(node.name_any(), facts);
                    }
                    Ok(watcher::Event::Delete(node)) => {
                        nodes.write().expect("node images").remove(&node.name_any());
                    }
                    Err(error) if !warned => {
                        tracing::warn!(%error, "cannot watch the nodes' images; launches are placed without them until it can (outfit manifests grants list and watch on nodes)");
                        warned = true;
                    }
                    Err(error) => tracing::debug!(%error, "the nodes' images are still out of reach"),
                }
            }
        };
        (this, task)
    }

    /// The nodes that hold every one of `wanted` (see [`placement::holders`]).
    pub fn holders(&self, wanted: &BTreeSet<String>) -> Vec<String> {
        let nodes = self.nodes.read().expect("node images");
        placement::holders(
            wanted,
            nodes.iter().map(|(name, facts)| (name.as_str(), &facts.images)),
        )
    }

    /// Whether any node holds every one of `wanted`.
    pub fn held_anywhere(&self, wanted: &BTreeSet<String>) -> bool {
        !wanted.is_empty()
            && self
                .nodes
                .read()
                .expect("node images")
                .values()
                .any(|facts| wanted.is_subset(&facts.images))
    }

    /// Every node's facts, as last seen (a copy: the caller takes its time).
    pub fn nodes(&self) -> Holdings {
        self.nodes.read().expect("node images").clone()
    }

    /// The size of `image` (normalized) as a node lists it.
    pub fn size_of(&self, image: &str) -> Option<u64> {
        self.sizes.read().expect("image sizes").get(image).copied()
    }

    /// Sets what node `name` holds (the unit tests' stand-in for the watch).
    #[cfg(test)]
    pub(crate) fn set(&self, name: &str, images: &[&str]) {
        let images = images.iter().map(|i| placement::normalize(i)).collect();
        let facts = NodeFacts {
            images,
            ready: true,
            ..NodeFacts::default()
        };
        self.nodes
            .write()
            .expect("node images")
            .insert(name.to_owned(), facts);
    }

    /// Sets the size a node lists for `image` (normalized; the unit tests' stand-in).
    #[cfg(test)]
    pub(crate) fn set_size(&self, image: &str, size: u64) {
        self.sizes
            .write()
            .expect("image sizes")
            .insert(image.to_owned(), size);
    }
}
