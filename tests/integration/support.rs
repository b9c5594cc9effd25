//! Helpers shared by the integration tests: running the `outfit` binary, and the Go JSON-patch
//! applier the tests use as an independent RFC 6902 implementation.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use serde_json::Value;

/// The repository root.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Runs `outfit` with `args`, feeding `stdin`.
pub(crate) fn outfit(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_outfit"))
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start outfit");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("outfit runs")
}

/// Runs `outfit manifests` with `args` and returns the objects it printed.
pub(crate) fn manifests(args: &[&str]) -> Vec<outfit_core::document::Document> {
    let output = outfit(&[&["manifests"], args].concat(), "");
    assert!(
        output.status.success(),
        "outfit manifests: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    outfit_core::document::parse_stream(&String::from_utf8(output.stdout).unwrap(), "manifests").unwrap()
}

/// Parses newline-delimited JSON.
pub(crate) fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[path = "../tools/jsonpatch-apply/apply.rs"]
mod jsonpatch_apply;
pub(crate) use jsonpatch_apply::apply_patches_independently;
