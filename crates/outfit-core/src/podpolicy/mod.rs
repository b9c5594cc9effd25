//! outfit's own `PodPolicy` and `Audience` (`outfit.dev/v1alpha1`): what to add to a pod (GPUs,
//! tolerations, a node selector, a runtime class, mounts) depending on *who the pod is for*.
//!
//! A PodPolicy matches on the namespace, the pod's labels and the requester: the identity the API
//! server sends in `request.userInfo` (users, groups, service accounts, with `*` globs and
//! exclusions), or, for a pod a provisioner creates on someone's behalf (Coder, a notebook
//! controller, outfit's workspace backend), the owner the pod records in a label or annotation,
//! trusted only when the request comes from one of the policy's provisioners. An `Audience` is a
//! named list of requesters that many PodPolicies can share. A requester who does not match is
//! refused silently: the policy does not apply, the pod is admitted as it came.
//!
//! `parse` reads and validates the documents; `identity` says who the requester is, `requesters`
//! whether a policy's requesters include them, and `matching` whether a policy applies to a pod;
//! `merge` adds a policy's values to a pod with the conflict rules; `family` is the step of the
//! engine and of explain.

mod family;
mod identity;
mod matching;
mod merge;
mod parse;
mod policy;
mod requesters;
#[cfg(test)]
mod tests;

pub use family::{FAMILY, PodPolicies, PodPolicySet};
pub use policy::{API_VERSION, AUDIENCE_KIND, Audience, GROUP, POD_POLICY_KIND, PodPolicy};
