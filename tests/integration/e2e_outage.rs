//! Outages. `outfit serve --from-cluster` while the API server is away: the last policies keep
//! serving, and changes made after the API server returns are picked up (the test waits until
//! outfit has logged its watch failing before it goes on, so the outage it claims to survive is
//! one outfit saw). And outfit away while the API server is up: the cluster's own traffic never
//! waits on it (issue 33).

use std::{
    process::Command,
    time::{Duration, Instant},
};

use base64::{Engine, prelude::BASE64_STANDARD};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use outfit_test_support::wait::eventually;

use crate::{
    control_plane::{ControlPlane, create, pod_namespace, resource},
    e2e::Webhook,
};

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

/// Whether `result` is the API server refusing a request because outfit's webhook could not be
/// called (failurePolicy Fail).
fn refused_by_webhook(result: &Result<Value, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.message.contains("failed calling webhook"))
}

/// Issue 33: an all-kinds rule with `failurePolicy: Fail`, as `outfit manifests --all-resources`
/// writes it, and outfit down (nothing listens at the webhook's URL). The cluster's own traffic
/// still passes: a node's Lease is created and renewed, Events and Leases are written anywhere,
/// whatever a node asks passes, an excluded namespace's and an opted-out namespace's objects pass,
/// an object other than a pod labelled `outfit.dev/ignore=true` passes; while a pod, labelled or
/// not, and an unlabelled ConfigMap in a user's namespace are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outfit_outage_never_stops_the_cluster_s_own_traffic() {
    let plane = ControlPlane::start("outage-traffic");
    let admin = plane.admin_client().await;
    let users = "traffic-users";
    pod_namespace(&admin, users, json!({})).await;
    pod_namespace(&admin, "legacy", json!({})).await;
    let down = outfit_test_support::free_port();
    let url = format!("https://127.0.0.1:{down}/mutate");
    let configuration = crate::support::manifests(&[
        "--webhook-url",
        &url,
        "--all-resources",
        "--exclude-namespace",
        "legacy",
    ])
    .into_iter()
    .find(|d| d.kind() == "MutatingWebhookConfiguration")
    .expect("a webhook configuration")
    .value;
    assert_eq!(configuration["webhooks"][0]["failurePolicy"], "Fail");
    let webhooks = resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    );
    create(&admin, None, &webhooks, configuration)
        .await
        .expect("register the webhook");

    let config_maps = resource("", "v1", "ConfigMap", "configmaps");
    let config_map = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}});
    // The API server reads webhook configurations through an informer: wait until it calls.
    eventually(
        "the API server to call the webhook",
        Duration::from_secs(60),
        || async {
            let probe =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "probe-"}});
            refused_by_webhook(&create(&admin, Some(users), &config_maps, probe).await).then_some(())
        },
    )
    .await;

    // Refused: what a user's namespace holds, pods even when labelled.
    let pods = resource("", "v1", "Pod", "pods");
    for labels in [json!({}), json!({"outfit.dev/ignore": "true"})] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let refused = create(&admin, Some(users), &pods, pod).await;
        assert!(refused_by_webhook(&refused), "{refused:?}");
    }

    // Passes: an object other than a pod that opts out, and the namespaces left out.
    create(
        &admin,
        Some(users),
        &config_maps,
        config_map("opted-out", json!({"outfit.dev/ignore": "true"})),
    )
    .await
    .expect("a labelled ConfigMap opts out");
    create(&admin, Some("legacy"), &config_maps, config_map("c", json!({})))
        .await
        .expect("an --exclude-namespace namespace's ConfigMap");
    let namespaces = resource("", "v1", "Namespace", "namespaces");
    let opted_out = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "opted-out", "labels": {"outfit.dev/ignore": "true"}}});
    create(&admin, None, &namespaces, opted_out)
        .await
        .expect("a namespace labelled to opt out");
    create(
        &admin,
        Some("opted-out"),
        &config_maps,
        config_map("c", json!({})),
    )
    .await
    .expect("an opted-out namespace's ConfigMap");

    // A node's heartbeat: its Lease in kube-node-lease, created and renewed as the node.
    let node = crate::requester::client_as(
        &plane,
        "system:node:worker-1",
        &["system:nodes", "system:masters"],
    )
    .await;
    let leases = resource("coordination.k8s.io", "v1", "Lease", "leases");
    let lease = |name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
               "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}})
    };
    create(&node, Some("kube-node-lease"), &leases, lease("worker-1"))
        .await
        .expect("the node's Lease");
    let renew = json!({"spec": {"renewTime": "2026-11-29T10:00:00.000000Z"}});
    Api::<DynamicObject>::namespaced_with(node.clone(), "kube-node-lease", &leases)
        .patch("worker-1", &PatchParams::default(), &Patch::Merge(&renew))
        .await
        .expect("the node's Lease renewed");
    // Whatever a node asks, in any namespace.
    create(
        &node,
        Some(users),
        &config_maps,
        config_map("from-a-node", json!({})),
    )
    .await
    .expect("a node's request");
    // The cluster's bookkeeping, in a user's namespace too.
    create(&admin, Some(users), &leases, lease("a-controller"))
        .await
        .expect("a controller's Lease");
    let events = resource("", "v1", "Event", "events");
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
                       "involvedObject": {"kind": "ConfigMap", "name": "opted-out", "namespace": users},
                       "reason": "Test", "message": "an Event during an outfit outage", "type": "Normal"});
    create(&admin, Some(users), &events, event)
        .await
        .expect("an Event");
    let new_events = resource("events.k8s.io", "v1", "Event", "events");
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
                       "eventTime": "2026-11-29T10:00:00.000000Z", "reportingController": "test/outage",
                       "reportingInstance": "test", "action": "Tested", "reason": "Test", "type": "Normal",
                       "regarding": {"kind": "ConfigMap", "name": "opted-out", "namespace": users}});
    create(&admin, Some(users), &new_events, event)
        .await
        .expect("an events.k8s.io Event");
}
