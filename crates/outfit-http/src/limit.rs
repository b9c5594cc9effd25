//! A cap on open connections. Each one costs memory (TLS and HTTP buffers, a task: about 35 KiB
//! idle), and an API server needs few, so a flood of idle connections must not be able to hold
//! memory without bound, nor to crowd out the API server's own.
//!
//! At the cap, a new connection makes room by closing the oldest idle one (no request in flight:
//! waiting for its first request, between requests, or still in its TLS handshake): a flooder's
//! connections are the idle ones, the API server's are busy or new. A request is in flight until
//! its answer's body is sent, so a connection streaming events (a workspace's progress) is busy
//! for as long as the stream lasts. When every connection is busy, the new one is refused: it is
//! answered 503 with `Retry-After` (a few at a time, each within seconds; `accept.rs`), and
//! closed unanswered past that, so a flood of them holds no more than a few; the API server
//! retries either way.

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use hyper::body::{Body, Frame, SizeHint};
use tokio_util::sync::CancellationToken;

/// The open connections, and how many may be.
#[derive(Debug)]
pub struct ConnectionLimit {
    max: usize,
    open: AtomicUsize,
    /// Oldest first; slots of closed connections are dropped lazily.
    slots: Mutex<VecDeque<Arc<Slot>>>,
    evicted: AtomicU64,
    refused: AtomicU64,
    /// Refused connections being answered now.
    answering_refusals: AtomicUsize,
}

/// Refused connections answered at once, at most: each holds a task and its buffers until its
/// 503 is sent (within seconds); past it a refused connection is closed unanswered.
pub const REFUSALS_ANSWERED: usize = 64;

/// The right to answer one refused connection, given back when dropped.
#[derive(Debug)]
pub struct Refusal(Arc<ConnectionLimit>);

impl Refusal {
    /// The cap of the port that refused the connection.
    pub fn max(&self) -> usize {
        self.0.max
    }
}

impl Drop for Refusal {
    fn drop(&mut self) {
        self.0.answering_refusals.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One open connection's state, shared with its task.
#[derive(Debug)]
pub struct Slot {
    busy: AtomicUsize,
    gone: AtomicBool,
    close: CancellationToken,
}

impl Slot {
    /// Fires when the connection should close to make room.
    pub fn closing(&self) -> &CancellationToken {
        &self.close
    }

    /// Marks a request in flight until the guard drops.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
            && !self.close.is_cancelled()
            && !self.gone.load(Ordering::Acquire)
    }
}

/// A request in flight on its connection.
#[derive(Debug)]
pub struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    /// An answer's body that keeps its connection busy until the body is sent (or dropped): a
    /// stream of events is a request still being answered, never an idle connection to evict.
    pub struct Answering<B> {
        #[pin]
        body: B,
        busy: Option<Busy>,
    }
}

impl<B> Answering<B> {
    /// `body`, holding `busy` (none for a connection outside the cap) until it is sent.
    pub fn new(body: B, busy: Option<Busy>) -> Self {
        Answering { body, busy }
    }
}

impl<B: Body> Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = this.body.poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = frame {
            // Sent (or failed): the connection is idle again until its next request.
            this.busy.take();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection let in: it holds its place until dropped.
#[derive(Debug)]
pub struct Admitted {
    slot: Arc<Slot>,
    limit: Arc<ConnectionLimit>,
}

impl Admitted {
    /// The connection's slot.
    pub fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.slot.gone.store(true, Ordering::Release);
        self.limit.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnectionLimit {
    /// At most `max` open connections (at least 1).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: AtomicUsize::new(0),
            slots: Mutex::new(VecDeque::new()),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            answering_refusals: AtomicUsize::new(0),
        })
    }

    /// Lets a new connection in, closing the oldest idle one when at the cap; `None` when every
    /// open connection is busy (the new one is to be closed). The connection's
    /// [`Slot::closing`] also fires with `shutdown`.
    pub fn admit(self: &Arc<Self>, shutdown: &CancellationToken) -> Option<Admitted> {
        let mut slots = self.slots.lock().expect("connection slots");
        while slots.front().is_some_and(|s| s.gone.load(Ordering::Acquire)) {
            slots.pop_front();
        }
        if self.open.load(Ordering::Acquire) >= self.max {
            match slots.iter().find(|s| s.is_idle()) {
                Some(victim) => {
                    victim.close.cancel();
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        }
        // Closed slots in the middle are dropped now and then, so the queue stays near the cap.
        if slots.len() > 2 * self.max {
            slots.retain(|s| !s.gone.load(Ordering::Acquire));
        }
        let slot = Arc::new(Slot {
            busy: AtomicUsize::new(0),
            gone: AtomicBool::new(false),
            close: shutdown.child_token(),
        });
        slots.push_back(slot.clone());
        self.open.fetch_add(1, Ordering::AcqRel);
        Some(Admitted {
            slot,
            limit: self.clone(),
        })
    }

    /// The right to answer a connection [`admit`](Self::admit) refused, while fewer than
    /// [`REFUSALS_ANSWERED`] are being answered; `None`: close it unanswered.
    pub fn refusal(self: &Arc<Self>) -> Option<Refusal> {
        self.answering_refusals
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < REFUSALS_ANSWERED).then_some(n + 1)
            })
            .ok()
            .map(|_| Refusal(self.clone()))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Idle connections closed to make room, so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// New connections refused because every open one was busy, so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let limit = ConnectionLimit::new(2);
        let first = limit.admit(&CancellationToken::new()).unwrap();
        let second = limit.admit(&CancellationToken::new()).unwrap();
        let _working = first.slot().busy();
        // The first is busy: the second, idle, is asked to close.
        let third = limit.admit(&CancellationToken::new()).unwrap();
        assert!(!first.slot().closing().is_cancelled());
        assert!(second.slot().closing().is_cancelled());
        assert_eq!(limit.evicted(), 1);
        drop(second);
        assert_eq!(limit.open(), 2);
        let _ = third;
    }

    #[test]
    fn when_every_connection_is_busy_a_new_one_is_refused() {
        let limit = ConnectionLimit::new(1);
        let only = limit.admit(&CancellationToken::new()).unwrap();
        let busy = only.slot().busy();
        assert!(limit.admit(&CancellationToken::new()).is_none());
        assert_eq!(limit.refused(), 1);
        drop(busy);
        // Idle again: it makes room.
        assert!(limit.admit(&CancellationToken::new()).is_some());
        assert!(only.slot().closing().is_cancelled());
    }

    #[test]
    fn refused_connections_are_answered_a_few_at_a_time() {
        let limit = ConnectionLimit::new(1);
        let answering: Vec<Refusal> = (0..REFUSALS_ANSWERED).map_while(|_| limit.refusal()).collect();
        assert_eq!(answering.len(), REFUSALS_ANSWERED);
        assert!(limit.refusal().is_none(), "past the cap: closed unanswered");
        drop(answering);
        assert!(limit.refusal().is_some(), "given back once answered");
    }

    #[test]
    fn closed_connections_free_their_place() {
        let limit = ConnectionLimit::new(3);
        let all: Vec<Admitted> = (0..3)
            .map(|_| limit.admit(&CancellationToken::new()).unwrap())
            .collect();
        drop(all);
        assert_eq!(limit.open(), 0);
        for _ in 0..100 {
            let kept = limit.admit(&CancellationToken::new()).unwrap();
            assert!(!kept.slot().closing().is_cancelled());
        }
        assert_eq!(limit.evicted(), 0);
        assert!(limit.slots.lock().unwrap().len() <= 6);
    }
}
