//! The accept loop: one task per connection, a bounded TLS handshake, HTTP/1.1 (or h2 when ALPN
//! picks it) with a header read timeout, and a graceful drain on shutdown. A [`Port`] says how
//! one listener is served; [`crate::shell`] runs the loop on a server's port and its admin port.
//!
//! The protocol is chosen from ALPN rather than by sniffing the first bytes (hyper-util's auto
//! builder), because that sniffing has no timeout of its own: a client that completes the
//! handshake and then sends nothing would hold its connection forever. hyper's HTTP/1
//! `header_read_timeout` runs whenever the connection waits for a request head, so it also closes
//! keep-alive connections left idle that long.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{
    Request, Response, StatusCode,
    body::Incoming,
    header,
    server::conn::{http1, http2},
    service::service_fn,
};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::TlsAcceptor;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::limit::{Answering, ConnectionLimit, Refusal, Slot};

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

/// A request handler the accept loop can run: one per connection, cloned per request.
pub trait Handler: Clone + Send + Sync + 'static {
    /// The answers' body: [`Full`] for a server that answers whole bodies (the webhook's hot
    /// path pays no boxing), a stream for one that also sends events.
    type Body: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;

    /// Answers one request.
    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// A listening port as the accept loop serves it: over TLS or plain HTTP/1.1, its connections
/// capped or not.
pub struct Port {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limit: Option<Arc<ConnectionLimit>>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("limit", &self.limit)
            .finish()
    }
}

impl Port {
    /// Plain HTTP/1.1 on `listener`, as many connections at once as come.
    pub fn new(listener: TcpListener) -> Self {
        Self {
            listener,
            tls: None,
            limit: None,
        }
    }

    /// Over TLS (HTTP/1.1, or h2 when ALPN picks it) when `acceptor` is given.
    #[must_use]
    pub fn tls(mut self, acceptor: Option<TlsAcceptor>) -> Self {
        self.tls = acceptor;
        self
    }

    /// At most as many connections at once as `limit` allows (see [`ConnectionLimit`]).
    #[must_use]
    pub fn limit(mut self, limit: Arc<ConnectionLimit>) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Accepts connections on `port` until `shutdown`, serving each on a task in `tracker` with the
/// handler `connection` makes for its peer; the token it is given fires when the connection is to
/// close (shutdown, or its place taken at the cap), which lets a handler end its streams.
/// Connections are asked to finish their in-flight request and close once `shutdown` fires.
pub(crate) async fn serve<H, C>(
    port: Port,
    connection: C,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) where
    H: Handler,
    C: Fn(SocketAddr, &CancellationToken) -> H + Send + 'static,
{
    let Port { listener, tls, limit } = port;
    let stop = shutdown.clone();
    accept_each(listener, &stop, &tracker, move |tcp, peer| {
        // Held by the connection's task: its place at the cap until it closes; or, refused, the
        // right to answer it 503 (none: closed unanswered).
        let place = match &limit {
            None => Ok(None),
            Some(limit) => limit.admit(&shutdown).map(Some).ok_or_else(|| limit.refusal()),
        };
        let admitted = place.map(|place| {
            let closing = place
                .as_ref()
                .map_or_else(|| shutdown.clone(), |place| place.slot().closing().clone());
            let handler = connection(peer, &closing);
            (place, handler, closing)
        });
        let (tls, shutdown) = (tls.clone(), shutdown.clone());
        async move {
            let served = match admitted {
                Ok((place, handler, closing)) => {
                    let slot = place.as_ref().map(|place| place.slot().clone());
                    serve_connection(tcp, peer, tls, handler, timeouts, closing, slot).await
                }
                Err(Some(refusal)) => answer_port_full(tcp, peer, tls, &refusal, timeouts, shutdown).await,
                Err(None) => Err(
                    "every connection busy at the cap, and as many refusals being answered: closed"
                        .to_owned(),
                ),
            };
            if let Err(reason) = served {
                tracing::debug!(%peer, reason, "connection closed");
            }
        }
    })
    .await;
}

/// How long a refused connection gets for its TLS handshake, and for its request head; it is
/// closed at twice this whatever it does.
const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// What a connection refused at the cap is answered, whatever it asks: 503 with `Retry-After`,
/// then closed. An error object as the workspace API's (`error`, `reason`), which shares this.
#[derive(Debug, Clone, Copy)]
struct PortFull {
    max: usize,
}

impl Handler for PortFull {
    type Body = Full<Bytes>;

    fn call(&self, _request: Request<Incoming>) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        let body = format!(
            r#"{{"error":"every connection of this port is busy ({} at once); try again later","reason":"PortFull"}}"#,
            self.max
        );
        let response = Response::builder()
            .status(StatusCode::SERVICE_UNAVAILABLE)
            .header(header::RETRY_AFTER, "1")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONNECTION, "close")
            .body(Full::new(Bytes::from(format!("{body}\n"))))
            .expect("a fixed response");
        std::future::ready(response)
    }
}

/// Answers a connection refused at the cap 503 ([`PortFull`]), within [`REFUSAL_TIME`] for its
/// handshake and request head and twice that in all.
async fn answer_port_full(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    refusal: &Refusal,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) -> Result<(), String> {
    tracing::debug!(%peer, "every connection busy at the cap; answered 503");
    let timeouts = Timeouts {
        handshake: timeouts.handshake.min(REFUSAL_TIME),
        header_read: REFUSAL_TIME,
    };
    let full = PortFull { max: refusal.max() };
    let answered = serve_connection(tcp, peer, tls, full, timeouts, shutdown, None);
    tokio::time::timeout(REFUSAL_TIME * 2, answered)
        .await
        .unwrap_or_else(|_| Err("a refused connection not answered in time".to_owned()))
}

/// Serves one connection from `peer`, over TLS when `tls` is set.
async fn serve_connection<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    handler: H,
    timeouts: Timeouts,
    closing: CancellationToken,
    slot: Option<Arc<Slot>>,
) -> Result<(), String> {
    match tls {
        Some(acceptor) => serve_tls(tcp, peer, acceptor, handler, timeouts, closing, slot).await,
        None => serve_http(tcp, false, handler, timeouts, closing, slot).await,
    }
}

/// Accepts connections on `listener` until `shutdown`, serving each with `serve` on a task in
/// `tracker`. An accept error (EMFILE and the like) backs off briefly instead of spinning.
async fn accept_each<F, Fut>(
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
/// closes or `shutdown` fires; its requests counted on `slot` when the connection is capped.
async fn serve_tls<H: Handler>(
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
    serve_http(tls, h2, handler, timeouts, shutdown, slot).await
}

/// Serves HTTP on an established connection (TLS or plain) until it closes or `shutdown` fires.
async fn serve_http<I, H>(
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
        // Busy from the request's head to the end of its answer's body (a stream of events
        // included): such a connection is never evicted.
        let busy = slot.as_ref().map(Slot::busy);
        async move {
            let response = handler.call(request).await;
            Ok::<_, Infallible>(response.map(|body| Answering::new(body, busy)))
        }
    });
    let io = TokioIo::new(io);
    if h2 {
        let connection = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(timeouts.header_read))
            .keep_alive_timeout(timeouts.header_read)
            .serve_connection(io, service);
        drive(connection, shutdown, |c| c.graceful_shutdown()).await
    } else {
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(timeouts.header_read)
            .keep_alive(true)
            .serve_connection(io, service)
            // A handler may switch the connection to another protocol (the workspace proxy's
            // WebSockets); one that does not is unaffected.
            .with_upgrades();
        drive(connection, shutdown, |c| c.graceful_shutdown()).await
    }
}

/// Drives `connection` until it ends; at `shutdown`, `close` asks it to close once its request
/// in flight is answered (both hyper's HTTP/1.1 and HTTP/2 connections have that), and it is
/// driven until it has.
async fn drive<C, E>(
    connection: C,
    shutdown: CancellationToken,
    close: impl FnOnce(std::pin::Pin<&mut C>),
) -> Result<(), String>
where
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = shutdown.cancelled() => {
            // Idle connections close at once; a request in flight is answered first.
            close(connection.as_mut());
            connection.await
        }
    };
    result.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    use hyper::body::{Body, Frame};
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
        time::timeout,
    };
    use tokio_util::sync::WaitForCancellationFutureOwned;

    use super::*;

    /// A stream of events, as a workspace's progress is: one, then nothing until its connection
    /// is asked to close.
    struct Events {
        first: Option<Bytes>,
        closing: Pin<Box<WaitForCancellationFutureOwned>>,
    }

    impl Body for Events {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if let Some(first) = self.first.take() {
                return Poll::Ready(Some(Ok(Frame::data(first))));
            }
            self.closing.as_mut().poll(cx).map(|()| None)
        }
    }

    #[derive(Clone)]
    struct Streamer {
        closing: CancellationToken,
    }

    impl Handler for Streamer {
        type Body = Events;

        async fn call(&self, _request: Request<Incoming>) -> Response<Events> {
            Response::new(Events {
                first: Some(Bytes::from_static(b"event: step\n\n")),
                closing: Box::pin(self.closing.clone().cancelled_owned()),
            })
        }
    }

    /// Issue 33: a connection whose answer is still streaming is busy, not idle, so at the cap
    /// a newcomer is refused (answered 503) rather than the stream closed to make room for it (1,100 idle
    /// connections once closed a signed-in user's progress stream that way).
    #[tokio::test]
    async fn a_connection_streaming_its_answer_is_busy_and_never_evicted() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let limit = ConnectionLimit::new(1);
        let shutdown = CancellationToken::new();
        let port = Port::new(listener).limit(limit.clone());
        let streamers = |_: SocketAddr, closing: &CancellationToken| Streamer {
            closing: closing.clone(),
        };
        let serving = tokio::spawn(serve(
            port,
            streamers,
            Timeouts::default(),
            shutdown.clone(),
            TaskTracker::new(),
        ));
        let bound = Duration::from_secs(10);

        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream
            .write_all(b"GET /progress HTTP/1.1\r\nhost: test\r\n\r\n")
            .await
            .expect("request");
        let mut head = vec![0; 1024];
        let read = timeout(bound, stream.read(&mut head))
            .await
            .expect("the first event")
            .expect("read");
        assert!(String::from_utf8_lossy(&head[..read]).contains("event: step"));

        // At the cap of 1, a newcomer: the stream is busy, so the newcomer is refused, answered
        // 503 with Retry-After and closed (issue 46: it was closed unanswered).
        let mut newcomer = TcpStream::connect(address).await.expect("connect");
        newcomer
            .write_all(b"GET /api/v1/me HTTP/1.1\r\nhost: test\r\n\r\n")
            .await
            .expect("request");
        let mut answer = Vec::new();
        timeout(bound, newcomer.read_to_end(&mut answer))
            .await
            .expect("answered and closed")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        assert!(answer.starts_with("http/1.1 503"), "{answer}");
        assert!(answer.contains("retry-after: 1\r\n"), "{answer}");
        assert!(answer.contains(r#""reason":"portfull""#), "{answer}");
        assert_eq!((limit.refused(), limit.evicted()), (1, 0));
        // One that sends nothing is closed within the refusal's time.
        let mut silent = TcpStream::connect(address).await.expect("connect");
        let mut byte = [0; 1];
        let closed = timeout(bound, silent.read(&mut byte))
            .await
            .expect("closed in time");
        assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");

        // The stream ends when its connection is asked to close, and the connection is idle
        // again: the next newcomer takes its place.
        shutdown.cancel();
        let rest = timeout(bound, async {
            let mut rest = Vec::new();
            stream.read_to_end(&mut rest).await.map(|_| rest)
        })
        .await
        .expect("the stream ends with the shutdown");
        assert!(rest.is_ok(), "{rest:?}");
        timeout(bound, serving)
            .await
            .expect("serve returns")
            .expect("joined");
    }
}
