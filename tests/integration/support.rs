//! Helpers shared by the integration tests: running the `outfit` binary; the repository's paths
//! and the Go JSON-patch applier come from `outfit-test-support`.

use std::{
    io::Write,
    path::Path,
    process::{Command, Output, Stdio},
};

use serde_json::Value;

pub(crate) use outfit_test_support::{json_lines, repo_root};

/// [`outfit_test_support::apply_patches_independently`], built into this binary's tmp directory.
pub(crate) fn apply_patches_independently(pairs: &[(Value, Value)]) -> Vec<Value> {
    outfit_test_support::apply_patches_independently(Path::new(env!("CARGO_TARGET_TMPDIR")), pairs)
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
