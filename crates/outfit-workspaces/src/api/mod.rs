//! The HTTP side of the backend, one connection's [`Api`]: a request is routed by its path to the
//! page ([`web`]: `/`, `/app.js`, `/app.css`), the native API ([`native`]: `/api/v1/...`, callers
//! authenticated one by one) or deic-dk's API ([`compat`]: everything else, callers trusted by
//! network and a shared token). Each answers an [`Answer`]; this module encodes it and counts it.

mod compat;
mod native;
mod sse;
mod web;

use std::{
    future::Future,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::{
    Request, Response, StatusCode,
    body::Incoming,
    header::{self, HeaderValue},
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use self::compat::Route;
use crate::{auth::Authenticator, backend::Backend, metrics::Metrics};

/// How long a request waits for the backend's first read of the cluster.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The API as served on one connection: the backend, the authenticator and the caller's address.
#[derive(Clone)]
pub struct Api {
    backend: Backend,
    metrics: Arc<Metrics>,
    auth: Authenticator,
    peer: SocketAddr,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// An answer's body: whole, or a stream of events.
pub type ResponseBody = Either<Full<Bytes>, sse::EventStream>;

/// An answer before it is encoded.
struct Answer {
    status: StatusCode,
    body: Body,
}

enum Body {
    Json(Value),
    Text(String),
    Static {
        content_type: &'static str,
        bytes: &'static [u8],
    },
    Events(sse::EventStream),
    Empty,
}

impl Answer {
    fn json(status: StatusCode, body: Value) -> Self {
        Self {
            status,
            body: Body::Json(body),
        }
    }
}

impl Api {
    /// The API for a connection from `peer`; progress streams end at `shutdown`.
    pub fn new(
        backend: Backend,
        metrics: Arc<Metrics>,
        auth: Authenticator,
        peer: SocketAddr,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            backend,
            metrics,
            auth,
            peer,
            shutdown,
        }
    }

    /// Routes `request`; returns the endpoint's name (for metrics) and the answer.
    async fn answer(&self, request: Request<Incoming>) -> (&'static str, Answer) {
        let path = request.uri().path();
        if let Some(answer) = web::file(path) {
            return ("page", answer);
        }
        if path == "/api/v1" || path.starts_with("/api/v1/") {
            return self.native(request).await;
        }
        let (route, answer) = self.compat(request).await;
        (route.map_or("other", Route::name), answer)
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the request body is not the expected JSON: {e}"))
}

async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, (StatusCode, String)> {
    let mut limited = Limited::new(body, limit);
    let mut bytes = BytesMut::new();
    while let Some(frame) = limited.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes.extend_from_slice(data);
                }
            }
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                return Err((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than maxBodyBytes ({limit})"),
                ));
            }
            Err(error) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("reading the request body: {error}"),
                ));
            }
        }
    }
    Ok(bytes.freeze())
}

/// IPv4-mapped IPv6 addresses as IPv4, so `127.0.0.0/8` matches a dual-stack listener's peers.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Compares without stopping at the first difference, so the time taken says nothing of the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl outfit_http::accept::Handler for Api {
    type Body = ResponseBody;

    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<ResponseBody>> + Send {
        let this = self.clone();
        async move {
            let started = std::time::Instant::now();
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let (endpoint, answer) = this.answer(request).await;
            let status = answer.status;
            this.metrics.request(endpoint, status, started.elapsed());
            tracing::debug!(%method, path, status = status.as_u16(), peer = %this.peer, "request");
            encode(answer)
        }
    }
}

fn encode(answer: Answer) -> Response<ResponseBody> {
    let whole = |bytes: Bytes| Either::Left(Full::new(bytes));
    let (body, content_type) = match answer.body {
        Body::Json(value) => {
            let mut text = serde_json::to_vec(&value).expect("JSON values serialize");
            text.push(b'\n');
            (whole(text.into()), Some("application/json"))
        }
        Body::Text(text) => (whole(text.into()), Some("text/plain; charset=utf-8")),
        Body::Static { content_type, bytes } => (whole(Bytes::from_static(bytes)), Some(content_type)),
        Body::Events(stream) => (Either::Right(stream), Some("text/event-stream")),
        Body::Empty => (whole(Bytes::new()), None),
    };
    let mut response = Response::new(body);
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if matches!(response.body(), Either::Right(_)) {
        // Proxies must pass events on as they come (nginx buffers otherwise).
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    response
}
