//! Reading a request, for both APIs: its body (capped, within a deadline) and that body's JSON,
//! the caller's address as the allowed networks see it, a comparison of tokens that takes the same
//! time whatever they hold, whether a page of another site sent it, and how long to wait for the
//! backend's first read of the cluster. Near the bottom of [`api`](super): deic-dk's API and the
//! native API build their extractors on it.

use std::net::IpAddr;

use axum::{
    body::Body,
    http::{HeaderMap, Method, StatusCode, header},
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use serde::de::DeserializeOwned;

/// How long a request waits for the backend's first read of the cluster.
pub(super) const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the request body is not the expected JSON: {e}"))
}

/// The body of a request, at most `limit` bytes, all of it within `deadline`: a client that sends
/// a byte now and then must not hold its connection (and its buffers) for ever.
pub(super) async fn read_body(
    body: Body,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<Bytes, (StatusCode, String)> {
    tokio::time::timeout(deadline, read_capped(body, limit))
        .await
        .unwrap_or_else(|_| {
            Err((
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within bodyReadTimeout ({deadline:?})"),
            ))
        })
}

async fn read_capped(body: Body, limit: usize) -> Result<Bytes, (StatusCode, String)> {
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

/// The first value of `key` in a request's query, decoded as browsers encode forms (`%XX`, and
/// `+` for a space); an IPv6 address arrives as `fe80%3A%3A1`. A malformed escape is kept as
/// written.
pub(super) fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.into_owned())
}

/// IPv4-mapped IPv6 addresses as IPv4, so `127.0.0.0/8` matches a dual-stack listener's peers.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Compares without stopping at the first difference, so the time taken says nothing of the token.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a state-changing request (any method but GET and HEAD) is refused as one a page on
/// another site could have made a signed-in browser send, if it is: its body must be declared
/// JSON (an HTML form can't send that; a script must ask first), and its `Origin` must be the
/// API's own or in `allowed_origins` (browsers send it on every such request; other clients
/// send none), or else, without one, `Sec-Fetch-Site` must not say another site.
pub(super) fn cross_site_refusal(
    method: &Method,
    headers: &HeaderMap,
    allowed_origins: &[String],
) -> Option<(StatusCode, String)> {
    if method == Method::GET || method == Method::HEAD {
        return None;
    }
    if method == Method::POST && !is_json(headers) {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request with Content-Type: application/json".to_owned(),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let own = host.is_some_and(|host| {
            origin
                .split_once("://")
                .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(host.trim()))
        });
        if own || allowed_origins.contains(&origin) {
            return None;
        }
        return Some((
            StatusCode::FORBIDDEN,
            format!(
                "requests from pages of {origin:?} are refused: it is not this API's origin nor in allowedOrigins"
            ),
        ));
    }
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("cross-site" | "same-site") => Some((
            StatusCode::FORBIDDEN,
            "requests from pages of other sites are refused (Sec-Fetch-Site)".to_owned(),
        )),
        _ => None,
    }
}

/// Whether the body is declared JSON (`application/json`, parameters allowed).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    const JSON: (&str, &str) = ("content-type", "application/json");
    const HOST: (&str, &str) = ("host", "workspaces.example.org");

    #[test]
    fn a_form_post_is_refused_as_not_json() {
        for content_type in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ] {
            let refused = cross_site_refusal(&Method::POST, &headers(&[("content-type", content_type)]), &[]);
            assert_eq!(
                refused.map(|r| r.0),
                Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
                "{content_type}"
            );
        }
        let missing = cross_site_refusal(&Method::POST, &headers(&[]), &[]);
        assert_eq!(missing.map(|r| r.0), Some(StatusCode::UNSUPPORTED_MEDIA_TYPE));
        let json = headers(&[("content-type", "application/json; charset=utf-8")]);
        assert_eq!(cross_site_refusal(&Method::POST, &json, &[]), None);
        // Reads change nothing.
        assert_eq!(cross_site_refusal(&Method::GET, &headers(&[]), &[]), None);
    }

    #[test]
    fn another_sites_origin_is_refused_unless_allowed() {
        let evil = headers(&[JSON, HOST, ("origin", "https://evil.example")]);
        let (status, error) = cross_site_refusal(&Method::POST, &evil, &[]).unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(
            error.contains("evil.example") && error.contains("allowedOrigins"),
            "{error}"
        );
        let delete = headers(&[HOST, ("origin", "https://evil.example")]);
        assert!(cross_site_refusal(&Method::DELETE, &delete, &[]).is_some());
        let allowed = ["https://evil.example".to_owned()];
        assert_eq!(cross_site_refusal(&Method::POST, &evil, &allowed), None);
        let own = headers(&[JSON, HOST, ("origin", "https://workspaces.example.org")]);
        assert_eq!(cross_site_refusal(&Method::POST, &own, &[]), None);
        // A workspace on a sibling host is another origin.
        let sibling = headers(&[JSON, HOST, ("origin", "https://web-alice.example.org")]);
        assert!(cross_site_refusal(&Method::POST, &sibling, &[]).is_some());
        let opaque = headers(&[JSON, HOST, ("origin", "null")]);
        assert!(cross_site_refusal(&Method::POST, &opaque, &[]).is_some());
    }

    #[test]
    fn without_an_origin_fetch_metadata_decides() {
        for site in ["cross-site", "same-site"] {
            let sent = headers(&[JSON, ("sec-fetch-site", site)]);
            assert!(cross_site_refusal(&Method::POST, &sent, &[]).is_some(), "{site}");
        }
        for site in ["same-origin", "none"] {
            let sent = headers(&[JSON, ("sec-fetch-site", site)]);
            assert_eq!(cross_site_refusal(&Method::POST, &sent, &[]), None, "{site}");
        }
        // curl and other programs send neither.
        assert_eq!(cross_site_refusal(&Method::POST, &headers(&[JSON]), &[]), None);
    }
}
