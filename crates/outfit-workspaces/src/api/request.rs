//! Reading a request, for both APIs: its body (capped) and that body's JSON, the caller's address
//! as the allowed networks see it, a comparison of tokens that takes the same time whatever they
//! hold, and how long to wait for the backend's first read of the cluster. At the bottom of
//! [`api`](super), so deic-dk's API and the native API import it from here and not from their
//! parent.

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::{StatusCode, body::Incoming};
use serde::de::DeserializeOwned;

/// How long a request waits for the backend's first read of the cluster.
pub(super) const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub(super) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the request body is not the expected JSON: {e}"))
}

pub(super) async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, (StatusCode, String)> {
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
