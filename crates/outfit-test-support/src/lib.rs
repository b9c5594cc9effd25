//! What outfit's test binaries and tools share (a dev-dependency and outfit-loadgen's, never in
//! the product): the test cluster and its stand-ins (a CSI provisioner, the kubelet's image
//! side), the API server's own JSON-patch library as an independent
//! check of outfit's patches, answers checked against an OpenAPI document's schemas, free ports, waiting, and the paths of the repository.

pub mod control_plane;
pub mod http;
mod jsonpatch;
pub mod kubelet;
pub mod openapi;
pub mod provisioner;
pub mod wait;

use std::path::PathBuf;

use serde_json::Value;

pub use jsonpatch::apply_patches_independently;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    // This crate is crates/outfit-test-support.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Where [`free_port`] looks: below the kernel's ephemeral range (32768 and up), where every
/// outgoing connection of every process takes its local port, and below the test cluster's
/// (hack/control-plane picks 20000 to 31999).
const FREE_PORTS: std::ops::Range<u16> = 10_000..20_000;

/// A loopback port free at the time of the call, to be bound by whoever asked next. Not one the
/// OS picks (port 0): those come from the ephemeral range, where another process's outgoing
/// connection could take it before it is bound (seen in CI: a backend's admin port "already in
/// use" while the real node's tests ran beside). Each call of a process takes the next port of
/// the range from a start of its own, so two calls never return the same port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(FREE_PORTS.end - FREE_PORTS.start);
    // A start of this process's own (its pid, scattered), so test binaries after one another
    // do not walk the same ports.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(2_654_435_761) % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let port = FREE_PORTS.start + u16::try_from(offset).expect("within the range");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {FREE_PORTS:?}")
}

/// Parses newline-delimited JSON.
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
