//! outfit's Kubernetes side: the CRD types of the policy kinds outfit reads (generated into
//! structural schemas, so the API server validates policies and `kubectl explain` documents them)
//! and the manifests that install outfit in a cluster.
//!
//! The engine never sees these types: policies reach it as raw JSON, exactly as stored, so a
//! field these types do not know is still read (and reported) by `outfit-core`.

pub mod cluster;
pub mod crds;
pub mod manifests;
pub mod podpolicy_crds;
pub mod rules;
