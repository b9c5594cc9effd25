//! `prePull` (issue 35): the catalogue's images pulled ahead onto the nodes where launches are
//! likely to run, by short-lived pods the leader pins to one node each
//! ([`crate::workspace::pre_pull`]).

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::Toleration;

use crate::model::duration;

/// How the catalogue's images are pulled ahead.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrePull {
    /// Whether the leader pulls ahead at all (off by default: pulls cost the nodes' disk and
    /// network, which a site decides to spend).
    #[serde(default)]
    pub enabled: bool,
    /// The most pulls one node runs at once (pulls share its disk and network: one at a time
    /// leaves most of both to the starts).
    #[serde(default = "one")]
    pub pulls_per_node: usize,
    /// The fewest nodes that hold each entry's images, a new entry's included, before anyone
    /// launches it.
    #[serde(default = "two")]
    pub nodes_per_image: usize,
    /// How far back launches count when ranking the entries (and sharing the nodes out).
    #[serde(default = "hour", deserialize_with = "duration::positive")]
    pub window: Duration,
    /// A pull not done by then is given up (and tried again later).
    #[serde(default = "ten_minutes", deserialize_with = "duration::positive")]
    pub timeout: Duration,
    /// The nodes pulled onto: the workspaces' pool's labels.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// The taints of the workspaces' pool that the pull pods tolerate (a node with a taint they
    /// do not tolerate is not pulled onto).
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

fn one() -> usize {
    1
}

fn two() -> usize {
    2
}

fn hour() -> Duration {
    Duration::from_secs(3600)
}

fn ten_minutes() -> Duration {
    Duration::from_secs(600)
}

impl Default for PrePull {
    fn default() -> Self {
        PrePull {
            enabled: false,
            pulls_per_node: one(),
            nodes_per_image: two(),
            window: hour(),
            timeout: ten_minutes(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }
}

impl PrePull {
    /// Refuses counts that would plan nothing while enabled, naming the field.
    pub fn check(self) -> Result<Self, String> {
        if self.pulls_per_node == 0 {
            return Err("pullsPerNode: must be at least 1".to_owned());
        }
        if self.nodes_per_image == 0 {
            return Err("nodesPerImage: must be at least 1".to_owned());
        }
        Ok(self)
    }
}
