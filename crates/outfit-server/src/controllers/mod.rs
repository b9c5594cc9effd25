//! What keeps outfit's installation in step without a person (`serve --from-cluster`):
//!
//! - the leader: every replica takes part in a Lease election ([`outfit_k8s::election`]); one
//!   writes, all serve;
//! - [`registration`]: the leader keeps the webhook configuration's `rules` and `caBundle` equal
//!   to the policies' kinds and the served CA, and undoes hand edits;
//! - [`certificates`]: the CA and serving certificate in a Secret, created on first start, served
//!   by every replica, renewed and rotated by the leader.

pub mod certificates;
mod changes;
pub mod registration;

pub use self::certificates::{CertificateError, SecretSettings};
pub use outfit_k8s::election::Election;

/// Which webhook configuration outfit keeps in step, and the election of the replica that writes.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The MutatingWebhookConfiguration's name (`outfit manifests` prints `outfit`).
    pub configuration: String,
    /// The Lease.
    pub election: Election,
}
