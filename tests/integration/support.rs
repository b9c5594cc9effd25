//! Helpers shared by the integration tests: running the `outfit` binary, and the Go JSON-patch
//! applier the tests use as an independent RFC 6902 implementation.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::OnceLock,
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

/// Parses newline-delimited JSON.
pub(crate) fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Builds `tests/tools/jsonpatch-apply` (gopkg.in/evanphx/json-patch.v4, the library
/// kube-apiserver applies webhook patches with) once per test run.
fn jsonpatch_apply_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jsonpatch-apply");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(repo_root().join("tests/tools/jsonpatch-apply"))
            .status()
            .expect("the Go toolchain is needed to build tests/tools/jsonpatch-apply");
        assert!(status.success(), "go build of jsonpatch-apply failed");
        out
    })
}

/// Applies each `(document, patch)` pair with the Go implementation and returns the results.
pub(crate) fn apply_patches_independently(pairs: &[(Value, Value)]) -> Vec<Value> {
    let input: String = pairs
        .iter()
        .map(|(doc, patch)| serde_json::json!({"doc": doc, "patch": patch}).to_string() + "\n")
        .collect();
    let mut child = Command::new(jsonpatch_apply_binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start jsonpatch-apply");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write pairs");
    let output = child.wait_with_output().expect("jsonpatch-apply runs");
    assert!(output.status.success());
    let results = json_lines(&String::from_utf8(output.stdout).expect("utf-8"));
    assert_eq!(results.len(), pairs.len());
    for result in &results {
        assert!(
            result.get("error").is_none(),
            "the API server's patch library rejected a patch: {result}"
        );
    }
    results
}
