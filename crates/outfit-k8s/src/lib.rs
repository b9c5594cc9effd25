//! outfit's Kubernetes side: the watches that read policies from the API server, the CRDs of the
//! kinds table, the manifests that install outfit in a cluster, the pure halves of the controllers
//! that keep its registration in step (what the webhook configuration should say; who holds the
//! Lease), and the Lease loop itself (`election`), which `outfit serve` and `outfit workspaces`
//! share. What a kind is comes from `outfit_core::kinds`; nothing here names a policy kind.

pub mod api_error;
mod cert_manager;
pub mod cluster;
pub mod component;
pub mod crds;
pub mod election;
pub mod exemptions;
pub mod lease;
pub mod manifests;
mod names;
pub mod registration;
pub mod registration_guard;
pub mod risks;
pub mod rules;
