//! Progress as Server-Sent Events (axum's [`Sse`]): one event whenever the workspace's [`Report`]
//! changes, read from the watch cache as it changes (never by polling the API server), a comment
//! after 15 s of quiet so proxies keep the connection, and a final `ready`, `failed` or `deleted`
//! event that ends it.

use std::{convert::Infallible, time::Duration};

use axum::response::{
    IntoResponse, Response,
    sse::{Event, KeepAlive, Sse},
};
use futures::{Stream, stream};
use outfit_workspaces_core::workspace::progress::Report;
use tokio_util::sync::CancellationToken;

use super::streams::StreamSlot;
use crate::backend::Backend;

/// How long a stream stays quiet before it sends a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event: its name and the report as JSON on one `data:` line.
fn event(name: &str, report: &Report) -> Event {
    let json = serde_json::to_string(report).expect("reports serialize");
    Event::default().event(name).data(json)
}

/// Where a stream is: what it last sent, and whether that was the last event.
struct Following {
    backend: Backend,
    name: String,
    uid: String,
    changes: tokio::sync::watch::Receiver<u64>,
    last: Option<Report>,
    done: bool,
    closing: CancellationToken,
    /// The user's stream slot, given back when the stream is dropped (it ended, or its client went).
    _slot: StreamSlot,
}

/// The progress of the pod `name` with `uid`, as an answer, until it is final, the client goes,
/// or `closing`; `slot` is its user's until then.
pub(super) fn stream(
    backend: Backend,
    (name, uid): (String, String),
    slot: StreamSlot,
    closing: CancellationToken,
) -> Response {
    let changes = backend.changes();
    let following = Following {
        backend,
        name,
        uid,
        changes,
        last: None,
        done: false,
        closing,
        _slot: slot,
    };
    Sse::new(events(following))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response()
}

/// The events of `following`, each when the report changes.
fn events(following: Following) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    stream::unfold(following, |mut at| async move {
        if at.done {
            return None;
        }
        loop {
            at.changes.borrow_and_update();
            let report = at.backend.report(&at.name, &at.uid);
            if at.last.as_ref() != Some(&report) {
                at.done = report.status.is_final();
                let kind = if at.done {
                    report.status.as_str()
                } else {
                    "progress"
                };
                let sent = event(kind, &report);
                at.last = Some(report);
                return Some((Ok(sent), at));
            }
            tokio::select! {
                () = at.closing.cancelled() => return None,
                changed = at.changes.changed() => {
                    // The cache is gone: the backend is stopping.
                    changed.ok()?;
                }
            }
        }
    })
}
