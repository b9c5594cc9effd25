//! The images each node of a cluster holds (`node.status.images`, issue 35), kept current by a
//! watch of the Nodes, for placement by image ([`crate::workspace::placement`]). Only the names
//! are kept (as the placement writes them), not the Nodes: a thousand nodes' images take a few
//! hundred kilobytes. Best effort: without the right to watch Nodes (an install before this
//! version) or while the watch fails, it holds what it last saw, and a launch is placed as the
//! scheduler alone would place it.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    sync::{Arc, RwLock},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};

use crate::workspace::placement;

/// Each node's images, by node name.
type Holdings = BTreeMap<String, BTreeSet<String>>;

/// The images each node holds, as the watch last saw them.
#[derive(Clone, Default)]
pub struct NodeImages {
    nodes: Arc<RwLock<Holdings>>,
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

/// The images `node` holds, as the placement names them.
fn images_of(node: &Node) -> BTreeSet<String> {
    node.status
        .iter()
        .flat_map(|s| s.images.iter().flatten())
        .flat_map(|image| image.names.iter().flatten())
        .map(|name| placement::normalize(name))
        .collect()
}

impl NodeImages {
    /// The images of `client`'s cluster's nodes, and the task that keeps them current (run it
    /// until shutdown).
    pub fn watch(client: &Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let this = Self::default();
        let nodes = this.nodes.clone();
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
                            listing.insert(node.name_any(), images_of(&node));
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listing) = listing.take() {
                            *nodes.write().expect("node images") = listing;
                        }
                        warned = false;
                    }
                    Ok(watcher::Event::Apply(node)) => {
                        let images = images_of(&node);
                        nodes
                            .write()
                            .expect("node images")
                            .insert(node.name_any(), images);
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
        placement::holders(wanted, nodes.iter().map(|(name, images)| (name.as_str(), images)))
    }

    /// Whether any node holds every one of `wanted`.
    pub fn held_anywhere(&self, wanted: &BTreeSet<String>) -> bool {
        !wanted.is_empty()
            && self
                .nodes
                .read()
                .expect("node images")
                .values()
                .any(|images| wanted.is_subset(images))
    }

    /// Sets what node `name` holds (the unit tests' stand-in for the watch).
    #[cfg(test)]
    pub(crate) fn set(&self, name: &str, images: &[&str]) {
        let images = images.iter().map(|i| placement::normalize(i)).collect();
        self.nodes
            .write()
            .expect("node images")
            .insert(name.to_owned(), images);
    }
}
