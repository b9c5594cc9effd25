//! Helpers shared by the integration tests: running the `outfit` binary, installing the CRDs it
//! prints; the repository's paths and the Go JSON-patch applier come from `outfit-test-support`.

use std::{
    io::Write,
    process::{Command, Output, Stdio},
    time::Duration,
};

use kube::Client;
use serde_json::Value;

pub(crate) use outfit_test_support::{json_lines, repo_root};

use crate::control_plane::{api, create, resource};

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

/// Installs every CRD `outfit manifests` prints and waits until the API server serves them.
pub(crate) async fn install_crds(client: &Client) {
    assert_eq!(install_crds_where(client, |_| true).await, 7);
}

/// Installs the CRDs `outfit manifests` prints whose name `wanted` accepts, waits until the API
/// server serves them, and returns how many.
pub(crate) async fn install_crds_where(client: &Client, wanted: impl Fn(&str) -> bool) -> usize {
    let documents = manifests(&["--webhook-url", "https://127.0.0.1:1/unused"]);
    let crds = documents
        .iter()
        .filter(|d| d.kind() == "CustomResourceDefinition")
        .filter(|d| wanted(d.value["metadata"]["name"].as_str().unwrap()))
        .map(|d| d.value.clone());
    install_crd_objects(client, crds).await
}

/// Installs `crds` (409, already there, is fine), waits until the API server serves each, and
/// returns how many.
pub(crate) async fn install_crd_objects(client: &Client, crds: impl IntoIterator<Item = Value>) -> usize {
    let resource = resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    let mut names = Vec::new();
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        match create(client, None, &resource, crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("CRD {name} did not install: {error}"),
        }
        names.push(name);
    }
    let installed = names.len();
    let crd_api = api(client, None, &resource);
    for name in names {
        let established = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let crd = serde_json::to_value(crd_api.get(&name).await.expect("get CRD")).unwrap();
                let conditions = crd
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        assert!(established.is_ok(), "CRD {name} never became Established");
    }
    installed
}
