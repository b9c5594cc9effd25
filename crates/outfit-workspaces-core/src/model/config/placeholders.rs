//! `placeholders` (issue 35): pods that hold capacity ahead of the launches that need it. Of a
//! PriorityClass below every workspace's, so the scheduler preempts one for a launch that finds
//! no room, and the leader puts it back, where there is room or, pending, where a cluster
//! autoscaler adds a node for it.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::Toleration;

use crate::model::duration;

/// How many placeholders each cluster keeps, and their size and nodes.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Placeholders {
    /// How many each cluster keeps at least (0: none).
    #[serde(default)]
    pub count: usize,
    /// A cluster's own count instead of `count`, by cluster name.
    #[serde(default)]
    pub clusters: BTreeMap<String, usize>,
    /// And at least this share (0 to 1) of the most workspaces that ran at once on the cluster
    /// within `peakWindow` (rounded up): capacity ahead that follows the site's own peaks.
    #[serde(default)]
    pub share_of_peak: f64,
    /// How far back the peak is looked for.
    #[serde(default = "day", deserialize_with = "duration::positive")]
    pub peak_window: Duration,
    /// Each one's CPU request: the catalogue's typical workspace's.
    #[serde(default = "default_cpu")]
    pub cpu: String,
    /// Each one's memory request.
    #[serde(default = "default_memory")]
    pub memory: String,
    /// The nodes they go to: the workspaces' pool's labels.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// The taints of the workspaces' pool they tolerate.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

fn day() -> Duration {
    Duration::from_secs(24 * 3600)
}

fn default_cpu() -> String {
    "1".to_owned()
}

fn default_memory() -> String {
    "2Gi".to_owned()
}

impl Default for Placeholders {
    fn default() -> Self {
        Placeholders {
            count: 0,
            clusters: BTreeMap::new(),
            share_of_peak: 0.0,
            peak_window: day(),
            cpu: default_cpu(),
            memory: default_memory(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        }
    }
}

impl Placeholders {
    /// Refuses a size that is not a quantity, naming it.
    pub fn check(self) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&self.share_of_peak) {
            return Err(format!(
                "shareOfPeak: {} is not between 0 and 1",
                self.share_of_peak
            ));
        }
        // The peak is kept per minute through the window: a bound on its memory.
        if self.peak_window > Duration::from_secs(30 * 24 * 3600) {
            return Err("peakWindow: at most 720h (30 days)".to_owned());
        }
        outfit_core::quantity::cpu_millis(&self.cpu)
            .map_err(|e| format!("cpu: {:?} is not a CPU quantity ({e})", self.cpu))?;
        outfit_core::quantity::bytes(&self.memory)
            .map_err(|e| format!("memory: {:?} is not a memory quantity ({e})", self.memory))?;
        Ok(self)
    }

    /// Whether any cluster may keep placeholders.
    pub fn any(&self) -> bool {
        self.count > 0 || self.share_of_peak > 0.0 || self.clusters.values().any(|&n| n > 0)
    }

    /// How many the cluster `cluster` keeps, whose peak in the window was `peak` workspaces at
    /// once.
    pub fn wanted(&self, cluster: &str, peak: usize) -> usize {
        let base = self.clusters.get(cluster).copied().unwrap_or(self.count);
        let share = (self.share_of_peak * peak as f64).ceil() as usize;
        base.max(share)
    }
}
