//! The kinds table: every family of policy kinds outfit reads, in the order the engine applies
//! them. A family is one module implementing [`Family`]; adding one is adding its line here. The
//! policy set, the engine, `outfit explain`, the cluster watches and `outfit manifests` follow
//! from the table.

use crate::{family::Family, gatekeeper, poddefault, podpolicy, vocab::PolicyKind};

/// The families, in application order: PodDefaults first (they read the request's raw object),
/// then outfit's PodPolicies (after the PodDefaults, whose labels they may select on; before the
/// Gatekeeper mutators, whose convergence loop then sees the GPUs and tolerations they add), then
/// the Gatekeeper mutators on the result.
pub static FAMILIES: &[&dyn Family] = &[&poddefault::FAMILY, &podpolicy::FAMILY, &gatekeeper::FAMILY];

/// Every kind of the table, in its order.
pub fn all() -> impl Iterator<Item = PolicyKind> {
    FAMILIES.iter().flat_map(|family| family.kinds().iter().copied())
}
