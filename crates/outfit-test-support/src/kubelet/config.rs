//! The image kubelet's model: its nodes, their pool and capacity, and how images are pulled
//! onto them.

use std::{collections::BTreeMap, time::Duration};

use outfit_workspaces_core::workspace::placement::normalize;
use serde_json::json;

/// The label of the pre-pull planner's pull pods: such a pod succeeds once its images are there.
pub const PRE_PULL_LABEL: &str = "outfit.dev/pre-pull";
/// The `type` label of the stand-in's nodes.
pub const NODE_TYPE: &str = "image-kubelet";
/// The pause image, which every node holds from the start unless told otherwise.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The model: the nodes, their pool, their capacity, and how images are pulled onto them.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Nodes are named `<prefix><i>`, `i` from 0.
    pub node_prefix: String,
    /// How many nodes [`ImageKubelet::start`](super::ImageKubelet::start) makes.
    pub nodes: u32,
    /// The pool's label and taint key: nodes are labelled `<key>=yes` and tainted
    /// `<key>=yes:NoSchedule` (besides `kubernetes.io/hostname` and `type=`[`NODE_TYPE`]).
    pub pool_key: String,
    /// Each node's CPU (a quantity).
    pub cpu: String,
    /// Each node's memory (a quantity).
    pub memory: String,
    /// Each node's pod count.
    pub pods: u32,
    /// Each node's download bandwidth, bytes/s, shared equally by the pulls downloading on it.
    pub bandwidth: u64,
    /// A pull's fixed latency before it downloads (the registry's round trips).
    pub latency: Duration,
    /// Image sizes in bytes, by image as a pod names it (`nginx`, `docker.io/library/nginx:latest`:
    /// the same).
    pub sizes: BTreeMap<String, u64>,
    /// The size of an image not in [`Self::sizes`].
    pub default_size: u64,
    /// The images every node holds from the start.
    pub preloaded: Vec<String>,
    /// Images no registry has.
    pub missing: Vec<String>,
}

impl ModelConfig {
    /// Two nodes of 32 CPUs, 128 GiB and 110 pods, 100 MB/s, 500 ms per pull, images of 500 MB,
    /// each holding [`PAUSE_IMAGE`].
    pub fn new(node_prefix: &str, pool_key: &str) -> Self {
        ModelConfig {
            node_prefix: node_prefix.to_owned(),
            nodes: 2,
            pool_key: pool_key.to_owned(),
            cpu: "32".to_owned(),
            memory: "128Gi".to_owned(),
            pods: 110,
            bandwidth: 100_000_000,
            latency: Duration::from_millis(500),
            sizes: BTreeMap::new(),
            default_size: 500_000_000,
            preloaded: vec![PAUSE_IMAGE.to_owned()],
            missing: Vec::new(),
        }
    }

    /// The modelled size of `image` (as a pod names it).
    pub fn size_of(&self, image: &str) -> u64 {
        let image = normalize(image);
        self.sizes
            .iter()
            .find_map(|(name, size)| (normalize(name) == image).then_some(*size))
            .unwrap_or(self.default_size)
    }

    /// How long a pull of `image` takes alone on a node.
    pub fn pull_time(&self, image: &str) -> Duration {
        self.latency + Duration::from_secs_f64(self.size_of(image) as f64 / self.bandwidth as f64)
    }

    /// The node selector and the toleration a pod needs to run on the stand-in's nodes, as
    /// JSON for a pod's spec (`nodeSelector`, `tolerations`).
    pub fn placement(&self) -> (serde_json::Value, serde_json::Value) {
        (
            json!({&self.pool_key: "yes"}),
            json!([{"key": self.pool_key, "operator": "Exists", "effect": "NoSchedule"}]),
        )
    }
}
