//! The API as served on one connection, [`Api`]: what every endpoint reads (the backend, the
//! metrics, the authenticator, the caller's address and the shutdown signal). At the bottom of
//! [`api`](super): deic-dk's API and the native API each add their endpoints to it as methods, and
//! the parent routes requests to them.

use std::{net::SocketAddr, sync::Arc};

use tokio_util::sync::CancellationToken;

use super::streams::StreamSlots;
use crate::{
    backend::Backend,
    io::{auth::Authenticator, metrics::Metrics, upstream::Upstreams},
};

/// The API as served on one connection: the backend, the authenticator and the caller's address.
#[derive(Clone)]
pub struct Api {
    pub(super) backend: Backend,
    pub(super) metrics: Arc<Metrics>,
    pub(super) auth: Authenticator,
    pub(super) peer: SocketAddr,
    pub(super) shutdown: CancellationToken,
    pub(super) streams: StreamSlots,
    pub(super) upstreams: Upstreams,
}

impl Api {
    /// The API for a connection from `peer`; progress streams end at `shutdown` and take a slot
    /// of their user's in `streams` (shared by every connection); the workspace proxy reaches
    /// pods through `upstreams` (shared too).
    pub fn new(
        backend: Backend,
        metrics: Arc<Metrics>,
        auth: Authenticator,
        peer: SocketAddr,
        shutdown: CancellationToken,
        streams: StreamSlots,
        upstreams: Upstreams,
    ) -> Self {
        Self {
            backend,
            metrics,
            auth,
            peer,
            shutdown,
            streams,
            upstreams,
        }
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}
