//! The immutable, indexed set of compiled policies: one type, one file per concern.
//!
//! A [`PolicySet`] is built once per policy change (off the request path, `build`) and shared
//! read-only: applying it to an object (`apply`, the admission decision) parses nothing and looks
//! only at policies that can match; `explain` says, policy by policy, what `apply` decided. It
//! holds one part per family of the kinds table (`kinds`), in the table's order, and the namespace
//! labels matching needs (`set`).

mod apply;
mod build;
mod explain;
mod set;

pub use build::{Added, LoadReport, LoadSettings, PolicySetBuilder};
pub use set::PolicySet;
