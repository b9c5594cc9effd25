//! The windows in which the API server was down, so that errors inside them are forgiven.

use std::{
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// When the API server was down: from its kill to the moment it was ready again.
#[derive(Debug, Default)]
pub(crate) struct Outages {
    windows: Mutex<Vec<(Instant, Option<Instant>)>>,
}

impl Outages {
    pub(crate) fn begin(&self, at: Instant) {
        self.lock().push((at, None));
    }

    pub(crate) fn end(&self, at: Instant) {
        if let Some(last) = self.lock().last_mut() {
            last.1 = Some(at);
        }
    }

    /// Whether `[from, to]` overlaps an outage or the `grace` after one.
    pub(crate) fn overlaps(&self, from: Instant, to: Instant, grace: Duration) -> bool {
        self.lock()
            .iter()
            .any(|&(down, up)| from <= up.map_or(to, |up| up + grace) && to >= down)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Instant, Option<Instant>)>> {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
