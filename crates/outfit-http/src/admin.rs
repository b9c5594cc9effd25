//! The admin port, plain HTTP: `/livez`, `/readyz` and `/metrics`.
//!
//! Kept off the webhook's TLS port so that probes and scrapes need no certificate and never queue
//! behind admission traffic.

use std::{future::Future, sync::Arc};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Incoming, header};
use tokio::net::TcpListener;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    accept::{Handler, Timeouts, accept_each, serve_admitted, serve_http},
    limit::ConnectionLimit,
};

/// Renders the metrics in the OpenMetrics text format.
pub type Exposition = Arc<dyn Fn() -> String + Send + Sync>;

/// The admin endpoints' view of a server: whether it is ready, and its metrics.
#[derive(Clone)]
pub struct Admin {
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
    pub fn new(ready: Arc<tokio::sync::watch::Sender<bool>>, metrics: Exposition) -> Self {
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

/// Serves the admin endpoints on `listener` until `shutdown`, at most as many connections at once
/// as `limit` allows (the oldest idle one makes room).
pub async fn serve_limited(
    listener: TcpListener,
    admin: Admin,
    timeouts: Timeouts,
    limit: Arc<ConnectionLimit>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let stop = shutdown.clone();
    accept_each(listener, &stop, &tracker, move |tcp, peer| {
        let admin = admin.clone();
        let admitted = limit.admit(&shutdown);
        async move {
            let Some(admitted) = admitted else {
                tracing::debug!(%peer, "every admin connection busy at the cap; refused");
                return;
            };
            let _ = serve_admitted(tcp, peer, None, admin, timeouts, &admitted).await;
        }
    })
    .await;
}

/// Serves the admin endpoints on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    admin: Admin,
    timeouts: Timeouts,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let stop = shutdown.clone();
    accept_each(listener, &stop, &tracker, move |tcp, _| {
        let admin = admin.clone();
        let shutdown = shutdown.clone();
        async move {
            let _ = serve_http(tcp, false, admin, timeouts, shutdown).await;
        }
    })
    .await;
}
