//! The load generator's command line. At the bottom of the binary: the root parses it and the
//! client carries it to both measurements, and it reads nothing of theirs.

use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Benchmark outfit serve against a fixed-response TLS server")]
pub(crate) struct Args {
    /// Concurrent keep-alive connections to each server (one request in flight on each).
    #[arg(long, default_value_t = 32)]
    pub(crate) connections: usize,
    /// Seconds of active time per closed-loop configuration (the interleaved measurement lasts
    /// three times that, after a 1 s warm-up), and of the open-loop phase (after a quarter of that).
    #[arg(long, default_value_t = 8.0)]
    pub(crate) seconds: f64,
    /// Length of one slice of the interleaved closed-loop measurement, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub(crate) slice_ms: u64,
    /// Give servers and client a 2-worker runtime each (4 threads on 2 cores) instead of sharing one.
    #[arg(long)]
    pub(crate) two_runtimes: bool,
    /// Log as `outfit serve` does by default (`info`: a text line per mutation or denial, written
    /// by a background thread), to /dev/null. Without it, the servers log nothing.
    #[arg(long)]
    pub(crate) logs: bool,
    /// Policies in the large configuration.
    #[arg(long, default_value_t = 1000)]
    pub(crate) policies: usize,
    /// Namespaces the policies are spread over.
    #[arg(long, default_value_t = 50)]
    pub(crate) namespaces: usize,
    /// Upper bound on requests per configuration in the closed-loop measurement, and on measured
    /// requests in the open-loop phase.
    #[arg(long, default_value_t = 5_000_000)]
    pub(crate) max_requests: u64,
}
