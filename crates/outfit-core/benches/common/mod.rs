//! What the engine's benchmarks share.

/// How many policies each benchmark runs with: 10 to 10,000 under `cargo bench` (which passes
/// `--bench`, as criterion reads it), and only 10 and 100 in criterion's test mode
/// (`cargo test --benches`, as CI runs every benchmark once on a debug build to prove it still
/// works): the debug build's 10,000 Gatekeeper mutators took minutes there, and the larger
/// sizes run the same code.
pub(crate) fn policy_counts() -> &'static [usize] {
    if std::env::args().any(|arg| arg == "--bench") {
        &[10, 100, 1_000, 10_000]
    } else {
        &[10, 100]
    }
}
