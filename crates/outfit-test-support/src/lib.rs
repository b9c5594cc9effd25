//! What outfit's test binaries and tools share (a dev-dependency and outfit-loadgen's, never in
//! the product): the test cluster and its stand-ins (a CSI provisioner, the kubelet's image
//! side), the API server's own JSON-patch library as an independent
//! check of outfit's patches, free ports, waiting, and the paths of the repository.

pub mod control_plane;
pub mod http;
mod jsonpatch;
pub mod kubelet;
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

/// A loopback port free at the time of the call (the OS picks it; bound by whoever asked next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Parses newline-delimited JSON.
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
