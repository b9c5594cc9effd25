//! The admin port, plain HTTP: `/livez`, `/readyz` and `/metrics`.
//!
//! Kept off the servers' own ports so that probes and scrapes need no certificate and never queue
//! behind admission or API traffic. [`crate::shell`] serves it, and keeps it up through the drain
//! so that probes see "not ready" rather than a refused connection.

use std::{future::Future, sync::Arc};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Incoming, header};

use crate::accept::Handler;

/// Renders the metrics in the OpenMetrics text format.
pub type Exposition = Arc<dyn Fn() -> String + Send + Sync>;

/// The admin endpoints' view of a server: whether it is ready, and its metrics.
#[derive(Clone)]
pub(crate) struct Admin {
    metrics: Exposition,
    ready: Arc<tokio::sync::watch::Sender<bool>>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("ready", &*self.ready.borrow())
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// `/readyz` follows `ready`; `/metrics` serves what `metrics` renders.
    pub(crate) fn new(ready: Arc<tokio::sync::watch::Sender<bool>>, metrics: Exposition) -> Self {
        Self { metrics, ready }
    }
}

impl Handler for Admin {
    type Body = Full<Bytes>;

    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        let response = self.answer(request.method(), request.uri().path());
        async move { response }
    }
}

impl Admin {
    fn answer(&self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".to_owned());
        }
        match path {
            "/livez" => text(StatusCode::OK, "ok\n".to_owned()),
            "/readyz" if *self.ready.borrow() => text(StatusCode::OK, "ready\n".to_owned()),
            "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_owned()),
            "/metrics" => {
                let mut response = text(StatusCode::OK, (self.metrics)());
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static(
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    ),
                );
                response
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: try /livez, /readyz or /metrics\n".to_owned(),
            ),
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
