//! One workspace, pure: the pod a create makes ([`manifest`]), what the pod asks for once it runs
//! ([`pod_needs`]: ssh, an ingress port, tokens), its storage, Services and Ingress
//! ([`objects`]), its NetworkPolicy ([`network_policy`]), what it needs once ready ([`start`]),
//! what `get_pods` answers ([`info`]), where its start or delete stands ([`progress`]), and
//! where the workspace proxy sends a request for it ([`route`]), whom it lets in besides the
//! owner ([`sharing`]), and what the APIs' creates ask for ([`requests`]). Reads
//! the [`model`](crate::model) and the [`policy`](crate::policy); does no I/O.

pub mod home;
pub mod info;
pub mod manifest;
pub mod network_policy;
pub mod objects;
pub mod placeholder;
pub mod placement;
pub mod pod_needs;
pub mod pre_pull;
pub mod progress;
pub mod requests;
pub mod route;
pub mod sharing;
pub mod snapshot;
pub mod start;
