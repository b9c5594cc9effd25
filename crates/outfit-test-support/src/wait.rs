//! Waiting in tests and tools: a future bounded in time, and a condition polled until it holds.

use std::{future::Future, time::Duration};

/// How often [`eventually`] asks again.
pub const POLL_EVERY: Duration = Duration::from_millis(100);

/// Awaits `future`, panicking (failing the test) if it takes longer than `limit`.
pub async fn within<T>(what: &str, limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("timed out ({limit:?}) waiting for {what}"))
}

/// What a poll of [`eventually`] answers: `false` or `None` for "not yet", `true` or `Some(value)`
/// once the condition holds.
pub trait Settled {
    /// What [`eventually`] returns once settled.
    type Value;
    /// The value, once settled.
    fn settled(self) -> Option<Self::Value>;
}

impl Settled for bool {
    type Value = ();
    fn settled(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Settled for Option<T> {
    type Value = T;
    fn settled(self) -> Option<T> {
        self
    }
}

/// Polls `poll` every [`POLL_EVERY`] until it settles (`true`, or `Some(value)`), panicking
/// (failing the test) if it has not within `limit`; returns the value.
pub async fn eventually<S, F>(what: &str, limit: Duration, mut poll: impl FnMut() -> F) -> S::Value
where
    S: Settled,
    F: Future<Output = S>,
{
    within(what, limit, async {
        loop {
            if let Some(value) = poll().await.settled() {
                return value;
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    })
    .await
}
