//! What talks to the outside: the API server's calls ([`cluster`], and [`calls`]: the ones the
//! backend and the lifecycle make, as a trait their unit tests fake), the watches ([`cache`], [`snapshot_watch`];
//! [`own_writes`]: what this process wrote that they may not show yet; [`changed_pods`]: which
//! pods changed since the lifecycle last looked; [`node_images`]: the images each node holds),
//! manifests fetched over HTTP ([`fetch`]), what the native API offers ([`catalogue`]), who calls
//! ([`auth`]: by TokenReview, a proxy's headers or a session), sign-in with an OpenID provider
//! ([`oidc`]), its cookies ([`session`]) and sign-outs ([`sign_outs`]), the workspace proxy's connections to pods
//! ([`upstream`]), and the counters `/metrics` serves ([`metrics`]).

pub mod auth;
pub mod cache;
pub mod calls;
pub mod catalogue;
pub mod changed_pods;
pub mod cluster;
#[cfg(test)]
pub(crate) mod fake;
pub mod fetch;
pub mod index;
pub mod metrics;
pub mod node_images;
pub mod oidc;
pub mod own_writes;
pub mod session;
pub mod sign_outs;
pub mod snapshot_watch;
pub mod upstream;
