//! One `outfit workspaces` over two clusters (two control planes of the harness, each with a
//! kwok node): a workspace on each (one launched from the page), one cluster's API server killed
//! and started again while the user keeps working on the other.

use std::time::Duration;

use serde_json::{Value, json};

use super::{native::WEB_FIELDS, support::*};
use crate::control_plane::ControlPlane;

/// The workspaces `caller` lists, as (name, cluster, reachable, status).
async fn listed(backend: &Backend, caller: Caller<'_>) -> Vec<(String, String, bool, String)> {
    let (status, list) = backend.call(caller, "GET", "/api/v1/workspaces", None).await;
    assert_eq!(status, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("items: {list}"))
        .iter()
        .map(|w| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&w["name"]),
                text(&w["cluster"]["name"]),
                w["cluster"]["reachable"].as_bool().unwrap_or(false),
                text(&w["status"]),
            )
        })
        .collect()
}

/// Launches `web` on `cluster` (the default when `None`): the status and the answer.
async fn launch_on(backend: &Backend, caller: Caller<'_>, cluster: Option<&str>) -> (u16, Value) {
    let mut body = json!({"manifest": "web"});
    if let Some(cluster) = cluster {
        body["cluster"] = json!(cluster);
    }
    backend
        .call(caller, "POST", "/api/v1/workspaces", Some(body))
        .await
}

/// Launches `web` on `cluster` (the default when `None`) and follows it to ready; its name.
async fn launch_ready(backend: &Backend, caller: Caller<'_>, cluster: Option<&str>) -> String {
    let (status, created) = launch_on(backend, caller, cluster).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["cluster"]["name"],
        cluster.unwrap_or("default"),
        "{created}"
    );
    let name = created["name"].as_str().unwrap().to_owned();
    backend.follow_to_ready(caller, &name).await;
    name
}

/// Headless Chromium launches `web` on `cluster` through the page's form, checks that the list
/// shows the workspace on that cluster, and deletes it (`tests/browser/workspace_page.py`).
async fn browser_launch_on(backend: &Backend, token: &str, cluster: &str) {
    let driver =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/workspace_page.py");
    let output = tokio::process::Command::new("/usr/bin/python3")
        .arg(&driver)
        .args(["--url", &format!("http://127.0.0.1:{}/", backend.port)])
        .args([
            "--token",
            token,
            "--manifest",
            "web",
            "--cluster",
            cluster,
            "--timeout",
            "90",
        ])
        .output()
        .await
        .expect("/usr/bin/python3 runs the browser driver");
    assert!(
        output.status.success(),
        "the browser session failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_backend_serves_two_clusters_and_rides_out_one_going_away() {
    let plane = ControlPlane::with_nodes();
    let east = tokio::task::spawn_blocking(|| ControlPlane::start_with_nodes("east", 1))
        .await
        .unwrap();
    let ns = "ws-clusters";
    namespace(&plane.admin_client().await, ns).await;
    namespace(&east.admin_client().await, ns).await;
    workspace_crd(&east.admin_client().await).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB_FIELDS);
    let extra = format!(
        "catalogue: [{{name: web, url: '{url}'}}]\n\
         clusters: [{{name: east, kubeconfig: '{}'}}]\n",
        east.kubeconfig().display()
    );
    let backend = Backend::start(plane, ns, &manifests, &extra).await;
    let alice_token = plane.env("ALICE_TOKEN");
    let alice = Caller::Token(&alice_token);

    // A workspace on each; the list shows both with their cluster.
    let here = launch_ready(&backend, alice, None).await;
    let there = launch_ready(&backend, alice, Some("east")).await;
    assert_ne!(here, there, "names are unique across clusters");
    let mut both = listed(&backend, alice).await;
    both.sort();
    let mut expected = vec![
        (here.clone(), "default".to_owned(), true, "ready".to_owned()),
        (there.clone(), "east".to_owned(), true, "ready".to_owned()),
    ];
    expected.sort();
    assert_eq!(both, expected);
    let (status, error) = launch_on(&backend, alice, Some("moon")).await;
    assert_eq!(
        (status, error["reason"].as_str()),
        (400, Some("UnknownCluster")),
        "{error}"
    );
    assert!(
        error["error"].as_str().unwrap().contains("default, east"),
        "{error}"
    );
    // The page offers the choice: a browser launches on east, sees the row say so, deletes it.
    browser_launch_on(&backend, &alice_token, "east").await;

    // East's API server goes away: its workspace is unknown, with why; the default works on.
    let start_again = east.stop_apiserver();
    eventually(
        "east's workspace shown as unknown",
        Duration::from_secs(30),
        || async {
            listed(&backend, alice)
                .await
                .iter()
                .any(|(name, cluster, reachable, status)| {
                    *name == there && cluster == "east" && !reachable && status == "unknown"
                })
        },
    )
    .await;
    let (_, away) = backend
        .call(alice, "GET", &format!("/api/v1/workspaces/{there}"), None)
        .await;
    assert!(
        away["cluster"]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{away}"
    );
    assert!(
        away["message"].as_str().unwrap().contains("cluster east"),
        "{away}"
    );
    let (_, home) = backend
        .call(alice, "GET", &format!("/api/v1/workspaces/{here}"), None)
        .await;
    assert_eq!(
        (home["status"].as_str(), home["cluster"]["reachable"].as_bool()),
        (Some("ready"), Some(true)),
        "{home}"
    );
    let (status, refused) = launch_on(&backend, alice, Some("east")).await;
    assert_eq!(
        (status, refused["reason"].as_str()),
        (503, Some("ClusterUnreachable")),
        "{refused}"
    );
    assert!(
        refused["error"].as_str().unwrap().contains("cluster east"),
        "{refused}"
    );
    let meanwhile = launch_ready(&backend, alice, None).await;

    // Back: east's workspace is ready again, and everything is deleted.
    start_again();
    eventually(
        "east's workspace back to ready",
        Duration::from_secs(60),
        || async {
            listed(&backend, alice)
                .await
                .iter()
                .any(|(name, _, reachable, status)| *name == there && *reachable && status == "ready")
        },
    )
    .await;
    for name in [&here, &there, &meanwhile] {
        let (status, answer) = backend
            .call(alice, "DELETE", &format!("/api/v1/workspaces/{name}"), None)
            .await;
        assert_eq!(status, 202, "{name}: {answer}");
    }
    eventually("every workspace gone", Duration::from_secs(60), || async {
        listed(&backend, alice).await.is_empty()
    })
    .await;
}
