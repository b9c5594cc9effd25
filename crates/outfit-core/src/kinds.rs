//! The kinds table: every family of policy kinds outfit reads, in the order the engine applies
//! them. A family is one module implementing [`Family`](crate::family::Family); adding one is adding its line here. The
//! policy set, the engine, `outfit explain`, the cluster watches and `outfit manifests` follow
//! from the table.

use crate::{family::Table, filer, gatekeeper, poddefault, podpolicy, vocab::PolicyKind};

/// The families, in application order: PodDefaults first (they read the request's raw object);
/// outfit's PodPolicies next (after the PodDefaults, whose labels they may select on); then the
/// filer sidecars (StatCan's injector); the Gatekeeper mutators last, so that their convergence
/// loop sees, and may adjust, the GPUs, tolerations and sidecars the others added (a sidecar's
/// image, say), as it would after those webhooks.
pub static FAMILIES: Table = &[
    &poddefault::FAMILY,
    &podpolicy::FAMILY,
    &filer::FAMILY,
    &gatekeeper::FAMILY,
];

/// Every kind of the table, in its order.
pub fn all() -> impl Iterator<Item = PolicyKind> {
    of(FAMILIES)
}

/// Every kind of `table`, in its order.
pub fn of(table: Table) -> impl Iterator<Item = PolicyKind> {
    table.iter().flat_map(|family| family.kinds().iter().copied())
}
