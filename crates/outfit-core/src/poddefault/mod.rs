//! Kubeflow `PodDefault` (`kubeflow.org/v1alpha1`): parsing, validation and compilation.
//!
//! The merge itself, with Kubeflow's conflict rules, lives in `merge` (its patch operations in
//! `ops`). The field set is exactly Kubeflow's (`poddefault_types.go`); fields it does not have are
//! reported as warnings, because the API server would prune them from a stored PodDefault and the
//! author would never know.

mod family;
mod index;
mod merge;
mod ops;
mod parse;
mod policy;
#[cfg(test)]
mod tests;

pub use family::{FAMILY, PodDefaultSet, PodDefaults};
pub use merge::Conflict;
#[cfg(test)]
pub(crate) use parse::parse;
pub use policy::{
    ANNOTATION_PREFIX, API_VERSION, EXCLUDE_ANNOTATION, ISTIO_PROXY_CONTAINER, KIND, MIRROR_POD_ANNOTATION,
    POLICY_KIND, PodDefault,
};
