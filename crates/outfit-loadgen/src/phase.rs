//! What one configuration achieved in a measured phase: its completed requests, their latencies
//! and its errors. At the bottom: the interleaved closed loop and the open loop fill phases in,
//! the report prints them, and none of those needs another to say what a phase is.

use std::time::Duration;

/// Completed requests of one configuration over its measured time; latencies in ns, sorted.
#[derive(Default)]
pub(crate) struct Phase {
    pub(crate) requests: u64,
    pub(crate) elapsed: Duration,
    pub(crate) latencies: Vec<u64>,
    pub(crate) errors: u64,
}

impl Phase {
    pub(crate) fn throughput(&self) -> f64 {
        if self.elapsed.is_zero() {
            return 0.0;
        }
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        Duration::from_nanos(self.latencies[rank.clamp(1, self.latencies.len()) - 1])
    }
}
