//! `outfit serve --from-cluster` while the API server is away: the last policies keep serving,
//! and changes made after the API server returns are picked up. The test waits until outfit has
//! logged its watch failing before it goes on, so the outage it claims to survive is one outfit
//! saw.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use base64::{Engine, prelude::BASE64_STANDARD};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{control_plane::ControlPlane, e2e::Webhook};

/// Sends one AdmissionReview for a pod to the webhook with curl (trusting only outfit's CA) and
/// returns the decoded patch, `[]` when none.
fn review(webhook: &Webhook, namespace: &str) -> Value {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "outage-1", "operation": "CREATE", "namespace": namespace,
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                               "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    });
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(webhook.ca_file())
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(body.to_string())
        .arg(format!("https://127.0.0.1:{}/mutate", webhook.port()))
        .output()
        .expect("curl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("a JSON answer");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    match answer["response"]["patch"].as_str() {
        Some(patch) => {
            serde_json::from_slice(&BASE64_STANDARD.decode(patch).expect("base64")).expect("JSON patch")
        }
        None => json!([]),
    }
}

fn proxy_in(patch: &Value) -> Option<String> {
    patch.as_array()?.iter().find_map(|op| {
        let value = &op["value"];
        let env = if op["path"].as_str()?.ends_with("/env") {
            value.get(0)?
        } else {
            value
        };
        (env["name"] == "HTTPS_PROXY").then(|| env["value"].as_str().unwrap_or_default().to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_policies_keep_serving_while_the_api_server_is_away() {
    let plane = ControlPlane::start("outage");
    let client = plane.admin_client().await;
    crate::support::install_crds(&client).await;
    let namespace = "default";
    let pod_defaults =
        crate::control_plane::resource("kubeflow.org", "v1alpha1", "PodDefault", "poddefaults");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &pod_defaults);
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault", "metadata": {"name": "proxy"},
        "spec": {"selector": {}, "env": [{"name": "HTTPS_PROXY", "value": "http://one:1"}]}}))
    .unwrap();
    api.create(&PostParams::default(), &policy)
        .await
        .expect("create the PodDefault");

    let webhook = Webhook::start_with(
        &["--from-cluster"],
        &[("KUBECONFIG", plane.state_dir.join("kubeconfig"))],
    );
    assert_eq!(
        proxy_in(&review(&webhook, namespace)).as_deref(),
        Some("http://one:1")
    );

    let logged_before = webhook.log().len();
    let stopping = Instant::now();
    let restart = plane.stop_apiserver();
    eprintln!("outage: apiserver stopped in {:?}", stopping.elapsed());
    // Really away: its process is gone (stop_apiserver waited for that) and a request to it fails.
    assert!(
        client.apiserver_version().await.is_err(),
        "the API server still answers after it was killed"
    );
    // And outfit has noticed: its PodDefault watch failed and is retrying. Without this the rest
    // could pass with outfit never having seen the outage.
    let noticed = Instant::now();
    let deadline = noticed + Duration::from_secs(60);
    loop {
        let log = webhook.log();
        let failed = log[logged_before.min(log.len())..]
            .lines()
            .any(|line| line.contains("watch failed") && line.contains("kind=PodDefault"));
        if failed {
            eprintln!(
                "outage: outfit logged the failed watch {:?} after the kill",
                noticed.elapsed()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "outfit never logged a failed PodDefault watch; its log since the kill:\n{}",
            &log[logged_before.min(log.len())..]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Away: the webhook answers from the policies it has.
    for _ in 0..3 {
        assert_eq!(
            proxy_in(&review(&webhook, namespace)).as_deref(),
            Some("http://one:1")
        );
    }
    restart();
    let restarted = Instant::now();

    // Back: a change made now reaches the webhook once its watch has reconnected (with backoff).
    let patch = json!({"spec": {"env": [{"name": "HTTPS_PROXY", "value": "http://two:2"}]}});
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match api
            .patch("proxy", &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                eprintln!(
                    "outage: API server accepted the change {:?} after its restart",
                    restarted.elapsed()
                );
                break;
            }
            Err(error) => assert!(
                Instant::now() < deadline,
                "the API server did not come back: {error}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = Instant::now();
    loop {
        let seen = proxy_in(&review(&webhook, namespace));
        if seen.as_deref() == Some("http://two:2") {
            eprintln!(
                "outage: change after the API server returned visible in {:?}",
                start.elapsed()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook never caught up; still serving {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
