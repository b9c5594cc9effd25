//! outfit's policy engine.
//!
//! Policies (Kubeflow `PodDefault`, StatCan's filer sidecars, Gatekeeper mutators) are parsed and
//! validated once into an immutable, indexed [`PolicySet`]; [`PolicySet::apply`] then decides one
//! raw Kubernetes object (JSON text, a `serde_json::Value`, or a view read with the document around
//! it; never a typed round trip, so unknown and null fields survive) and returns the RFC 6902 patch
//! that mutates it, or a denial.
//!
//! This crate does no network I/O and knows nothing of tokio or a Kubernetes client: it is the
//! target of the benchmarks, the property tests and the fuzzers. The only I/O is [`source`], which
//! reads policy files from disk for the CLI and the server's directory mode.

pub mod decision;
mod diff;
pub mod document;
pub mod error;
pub mod explain;
pub mod family;
pub mod fieldpath;
pub mod filer;
pub mod gatekeeper;
pub mod kinds;
mod patch;
pub mod poddefault;
pub mod podpolicy;
mod policy_context;
pub mod policy_set;
pub mod quantity;
pub mod record;
pub mod selector;
pub mod semantic;
pub mod source;
pub mod view;
pub mod vocab;

pub use decision::{
    Admission, AppliedPolicy, Denial, DenialReason, Object, Outcome, PatchTooLarge, Request, UserInfo,
};
pub use document::Document;
pub use error::{DocumentError, LoadWarning, PolicyError, Problem};
pub use policy_set::{PolicySet, PolicySetBuilder};
pub use view::ObjectView;
pub use vocab::{Operation, Origin, PolicyKind, PolicyRef};
