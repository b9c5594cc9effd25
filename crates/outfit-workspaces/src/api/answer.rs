//! An answer before it is encoded: its status and its body (JSON, text, a file of the page, or a
//! stream of events). Every endpoint returns one and the parent encodes it, so it sits at the
//! bottom of [`api`](super).

use hyper::StatusCode;
use serde_json::Value;

use super::sse;

/// An answer before it is encoded.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Body,
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
    pub(super) fn json(status: StatusCode, body: Value) -> Self {
        Self {
            status,
            body: Body::Json(body),
        }
    }
}
