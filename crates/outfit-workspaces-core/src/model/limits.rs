//! The per-user limits as configured: plain settings, read by [`config`](super::config) and
//! enforced by [`policy::limits`](crate::policy::limits).

use std::collections::BTreeMap;

/// What each user may have at once; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `maxWorkspacesPerUser`: workspace pods.
    pub max_workspaces: Option<usize>,
    /// `maxCpuPerUser`: CPU requested by all of them, in millicores.
    pub max_cpu_millis: Option<u64>,
    /// `maxMemoryPerUser`: memory requested by all of them, in bytes.
    pub max_memory_bytes: Option<u64>,
    /// `maxResourcesPerUser`: any other resource requested by all of them (GPUs, hugepages), by
    /// name, in whole units (bytes for sizes).
    pub max_resources: BTreeMap<String, u64>,
    /// `maxStoppedWorkspacesPerUser`: stopped workspaces (each keeps its record and storage).
    pub max_stopped: Option<usize>,
}
