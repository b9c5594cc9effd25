//! An answer before it is encoded: its status and its body (JSON, text, a file of the page, or a
//! stream of events). Every endpoint returns one and the parent encodes it, so it sits at the
//! bottom of [`api`](super).

use hyper::{
    HeaderMap, StatusCode,
    header::{HeaderName, HeaderValue},
};
use serde_json::Value;

use super::sse;

/// An answer before it is encoded: its status, body and the headers of its own (a sign-in's
/// `Location` and cookies); the encoder adds the ones every answer carries.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Body,
    pub(super) headers: HeaderMap,
}

pub(super) enum Body {
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
    pub(super) fn new(status: StatusCode, body: Body) -> Self {
        Self {
            status,
            body,
            headers: HeaderMap::new(),
        }
    }

    pub(super) fn json(status: StatusCode, body: Value) -> Self {
        Self::new(status, Body::Json(body))
    }

    /// The answer with `name: value` among its headers (added to any of that name).
    pub(super) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }
}
