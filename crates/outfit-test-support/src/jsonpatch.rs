//! The Rust side of `tests/tools/jsonpatch-apply`: gopkg.in/evanphx/json-patch.v4, the library
//! kube-apiserver applies webhook patches with, run over outfit's patches.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::OnceLock,
};

use serde_json::Value;

/// Builds the Go applier once per test process, into `tmp` (a test binary's
/// `env!("CARGO_TARGET_TMPDIR")`).
fn binary(tmp: &Path) -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let out = tmp.join("jsonpatch-apply");
        // This crate is crates/outfit-test-support.
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/tools/jsonpatch-apply");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(source)
            .status()
            .expect("the Go toolchain is needed to build tests/tools/jsonpatch-apply");
        assert!(status.success(), "go build of jsonpatch-apply failed");
        out
    })
}

/// Applies each `(document, patch)` pair with the Go implementation and returns the results;
/// `tmp` is where the applier is built: the calling test binary's `env!("CARGO_TARGET_TMPDIR")`.
pub fn apply_patches_independently(tmp: impl AsRef<Path>, pairs: &[(Value, Value)]) -> Vec<Value> {
    let input: String = pairs
        .iter()
        .map(|(doc, patch)| serde_json::json!({"doc": doc, "patch": patch}).to_string() + "\n")
        .collect();
    let mut child = Command::new(binary(tmp.as_ref()))
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
    let results: Vec<Value> = String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(results.len(), pairs.len());
    for result in &results {
        assert!(
            result.get("error").is_none(),
            "the API server's patch library rejected a patch: {result}"
        );
    }
    results
}
