//! What one engine's timed calls measured.

use std::time::Duration;

/// Timed calls of one engine on one object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) iters: u64,
    /// Mean wall-clock time per call.
    pub(crate) per_iter: Duration,
    /// Mean CPU time per call (outfit: its one thread; Go: the whole process, collector included).
    pub(crate) cpu: Duration,
    /// Go only: the mean deep copy of the input, made outside the clock.
    pub(crate) copy: Option<Duration>,
}
