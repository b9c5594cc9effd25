//! The HTTP side of the webhook: routing (`POST /mutate`, path only: the API server appends
//! `?timeout=10s`), body limits, status codes, metrics and the per-request log line.
//!
//! The engine runs inline: a decision takes microseconds and touches no I/O or lock (the policy
//! set is read through an `ArcSwap`), so a `spawn_blocking` hop would cost more than it saves.

use std::{borrow::Cow, future::Future, sync::Arc, task::Poll, time::Duration, time::Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::{Method, Request, Response, StatusCode, body::Body, header};
use outfit_core::PolicySet;

use crate::{
    admission::{self, Answer},
    metrics::{Metrics, RequestOutcome},
};

/// The path the webhook serves.
pub const MUTATE_PATH: &str = "/mutate";

/// A body from this size up is large: it is read only within [`Limits::large_bodies_bytes`].
/// A pod's review is a few kilobytes; below this, the hot path takes no permit.
pub const LARGE_BODY: u64 = 256 * 1024;

/// Limits on one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest accepted body; larger ones get 413.
    pub max_body_bytes: usize,
    /// The most bytes of large bodies (from [`LARGE_BODY`] up; one of unknown length counts as
    /// `max_body_bytes`) read and decided at once: a review takes some twelve times its body at
    /// its peak (RELIABILITY.md), so this bounds what many large reviews at once can take. A large
    /// body waits for room until `body_timeout`, then gets 503.
    pub large_bodies_bytes: usize,
    /// Time allowed to receive the body once the headers are in; slower clients get 408.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // The API server accepts request bodies of up to 3 MiB; an UPDATE review carries the
            // object twice, so leave room above that.
            max_body_bytes: 8 * 1024 * 1024,
            // One review at the body cap at a time (about 100 MiB at its peak, RELIABILITY.md), or
            // two of the largest objects the API server sends (3 MiB): inside the Deployment's
            // 256 Mi with what the allocator keeps.
            large_bodies_bytes: 8 * 1024 * 1024,
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// The webhook's request handler; cheap to clone (one per connection).
#[derive(Debug, Clone)]
pub struct Webhook {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    policies: Arc<ArcSwap<PolicySet>>,
    metrics: Arc<Metrics>,
    limits: Limits,
    /// Room for large bodies, in KiB.
    large_bodies: tokio::sync::Semaphore,
}

impl Webhook {
    /// A handler answering with whatever set `policies` holds at the time of each request.
    pub fn new(policies: Arc<ArcSwap<PolicySet>>, metrics: Arc<Metrics>, limits: Limits) -> Self {
        let room = limits.large_bodies_bytes.max(limits.max_body_bytes);
        Self {
            inner: Arc::new(Inner {
                policies,
                metrics,
                limits,
                // Never less than one body at the cap, or such a body could never be read.
                large_bodies: tokio::sync::Semaphore::new(kib(room as u64) as usize),
            }),
        }
    }

    /// Answers one HTTP request. Never fails: every problem is an HTTP status with a JSON body.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: Body<Data = Bytes>,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let started = Instant::now();
        self.inner.metrics.request_started();
        let (outcome, response) = self.route(request).await;
        self.inner.metrics.observe_request(outcome, started.elapsed());
        response
    }

    async fn route<B>(&self, request: Request<B>) -> (RequestOutcome, Response<Full<Bytes>>)
    where
        B: Body<Data = Bytes>,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        if request.uri().path() != MUTATE_PATH {
            let message = format!("no such path; the webhook serves POST {MUTATE_PATH}");
            return (RequestOutcome::NotFound, error(StatusCode::NOT_FOUND, &message));
        }
        if request.method() != Method::POST {
            let mut response = error(StatusCode::METHOD_NOT_ALLOWED, "the webhook accepts POST only");
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
            return (RequestOutcome::NotFound, response);
        }
        let limits = self.inner.limits;
        // The body's length as declared, or as the body knows it (hyper's, from the header).
        let length = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .or_else(|| request.body().size_hint().exact());
        if length.is_some_and(|length| length > limits.max_body_bytes as u64) {
            return too_large(limits.max_body_bytes);
        }
        // A large body is read only within the room for large bodies, held until it is answered.
        let _room = match length {
            Some(length) if length < LARGE_BODY => None,
            length => {
                let wanted = kib(length.unwrap_or(limits.max_body_bytes as u64));
                let room = self.inner.large_bodies.acquire_many(wanted);
                match tokio::time::timeout(limits.body_timeout, room).await {
                    Ok(Ok(permit)) => Some(permit),
                    _ => {
                        let message = format!(
                            "too many large reviews at once: no room within {:?} for this one's body",
                            limits.body_timeout
                        );
                        return (
                            RequestOutcome::Busy,
                            error(StatusCode::SERVICE_UNAVAILABLE, &message),
                        );
                    }
                }
            }
        };
        let body = Limited::new(request.into_body(), limits.max_body_bytes);
        let mut collect = std::pin::pin!(read_body(body));
        // The API server sends the body with the headers, so it is usually complete at the first
        // poll: only a body still on its way pays for a timer.
        let first = std::future::poll_fn(|cx| Poll::Ready(collect.as_mut().poll(cx))).await;
        let collected = match first {
            Poll::Ready(result) => Ok(result),
            Poll::Pending => tokio::time::timeout(limits.body_timeout, collect).await,
        };
        let body = match collected {
            Ok(Ok(body)) => body,
            Ok(Err(e)) if e.is::<LengthLimitError>() => return too_large(limits.max_body_bytes),
            Ok(Err(e)) => {
                let message = format!("reading the body: {e}");
                return (
                    RequestOutcome::BadRequest,
                    error(StatusCode::BAD_REQUEST, &message),
                );
            }
            Err(_) => {
                let message = format!("the body did not arrive within {:?}", limits.body_timeout);
                return (
                    RequestOutcome::Timeout,
                    error(StatusCode::REQUEST_TIMEOUT, &message),
                );
            }
        };

        let policies = self.inner.policies.load();
        match admission::review(&body, &policies) {
            Ok(answer) => {
                log(&answer);
                if answer.patch_too_large {
                    self.inner.metrics.patch_too_large();
                }
                let outcome = answer.outcome;
                (outcome, json(StatusCode::OK, answer.body))
            }
            Err(invalid) => {
                tracing::warn!(error = %invalid, "rejected a request that is not an AdmissionReview");
                let message = invalid.to_string();
                (
                    RequestOutcome::BadRequest,
                    error(StatusCode::BAD_REQUEST, &message),
                )
            }
        }
    }
}

/// The whole body. The API server's body usually arrives as one frame with the headers: that
/// frame is the body, with no buffer list to build (as `BodyExt::collect` does) or copy. Public so
/// that the load generator's ceiling server reads bodies exactly as cheaply.
pub async fn read_body<B>(body: B) -> Result<Bytes, B::Error>
where
    B: Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut whole: Option<Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers: not part of the body
        };
        match whole.take() {
            None if more.is_empty() => whole = Some(data),
            None => more.extend_from_slice(&data),
            Some(first) => {
                more.reserve(first.len() + data.len());
                more.extend_from_slice(&first);
                more.extend_from_slice(&data);
            }
        }
    }
    Ok(whole.unwrap_or_else(|| Bytes::from(more)))
}

/// The log line of one answer, written after the decision. Untouched allows are the bulk of the
/// traffic: debug, so that info logs stay readable. The name of an object whose name is still to
/// be generated is read only when the line is written.
fn log(answer: &Answer<'_>) {
    macro_rules! event {
        ($level:expr) => {
            tracing::event!(
                $level,
                uid = %answer.uid,
                namespace = %answer.namespace,
                name = %answer.generate_name.get().unwrap_or(Cow::Borrowed(&answer.name)),
                kind = %answer.kind,
                operation = %answer.operation,
                dry_run = answer.dry_run,
                outcome = answer.outcome.as_str(),
                policies = %answer.policies,
                message = answer.message.as_deref().unwrap_or(""),
                "admission"
            )
        };
    }
    match answer.outcome {
        RequestOutcome::Allowed => event!(tracing::Level::DEBUG),
        _ => event!(tracing::Level::INFO),
    }
}

/// `bytes` in whole KiB, rounded up (the permits of [`Inner::large_bodies`]).
fn kib(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX).max(1)
}

fn too_large(limit: usize) -> (RequestOutcome, Response<Full<Bytes>>) {
    let message = format!("the body is larger than the limit of {limit} bytes");
    (
        RequestOutcome::TooLarge,
        error(StatusCode::PAYLOAD_TOO_LARGE, &message),
    )
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, admission::error_body(message))
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl outfit_http::accept::Handler for Webhook {
    type Body = Full<Bytes>;

    fn call(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> impl std::future::Future<Output = hyper::Response<http_body_util::Full<bytes::Bytes>>> + Send {
        self.handle(request)
    }
}
