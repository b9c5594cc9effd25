//! Isolation by default: what keeps one user's workspace away from the cluster and from other
//! users' workspaces. The pod gets no Service environment and no ServiceAccount token unless
//! its manifest asks, and a NetworkPolicy lets in only the ingress controller, the backend and
//! (for ssh) the NodePort, and lets out DNS and the internet but not the internal ranges, save
//! the user's own silo.

mod network_policy;
pub(crate) mod settings;

pub use self::{
    network_policy::network_policy,
    settings::{NetworkIsolation, apply_pod_defaults},
};
