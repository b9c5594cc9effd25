//! `placeholders` (issue 35): pods that hold capacity ahead of the launches that need it. Of a
//! PriorityClass below every workspace's, so the scheduler preempts one for a launch that finds
//! no room, and the leader puts it back, where there is room or, pending, where a cluster
//! autoscaler adds a node for it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

/// How many placeholders each cluster keeps, and their size and nodes.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Placeholders {
    /// How many (0: none).
    #[serde(default)]
    pub count: usize,
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
        outfit_core::quantity::cpu_millis(&self.cpu)
            .map_err(|e| format!("cpu: {:?} is not a CPU quantity ({e})", self.cpu))?;
        outfit_core::quantity::bytes(&self.memory)
            .map_err(|e| format!("memory: {:?} is not a memory quantity ({e})", self.memory))?;
        Ok(self)
    }
}
