//! A real notebook server through the workspace proxy (issues 41 and 42): JupyterLab from PyPI, in
//! the image the project builds (`tests/tools/node-images/jupyterlab.py`), launched on the real
//! node from the page by a user signed in with the real provider, opened by the row's link in
//! headless Chromium, and a cell run in it. The app's page, its scripts, its REST calls and its
//! kernel's WebSocket all cross outfit's proxy to the pod, and the cell's answer comes from the
//! pod's own Python. On kwok no process answers at the pod's address.

use serde_json::json;

use super::{
    super::sign_in::{Provider, oidc_config},
    *,
};

/// The catalogue entry: [`WEB`]'s on the jupyterlab image, ready once Jupyter Server answers its
/// `/api`.
fn lab() -> String {
    WEB.replace("web", "lab")
        .replace("outfit-test/lab:1", "outfit-test/jupyterlab:1")
        .replace("path: /ready", "path: /api")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jupyterlab_opened_through_the_proxy_runs_a_cell_in_the_workspace() {
    let plane = ControlPlane::with_real_node();
    push_images(
        plane,
        &[
            "--only",
            "jupyterlab",
            "--jupyterlab-venv",
            &plane.env("JUPYTERLAB_VENV"),
        ],
    );
    let ns = "ws-real-jupyterlab";
    namespace(&plane.admin_client().await, ns).await;
    let manifests = Manifests::start().await;
    let lab_url = manifests.put("lab.yaml", &lab());
    let port = free_port();
    let provider = Provider::start(ns, &format!("http://127.0.0.1:{port}/auth/callback")).await;
    let extra = format!(
        "proxyDomain: ws.test\n\
         catalogue:\n- {{name: lab, url: '{lab_url}'}}\n{}",
        oidc_config(&provider, port, ns)
    );
    let _backend = Backend::start_on(
        plane,
        ns,
        &manifests,
        &node_config(plane, &extra),
        plane.kubeconfig(),
        port,
    )
    .await;

    let summary = browser_session(
        "jupyterlab.py",
        [
            "--backend",
            &format!("http://127.0.0.1:{port}/"),
            "--domain",
            "ws.test",
            "--user",
            "alice:alice-password",
            "--manifest",
            "lab",
            "--code",
            "import socket; print(socket.gethostname(), 6 * 7)",
        ],
    )
    .await;
    let name = summary["workspace"].as_str().unwrap();
    // The link is the workspace's own host, where JupyterLab opened; the cell ran in the pod
    // (its hostname is the pod's name) and its answer came back over the kernel's WebSocket.
    let host = format!("http://{name}.ws.test:{port}");
    assert_eq!(summary["link"], json!(host), "{summary}");
    assert!(
        summary["lab_url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{host}/lab")),
        "{summary}"
    );
    assert_eq!(summary["output"], json!(format!("{name} 42")), "{summary}");
}
