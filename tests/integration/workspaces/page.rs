//! The page at `/`, in a real browser: headless Chromium (Debian's), driven over WebDriver by
//! `tests/browser/workspace_page.py`, signs in with a token the API server accepts, launches a
//! workspace through the form, watches the progress bar reach ready, stops and starts it, and
//! deletes it; before that, a launch the API refuses shows the API's error under the form. The
//! screenshot it takes is the one docs/workspaces/native-api.md shows.

use std::path::PathBuf;

use serde_json::json;

use super::{native::WEB_FIELDS, support::*};
use crate::control_plane::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_launches_follows_and_deletes_a_workspace() {
    let plane = ControlPlane::with_nodes();
    let client = plane.admin_client().await;
    let ns = "ws-page";
    namespace(&client, ns).await;
    let manifests = Manifests::start().await;
    let url = manifests.put("web.yaml", WEB_FIELDS);
    let notebook = manifests.put("notebook.yaml", &JUPYTER.replace("TOKEN_KEY", "none"));
    // More CPU than maxCpuPerUser allows: the API refuses its launch, and the page must say why.
    let big = manifests.put("big.yaml", &WEB_FIELDS.replace("cpu: 500m", "cpu: '100'"));
    let extra = format!(
        "maxCpuPerUser: '64'\n\
         catalogue:\n\
         - {{name: web, url: '{url}', title: Web server, description: An nginx with a greeting of your choice}}\n\
         - {{name: notebook, url: '{notebook}', title: Jupyter notebook, description: JupyterLab with your ScienceData files}}\n\
         - {{name: big, url: '{big}', title: Too big, description: More CPU than anyone may have}}\n"
    );
    // With exactly the permissions `outfit manifests --workspaces` gives: TokenReviews, the
    // Events watch and NetworkPolicies included.
    let kubeconfig = least_privilege(plane, &client, "ws-page-system", ns).await;
    let backend = Backend::start_as(plane, ns, &manifests, &extra, kubeconfig).await;
    let token = plane.env("ALICE_TOKEN");
    // A workspace already running, so the page shows a list, not only the new one.
    let alice = Caller::Token(&token);
    let launch = {
        let backend = &backend;
        move |manifest: &str| {
            let body = json!({ "manifest": manifest });
            backend.call(alice, "POST", "/api/v1/workspaces", Some(body))
        }
    };
    let (status, running) = launch("notebook").await;
    assert_eq!(status, 201, "{running}");
    let name = running["name"].as_str().unwrap().to_owned();
    assert_eq!(
        backend.follow(alice, &name).await.last().map(|e| e.0.clone()),
        Some("ready".to_owned())
    );

    let screenshot = match std::env::var_os("OUTFIT_DOCS_SCREENSHOT") {
        Some(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/images/workspaces-page.png"),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("outfit-workspaces-page-{}.png", std::process::id())),
    };
    // What the form sets must reach the pod: the API server's copy is watched while the browser
    // works, since the browser deletes the workspace at the end.
    let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let watching = {
        let (seen, pods) = (
            seen.clone(),
            kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns),
        );
        tokio::spawn(async move {
            loop {
                for pod in pods
                    .list(&Default::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default()
                {
                    let env = pod
                        .spec
                        .into_iter()
                        .flat_map(|s| s.containers)
                        .flat_map(|c| c.env.unwrap_or_default());
                    seen.lock()
                        .unwrap()
                        .extend(env.filter(|e| e.name == "GREETING").filter_map(|e| e.value));
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    // What the API answers the launch the browser will be refused, to compare with what it shows.
    let (status, refusal) = launch("big").await;
    assert_eq!(
        (status, &refusal["reason"]),
        (403, &json!("LimitExceeded")),
        "{refusal}"
    );
    let url = format!("http://127.0.0.1:{}/", backend.port);
    let mut args = vec![
        "--refused",
        "big",
        "--url",
        &url,
        "--token",
        &token,
        "--expect-user",
        "alice",
        "--manifest",
        "web",
        "--field",
        "web/GREETING=hello from the browser",
        "--timeout",
        "90",
        "--screenshot",
    ]
    .into_iter()
    .map(std::ffi::OsString::from)
    .collect::<Vec<_>>();
    args.push(screenshot.clone().into_os_string());
    let summary = browser_session("workspace_page.py", args).await;
    let created = summary["workspace"].as_str().expect("the launched workspace");
    assert!(created.starts_with("web-alice"), "{summary}");
    assert!(
        summary["ready_ms"].as_u64().is_some() && summary["first_progress_ms"].as_u64().is_some(),
        "{summary}"
    );
    // Issue 44: an error of the API is shown where the page puts the launch's errors.
    assert_eq!(summary["refused_error"], refusal["error"], "{summary}");
    // Issue 31: the page's Stop and Start buttons, clicked.
    assert!(
        summary["stopped_ms"].as_u64().is_some() && summary["restarted_ms"].as_u64().is_some(),
        "{summary}"
    );
    let png = std::fs::read(&screenshot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    // What the browser did reached the cluster: the setting from the form, and the delete.
    watching.abort();
    assert!(
        seen.lock().unwrap().iter().any(|v| v == "hello from the browser"),
        "the form's GREETING never reached the pod: {:?}",
        seen.lock().unwrap()
    );
    let (_, list) = backend.call(alice, "GET", "/api/v1/workspaces", None).await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [name.as_str()],
        "the browser's workspace is gone, the other one stays"
    );
    eprintln!("browser session: {summary}");
}
