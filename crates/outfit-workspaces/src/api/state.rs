//! What every endpoint reads: the shared [`Api`] (the backend, the metrics, the authenticator,
//! the stream slots, the pool of connections to pods), the router's state; and one connection's
//! [`Connection`] (the caller's address and the signal that closes it), which the accept loop
//! gives each request as an extension. At the bottom of [`api`](super).

use std::{net::SocketAddr, sync::Arc};

use tokio_util::sync::CancellationToken;

use super::{rate::UserRates, streams::StreamSlots};
use crate::{
    backend::Backend,
    io::{auth::Authenticator, metrics::Metrics, upstream::Upstreams},
};

/// What every endpoint reads, shared by every connection: cloned per request, so one `Arc`.
#[derive(Clone)]
pub struct Api(Arc<Shared>);

/// What [`Api`] holds.
pub struct Shared {
    pub(super) backend: Backend,
    pub(super) metrics: Arc<Metrics>,
    pub(super) auth: Authenticator,
    pub(super) streams: StreamSlots,
    pub(super) rates: UserRates,
    pub(super) upstreams: Upstreams,
}

impl Api {
    /// The API of `backend`: progress streams take a slot of their user's in `streams`, native
    /// requests a token of their user's in `rates`; the workspace proxy reaches pods through
    /// `upstreams`.
    pub fn new(
        backend: Backend,
        metrics: Arc<Metrics>,
        auth: Authenticator,
        (streams, rates): (StreamSlots, UserRates),
        upstreams: Upstreams,
    ) -> Self {
        Self(Arc::new(Shared {
            backend,
            metrics,
            auth,
            streams,
            rates,
            upstreams,
        }))
    }
}

impl std::ops::Deref for Api {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").finish_non_exhaustive()
    }
}

/// One connection, as its requests carry it (an extension): who is at the other end, and the
/// signal that it is to close (shutdown, or room made at the connection cap), which ends its
/// progress streams.
#[derive(Debug, Clone)]
pub(super) struct Connection {
    pub(super) peer: SocketAddr,
    pub(super) closing: CancellationToken,
}
