//! The HTTP side of the backend, one connection's [`Api`]: a request is routed by its path to the
//! page ([`web`]: `/`, `/app.js`, `/app.css`), sign-in with the site's OpenID provider
//! ([`sign_in`]: `/auth/...`), the native API ([`native`]: `/api/v1/...`, callers authenticated
//! one by one) or deic-dk's API ([`compat`]: everything else, callers trusted by network and a
//! shared token). Each answers an [`Answer`]; this module encodes it and counts it.
//! This folder is [`Api`]'s: `connection.rs` holds the type, and `compat.rs`, `native.rs` and this
//! file each the `impl Api` of their part.

mod answer;
mod compat;
mod connection;
mod native;
mod proxy;
mod proxy_headers;
mod reading;
mod sign_in;
mod sse;
mod streams;
mod web;
mod workspace_page;

use std::future::Future;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::{
    Request, Response, StatusCode,
    body::Incoming,
    header::{self, HeaderValue},
};
use outfit_workspaces_core::workspace::route::{HostRoute, route_of};

use self::answer::{Answer, Body};
pub use self::{compat::Route, connection::Api, streams::StreamSlots};

/// An answer's body: whole, a stream of events, or a workspace's answer passed on.
pub type ResponseBody = Either<Either<Full<Bytes>, sse::EventStream>, Incoming>;

impl Api {
    /// Routes `request`; returns the endpoint's name (for metrics) and the answer.
    async fn answer(&self, request: Request<Incoming>) -> (&'static str, Answer) {
        let path = request.uri().path();
        if let Some(answer) = web::file(request.method(), path) {
            return ("page", answer);
        }
        if path == "/api/v1" || path.starts_with("/api/v1/") {
            return self.native(request).await;
        }
        if path.starts_with("/auth/") {
            return self.sign_in(request).await;
        }
        let (route, answer) = self.compat(request).await;
        (route.map_or("other", Route::name), answer)
    }
}

impl Api {
    /// The workspace's host (lower-case, without its port) and route `request` is for, when the
    /// backend serves workspaces' hosts (`proxyDomain`) and it names one.
    fn workspace_host(&self, request: &Request<Incoming>) -> Option<(String, HostRoute)> {
        let domain = self.backend.config().proxy_domain.clone()?;
        let host = request
            .uri()
            .authority()
            .map(|a| a.as_str())
            .or_else(|| request.headers().get(header::HOST)?.to_str().ok())?;
        let route = route_of(host, &domain)?;
        let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
        Some((name.trim_end_matches('.').to_ascii_lowercase(), route))
    }
}

impl outfit_http::accept::Handler for Api {
    type Body = ResponseBody;

    fn call(&self, request: Request<Incoming>) -> impl Future<Output = Response<ResponseBody>> + Send {
        let this = self.clone();
        async move {
            let started = std::time::Instant::now();
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let (endpoint, response) = match this.workspace_host(&request) {
                Some((host, route)) => this.proxy(request, host, route).await,
                None => {
                    let (endpoint, answer) = this.answer(request).await;
                    (endpoint, encode(answer))
                }
            };
            let status = response.status();
            this.metrics.request(endpoint, status, started.elapsed());
            tracing::debug!(%method, path, status = status.as_u16(), peer = %this.peer, "request");
            response
        }
    }
}

/// What a 429 (too many creates under way, or streams of the caller's) or a 503 (not ready yet,
/// or the port's streams full) tells the caller to wait before trying again.
const RETRY_AFTER_SECONDS: u64 = 1;

fn encode(answer: Answer) -> Response<ResponseBody> {
    let response = encode_whole(answer);
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Either::Left(body))
}

fn encode_whole(answer: Answer) -> Response<Either<Full<Bytes>, sse::EventStream>> {
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
    *response.headers_mut() = answer.headers;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if matches!(
        answer.status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    for (name, value) in web::SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if matches!(response.body(), Either::Right(_)) {
        // Proxies must pass events on as they come (nginx buffers otherwise).
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
    response
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::backend::RequestError;

    #[test]
    fn too_many_creates_is_a_429_with_retry_after_on_both_apis() {
        let error = RequestError::TooManyCreates(256);
        assert!(error.to_string().contains("maxCreatesInFlight"), "{error}");
        let native = native::request_failure(&error);
        let compat = compat::create_refused(&error);
        for answer in [native, compat] {
            let response = encode(answer);
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        }
        // Other answers tell no one to come back.
        let plain = encode(Answer::json(StatusCode::OK, json!({})));
        assert!(plain.headers().get(header::RETRY_AFTER).is_none());
    }
}
