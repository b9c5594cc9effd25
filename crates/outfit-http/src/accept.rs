//! The accept loop: one task per connection, a bounded TLS handshake, HTTP/1.1 (or h2 when ALPN
//! picks it) with a header read timeout, and a graceful drain on shutdown.
//!
//! The protocol is chosen from ALPN rather than by sniffing the first bytes (hyper-util's auto
//! builder), because that sniffing has no timeout of its own: a client that completes the
//! handshake and then sends nothing would hold its connection forever. hyper's HTTP/1
//! `header_read_timeout` runs whenever the connection waits for a request head, so it also closes
//! keep-alive connections left idle that long.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
#[cfg(doc)]
use http_body_util::Full;
use hyper::{
    Request, Response,
    body::Incoming,
    server::conn::{http1, http2},
    service::service_fn,
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::graceful::GracefulConnection,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::limit::{Admitted, ConnectionLimit, Slot};

/// Connection timeouts.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Time allowed for the TLS handshake.
    pub handshake: Duration,
    /// Time allowed for a request's headers, and for an idle keep-alive connection to send its
    /// next request.
    pub header_read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            handshake: Duration::from_secs(5),
            header_read: Duration::from_secs(30),
        }
    }
}

/// A request handler the accept loop can run: cloned once per connection.
pub trait Handler: Clone + Send + Sync + 'static {
    /// The answers' body: [`Full`] for a server that answers whole bodies (the webhook's hot
    /// path pays no boxing), a stream for one that also sends events.
    type Body: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;

    /// Answers one request.
    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// Accepts TLS connections on `listener` until `shutdown`, serving each on a task in `tracker`,
/// at most as many at once as `limit` allows (see [`ConnectionLimit`]). Connections are asked to
/// finish their in-flight request and close once `shutdown` fires.
pub async fn serve_tls<H: Handler>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handler: H,
    timeouts: Timeouts,
    limit: Option<Arc<ConnectionLimit>>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let stop = shutdown.clone();
    accept_each(listener, &stop, &tracker, move |tcp, peer| {
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let admitted = limit.as_ref().map(|limit| limit.admit(&shutdown));
        let shutdown = shutdown.clone();
        async move {
            let (shutdown, slot) = match &admitted {
                None => (shutdown, None),
                Some(Some(admitted)) => (admitted.slot().closing().clone(), Some(admitted.slot().clone())),
                Some(None) => {
                    tracing::debug!(%peer, "every connection busy at the cap; refused");
                    return;
                }
            };
            let served = serve_tls_in(tcp, peer, acceptor, handler, timeouts, shutdown, slot).await;
            if let Err(reason) = served {
                tracing::debug!(%peer, reason, "connection closed");
            }
        }
    })
    .await;
}

/// Accepts connections on `listener` until `shutdown`, serving each with `serve` on a task in
/// `tracker`. An accept error (EMFILE and the like) backs off briefly instead of spinning.
pub async fn accept_each<F, Fut>(
    listener: TcpListener,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
    mut serve: F,
) where
    F: FnMut(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let (tcp, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tracker.spawn(serve(tcp, peer));
    }
}

/// Serves one TLS connection from `peer`: a bounded handshake, then HTTP as ALPN chose, until it
/// closes or `shutdown` fires. For servers whose handler depends on the peer; others use
/// [`serve_tls`].
pub async fn serve_tls_connection<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    handler: H,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) -> Result<(), String> {
    serve_tls_in(tcp, peer, acceptor, handler, timeouts, shutdown, None).await
}

/// Serves one connection that `limit.admit` let in (see [`ConnectionLimit`]), over TLS when
/// `acceptor` is given, else plain HTTP/1.1: its requests mark it busy, and it closes when its
/// slot is asked to make room or on the shutdown the slot was admitted with. For servers whose
/// handler depends on the peer; others use [`serve_tls`].
pub async fn serve_admitted<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: Option<TlsAcceptor>,
    handler: H,
    timeouts: Timeouts,
    admitted: &Admitted,
) -> Result<(), String> {
    let shutdown = admitted.slot().closing().clone();
    let slot = Some(admitted.slot().clone());
    match acceptor {
        Some(acceptor) => serve_tls_in(tcp, peer, acceptor, handler, timeouts, shutdown, slot).await,
        None => serve_http_in(tcp, false, handler, timeouts, shutdown, slot).await,
    }
}

/// [`serve_tls_connection`], its requests counted on `slot` when the connection is capped.
async fn serve_tls_in<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    handler: H,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    slot: Option<Arc<Slot>>,
) -> Result<(), String> {
    let _ = tcp.set_nodelay(true);
    let tls = tokio::select! {
        () = shutdown.cancelled() => return Err("shutting down during the TLS handshake".to_owned()),
        handshake = tokio::time::timeout(timeouts.handshake, acceptor.accept(tcp)) => match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(error)) => return Err(format!("TLS handshake failed: {error}")),
            Err(_) => return Err(format!("TLS handshake not done within {:?}", timeouts.handshake)),
        },
    };
    tracing::trace!(%peer, "TLS connection established");
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    serve_http_in(tls, h2, handler, timeouts, shutdown, slot).await
}

/// Serves HTTP on an established connection (TLS or plain) until it closes or `shutdown` fires.
pub async fn serve_http<I, H>(
    io: I,
    h2: bool,
    handler: H,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) -> Result<(), String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    serve_http_in(io, h2, handler, timeouts, shutdown, None).await
}

async fn serve_http_in<I, H>(
    io: I,
    h2: bool,
    handler: H,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    slot: Option<Arc<Slot>>,
) -> Result<(), String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let service = service_fn(move |request| {
        let handler = handler.clone();
        // Busy from the request's head to its answer: such a connection is never evicted.
        let busy = slot.as_ref().map(Slot::busy);
        async move {
            let response = handler.call(request).await;
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    let io = TokioIo::new(io);
    if h2 {
        let connection = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(timeouts.header_read))
            .keep_alive_timeout(timeouts.header_read)
            .serve_connection(io, service);
        drive(connection, shutdown).await
    } else {
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeouts.header_read)
            .keep_alive(true)
            .serve_connection(io, service);
        drive(connection, shutdown).await
    }
}

async fn drive<C>(connection: C, shutdown: CancellationToken) -> Result<(), String>
where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            // Idle connections close at once; a request in flight is answered first.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    result.map_err(|e| e.to_string())
}
