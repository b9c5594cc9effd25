//! What `outfit serve` adds besides the policies' own changes: the `outfit.dev/mutated-by`
//! annotation (idempotent on reinvocation) and AdmissionResponse warnings for a mutator that
//! matched and changed nothing, each of which a flag turns off.

use base64::Engine as _;
use hyper::StatusCode;
use outfit_server::{CompileOptions, Limits, Webhook};
use serde_json::{Value, json};

use crate::support::{TempDir, post, webhook_with};
use outfit_test_support::apply_patches_independently;

/// `keep-priority` never overrides a priority class the pod sets (a pathTest); `scheduler` sets
/// the scheduler.
const POLICIES: &str = "\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: keep-priority}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.priorityClassName
  parameters:
    pathTests: [{subPath: spec.priorityClassName, condition: MustNotExist}]
    assign: {value: workspace}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: scheduler}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.schedulerName
  parameters: {assign: {value: gang}}
";

fn serving(dir: &TempDir, annotate: bool, warnings: bool) -> Webhook {
    std::fs::write(dir.path().join("policies.yaml"), POLICIES).unwrap();
    let options = CompileOptions {
        annotate,
        warnings,
        ..CompileOptions::from("default")
    };
    webhook_with(dir.path(), Limits::default(), options).0
}

fn review(pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "operation": "CREATE", "namespace": "team-a",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "alice"},
            "object": pod,
        }
    }))
    .unwrap()
}

/// The review's answer and the pod it admits.
async fn admit(webhook: &Webhook, pod: &Value) -> (Value, Value) {
    let (status, answer) = post(webhook, "/mutate", review(pod)).await;
    assert_eq!(status, StatusCode::OK);
    let response = answer["response"].clone();
    assert_eq!(response["allowed"], true, "{response}");
    let Some(patch) = response["patch"].as_str() else {
        return (response, pod.clone());
    };
    let patch = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    let admitted =
        apply_patches_independently(env!("CARGO_TARGET_TMPDIR"), &[(pod.clone(), patch)]).remove(0);
    (response, admitted)
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
           "spec": {"priorityClassName": "mine", "containers": [{"name": "c", "image": "i"}]}})
}

#[tokio::test]
async fn the_annotation_lists_what_changed_the_pod_and_a_reinvocation_leaves_it() {
    let dir = TempDir::new("warnings-annotation");
    let webhook = serving(&dir, true, true);
    let (response, admitted) = admit(&webhook, &pod()).await;
    assert_eq!(admitted["spec"]["schedulerName"], "gang");
    assert_eq!(admitted["spec"]["priorityClassName"], "mine");
    assert_eq!(
        admitted["metadata"]["annotations"],
        json!({"outfit.dev/mutated-by": "Assign//scheduler"})
    );
    assert_eq!(
        response["warnings"],
        json!(["Assign keep-priority matched and changed nothing: its spec.parameters.pathTests stopped it"])
    );

    // The API server calls again after another webhook changed the pod: nothing to add, and
    // `scheduler`, which the pod lists, is not reported as having changed nothing.
    let (response, again) = admit(&webhook, &admitted).await;
    assert_eq!(again, admitted);
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(
        response["warnings"],
        json!(["Assign keep-priority matched and changed nothing: its spec.parameters.pathTests stopped it"])
    );
}

#[tokio::test]
async fn no_annotation_and_no_warnings_leave_gatekeeper_s_own_result() {
    let dir = TempDir::new("warnings-off");
    let webhook = serving(&dir, false, true);
    let (response, admitted) = admit(&webhook, &pod()).await;
    assert_eq!(admitted["spec"]["schedulerName"], "gang");
    assert!(admitted["metadata"].get("annotations").is_none(), "{admitted}");
    // Without the annotation a reinvocation cannot be told from a mutator with nothing to do.
    assert!(response.get("warnings").is_none(), "{response}");

    let dir = TempDir::new("warnings-none");
    let webhook = serving(&dir, true, false);
    let (response, admitted) = admit(&webhook, &pod()).await;
    assert_eq!(
        admitted["metadata"]["annotations"]["outfit.dev/mutated-by"],
        "Assign//scheduler"
    );
    assert!(response.get("warnings").is_none(), "{response}");
}
