//! How the backend's own answers are made: JSON (one line, a newline after it) and text, and
//! [`finish`], the headers every answer of the backend's own carries (a workspace's answer,
//! passed on by the proxy, keeps its own). At the bottom of [`api`](super).

use axum::{
    body::Body,
    http::{
        HeaderMap, StatusCode,
        header::{self, HeaderValue},
    },
    response::{IntoResponse, Response},
};
use http_body_util::Either;
use hyper::body::Incoming;
use serde::Serialize;

/// An answer's body: the backend's own, or a workspace's answer passed on.
pub type ResponseBody = Either<Body, Incoming>;

/// Sent with every answer: a strict Content-Security-Policy (the page's own script and style
/// only, no frames around it: a page of another site can't overlay it to steal clicks), the same
/// for older browsers, and no guessing of content types.
pub(super) const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

/// What a 429 (too many creates under way, or streams of the caller's) or a 503 (not ready yet,
/// or the port's streams full) tells the caller to wait before trying again, unless it says.
const RETRY_AFTER_SECONDS: u64 = 1;

/// `body` as JSON with `status`.
pub(super) fn json(status: StatusCode, body: &impl Serialize) -> Response {
    let mut text = serde_json::to_vec(body).expect("answers serialize");
    text.push(b'\n');
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        text,
    )
        .into_response()
}

/// `message` as plain text with `status`.
pub(super) fn text(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        message.into(),
    )
        .into_response()
}

/// A `303 See Other` to `location`, setting `cookies`; `None` when `location` can't be a header
/// (each caller says why in its own words).
pub(super) fn see_other(location: &str, cookies: impl IntoIterator<Item = HeaderValue>) -> Option<Response> {
    let location = HeaderValue::try_from(location).ok()?;
    let mut response = empty(StatusCode::SEE_OTHER);
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, location);
    for cookie in cookies {
        headers.append(header::SET_COOKIE, cookie);
    }
    Some(response)
}

/// An empty answer.
pub(super) fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// The headers every answer of the backend's own carries: the page's security headers,
/// `Retry-After` on a 429 or 503 that does not say when, and for a stream of events what keeps
/// proxies from holding it back.
pub(super) fn finish(status: StatusCode, headers: &mut HeaderMap) {
    if matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) && !headers.contains_key(header::RETRY_AFTER)
    {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    let events = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if events {
        // Proxies must pass events on as they come (nginx buffers otherwise).
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    }
}

/// The backend's own `response`, with [`finish`]'s headers, as the accept loop sends it.
pub(super) fn own(response: Response) -> axum::http::Response<ResponseBody> {
    let (mut parts, body) = response.into_parts();
    finish(parts.status, &mut parts.headers);
    axum::http::Response::from_parts(parts, Either::Left(body))
}
