//! Real AdmissionReview bodies through the in-process router: the full response is checked, and
//! every patch is decoded from base64 and applied with the API server's own JSON-patch library
//! to give exactly what `outfit mutate` prints for the same object.

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::Value;

use crate::support::{fixture, fixture_webhook, fixtures, post};
use outfit_test_support::apply_patches_independently;

/// What a fixture must get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Allowed with a patch giving `expected/<name>.json`, with these policies audited.
    Mutated(&'static [&'static str]),
    /// Allowed with no patch.
    Untouched,
    /// Denied with 403, the message naming the first policies, the audit annotation the second
    /// (the engine's policies in conflict).
    Denied(&'static [&'static str], &'static [&'static str]),
}

const CASES: &[(&str, Expect)] = &[
    // Kubeflow: every PodDefault whose selector matches applies on pod CREATE, in name order.
    (
        "pod-create-notebook",
        Expect::Mutated(&[
            "PodDefault team-a/access-ml-pipeline",
            "PodDefault team-a/datasets-nfs",
            "PodDefault team-a/gpu-access",
            "PodDefault team-a/s3-mount",
        ]),
    ),
    // dryRun gets the same answer as the real request.
    (
        "pod-create-dry-run",
        Expect::Mutated(&[
            "PodDefault team-a/access-ml-pipeline",
            "PodDefault team-a/datasets-nfs",
            "PodDefault team-a/gpu-access",
            "PodDefault team-a/s3-mount",
        ]),
    ),
    // A controller's pod: no name yet, no namespace in the object; the request's namespace counts.
    (
        "pod-create-generate-name",
        Expect::Mutated(&["PodDefault team-a/datasets-nfs"]),
    ),
    ("pod-create-no-match", Expect::Untouched),
    // PodDefaults only apply in their own namespace.
    ("pod-create-other-namespace", Expect::Untouched),
    // Kubeflow denies a pod whose PodDefaults conflict.
    (
        "pod-create-conflict",
        Expect::Denied(
            &["PodDefault team-b/region-eu", "PodDefault team-b/region-us"],
            &["PodDefault team-b/region-us"],
        ),
    ),
    // Kubeflow's webhook is registered for CREATE only: an UPDATE is not mutated.
    ("pod-update-labels", Expect::Untouched),
    ("pod-delete", Expect::Untouched),
    ("pod-exec-connect", Expect::Untouched),
    ("pod-ephemeralcontainers-update", Expect::Untouched),
    // PodDefaults mutate pods, not their controllers.
    ("deployment-create", Expect::Untouched),
];

#[tokio::test]
async fn every_fixture_gets_the_answer_outfit_mutate_gives() {
    let (webhook, _) = fixture_webhook();
    let mut pairs = Vec::new();
    let mut expected_objects = Vec::new();
    for &(name, expect) in CASES {
        let body = fixture(name);
        let review: Value = serde_json::from_slice(&body).expect("fixture is JSON");
        let (status, answer) = post(&webhook, "/mutate?timeout=10s", body).await;
        assert_eq!(status, StatusCode::OK, "{name}: {answer}");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{name}");
        assert_eq!(answer["kind"], "AdmissionReview", "{name}");
        let response = &answer["response"];
        assert_eq!(response["uid"], review["request"]["uid"], "{name}: uid echoed");
        match expect {
            Expect::Mutated(policies) => {
                assert_eq!(response["allowed"], true, "{name}");
                assert_eq!(response["patchType"], "JSONPatch", "{name}");
                let patch = base64::engine::general_purpose::STANDARD
                    .decode(response["patch"].as_str().expect("patch is a base64 string"))
                    .expect("patch is base64");
                let patch: Value = serde_json::from_slice(&patch).expect("patch is JSON");
                assert!(patch.as_array().is_some_and(|ops| !ops.is_empty()), "{name}");
                assert_eq!(
                    response["auditAnnotations"]["applied-policies"],
                    policies.join(", "),
                    "{name}"
                );
                assert!(response.get("status").is_none(), "{name}");
                let expected: Value = serde_json::from_slice(
                    &std::fs::read(fixtures().join(format!("expected/{name}.json")))
                        .expect("expected object"),
                )
                .expect("expected is JSON");
                pairs.push((review["request"]["object"].clone(), patch));
                expected_objects.push((name, expected));
            }
            Expect::Untouched => {
                assert_eq!(response["allowed"], true, "{name}");
                assert!(response.get("patch").is_none(), "{name}: {response}");
                assert!(response.get("patchType").is_none(), "{name}");
                assert!(response.get("auditAnnotations").is_none(), "{name}");
            }
            Expect::Denied(policies, in_conflict) => {
                assert_eq!(response["allowed"], false, "{name}");
                assert!(response.get("patch").is_none(), "{name}");
                assert_eq!(response["status"]["code"], 403, "{name}");
                assert_eq!(response["status"]["reason"], "Forbidden", "{name}");
                let message = response["status"]["message"].as_str().expect("message");
                for policy in policies {
                    let short = policy.rsplit('/').next().expect("name");
                    assert!(message.contains(short), "{name}: {message} names {short}");
                }
                assert!(
                    message.contains("env[name: AWS_REGION]"),
                    "{name}: field named: {message}"
                );
                assert_eq!(
                    response["auditAnnotations"]["denied-by"],
                    in_conflict.join(", "),
                    "{name}"
                );
            }
        }
    }
    let patched = apply_patches_independently(env!("CARGO_TARGET_TMPDIR"), &pairs);
    for ((name, expected), patched) in expected_objects.into_iter().zip(patched) {
        assert_eq!(
            patched, expected,
            "{name}: patched object differs from `outfit mutate`'s"
        );
    }
}

#[tokio::test]
async fn dry_run_gets_the_same_response_as_the_real_request() {
    let (webhook, _) = fixture_webhook();
    let (_, real) = post(&webhook, "/mutate", fixture("pod-create-notebook")).await;
    let (_, dry) = post(&webhook, "/mutate", fixture("pod-create-dry-run")).await;
    let strip_uid = |mut v: Value| {
        v["response"]["uid"] = Value::Null;
        v
    };
    assert_eq!(strip_uid(real), strip_uid(dry));
}

#[tokio::test]
async fn routing_matches_the_path_only() {
    let (webhook, metrics) = fixture_webhook();
    for path in ["/mutate", "/mutate?timeout=10s", "/mutate?timeout=30s&x=y"] {
        let (status, answer) = post(&webhook, path, fixture("pod-create-no-match")).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(answer["response"]["allowed"], true, "{path}");
    }
    let (status, answer) = post(&webhook, "/validate", fixture("pod-create-no-match")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("/mutate")));
    let text = metrics.encode();
    assert!(
        text.contains("outfit_admission_requests_total{outcome=\"allowed\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("outfit_admission_requests_total{outcome=\"not_found\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("outfit_admission_duration_seconds_count 3"),
        "{text}"
    );
}

#[tokio::test]
async fn warnings_and_user_info_do_not_break_the_response() {
    // userInfo with extra fields, and unknown top-level request fields, are accepted.
    let (webhook, _) = fixture_webhook();
    let mut review: Value = serde_json::from_slice(&fixture("pod-create-generate-name")).expect("JSON");
    review["request"]["userInfo"]["extra"] = serde_json::json!({"scopes": ["a", "b"]});
    review["request"]["somethingNew"] = serde_json::json!({"nested": [1, 2, 3]});
    let (status, answer) = post(&webhook, "/mutate", serde_json::to_vec(&review).expect("JSON")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
}
