//! outfit's Kubernetes side: the watches that read policies from the API server, the CRDs of the
//! kinds table, and the manifests that install outfit in a cluster. What a kind is comes from
//! `outfit_core::kinds`; nothing here names a policy kind.

pub mod cluster;
pub mod component;
pub mod crds;
pub mod manifests;
pub mod rules;
