//! Progress as Server-Sent Events: one event whenever the workspace's [`Report`] changes, read
//! from the watch cache as it changes (never by polling the API server), a comment every 15 s so
//! proxies keep the connection, and a final `ready`, `failed` or `deleted` event that ends it.

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use hyper::body::Frame;
use outfit_workspaces_core::workspace::progress::Report;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::streams::StreamSlot;
use crate::backend::Backend;

/// How often a quiet stream sends a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A response body of events, written by the task [`stream`] starts.
#[derive(Debug)]
pub struct EventStream {
    events: mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for EventStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.events
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// One event: its name and the report as JSON on one `data:` line.
fn event(name: &str, report: &Report) -> Bytes {
    let json = serde_json::to_string(report).expect("reports serialize");
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

/// The progress of the pod `name` with `uid`, until it is final, the client goes, or `shutdown`;
/// `slot` is its user's until then.
pub(super) fn stream(
    backend: Backend,
    (name, uid): (String, String),
    slot: StreamSlot,
    shutdown: CancellationToken,
) -> EventStream {
    let (sender, events) = mpsc::channel(16);
    tokio::spawn(async move {
        let _slot = slot;
        let mut changes = backend.changes();
        let mut last: Option<Report> = None;
        loop {
            changes.borrow_and_update();
            let report = backend.report(&name, &uid);
            if last.as_ref() != Some(&report) {
                let done = report.status.is_final();
                let kind = if done { report.status.as_str() } else { "progress" };
                if sender.send(event(kind, &report)).await.is_err() || done {
                    return;
                }
                last = Some(report);
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = sender.closed() => return,
                changed = tokio::time::timeout(KEEP_ALIVE, changes.changed()) => match changed {
                    Ok(Ok(())) => {}
                    // The cache is gone: the backend is stopping.
                    Ok(Err(_)) => return,
                    Err(_) => {
                        if sender.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                            return;
                        }
                    }
                },
            }
        }
    });
    EventStream { events }
}
