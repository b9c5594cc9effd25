//! Issue 47: the example a newcomer starts the backend from (`examples/workspaces/`, README's
//! `examples/workspaces/run.sh`), on the shared node cluster: its configuration loads as it is
//! (only the ports and the manifest server's address are the test's), the page is served, its
//! catalogue is offered, and each entry launches to ready and is deleted. So the example cannot
//! rot.

use std::path::Path;

use serde_json::json;

use super::support::{Backend, Caller, Manifests, free_port, namespace, workspace_crd};
use crate::control_plane::ControlPlane;

const EXAMPLE: &str = "examples/workspaces";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_starts_the_backend_and_launches_its_catalogue() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let root = crate::support::repo_root();
    let example = root.join(EXAMPLE);
    let config = std::fs::read_to_string(example.join("config.yaml")).unwrap();
    assert!(
        config.contains("namespace: workspaces-example\n"),
        "run.sh makes the namespace workspaces-example, the config must use it"
    );
    workspace_crd(&client).await;
    namespace(&client, "workspaces-example").await;

    // run.sh serves manifests/ on 127.0.0.1:8000 and the backend listens on 8080 and 8081; here
    // the ports are free ones.
    let manifests = Manifests::start().await;
    let entries = ["web", "notebook"];
    for entry in entries {
        let text =
            std::fs::read_to_string(example.join(Path::new("manifests").join(format!("{entry}.yaml"))))
                .unwrap();
        manifests.put(&format!("{entry}.yaml"), &text);
    }
    let port = free_port();
    let served = format!("http://127.0.0.1:{}/manifests/", manifests.port);
    let config = replaced(&config, "http://127.0.0.1:8000/", &served);
    let config = replaced(
        &config,
        r"'http://127\.0\.0\.1:8000/'",
        &format!("'{}'", served.replace('.', r"\.")),
    );
    let config = replaced(
        &config,
        "listen: 127.0.0.1:8080",
        &format!("listen: 127.0.0.1:{port}"),
    );
    let config = replaced(&config, "adminListen: 127.0.0.1:8081", "adminListen: ''");
    let backend = Backend::start_with_config(&config, port, plane.kubeconfig()).await;

    let (status, page) = super::support::http(port, "GET", "/", "").await;
    assert_eq!(status, 200);
    assert!(page.contains("<html"), "{page}");
    let token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&token);
    let (status, catalogue) = backend.call(alice, "GET", "/api/v1/catalogue", None).await;
    assert_eq!(status, 200, "{catalogue}");
    let offered: Vec<&str> = catalogue["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, entries, "{catalogue}");
    for item in catalogue["items"].as_array().unwrap() {
        assert!(
            item["error"].is_null(),
            "the example's entry does not load: {item}"
        );
    }
    for entry in entries {
        let (status, launched) = backend
            .call(
                alice,
                "POST",
                "/api/v1/workspaces",
                Some(json!({"manifest": entry})),
            )
            .await;
        assert_eq!(status, 201, "{entry}: {launched}");
        let name = launched["name"].as_str().unwrap().to_owned();
        backend.follow_to_ready(alice, &name).await;
        let (status, deleted) = backend
            .call(alice, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
            .await;
        assert_eq!(status, 202, "{entry}: {deleted}");
    }
}

/// `text` with `from` replaced by `to`; fails the test if the example no longer has `from`.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "examples/workspaces/config.yaml no longer has {from:?}"
    );
    text.replace(from, to)
}
