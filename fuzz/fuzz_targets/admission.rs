//! Any bytes as the body of `POST /mutate`: `outfit_server::admission::review`, the webhook's whole
//! admission path from the raw body to the encoded answer, with four fixed policy sets
//! (PodDefaults, Gatekeeper mutators, both, and every kind with outfit's annotation as `outfit
//! serve` runs by default: PodPolicies and the filer injector's inputs too).
//!
//! Invariants, for every body the webhook answers (rather than refusing with 400):
//! - the answer is an `admission.k8s.io/v1` AdmissionReview whose `response.uid` is the request's;
//! - no denial is an internal error (500), and warnings fit the API server's 120 characters;
//! - the webhook decides as the engine does on the same object read as a `serde_json::Value`
//!   (`outfit mutate`'s way in): allowed untouched, mutated, or denied alike;
//! - a patch is base64 RFC 6902 that applies to `request.object` and gives exactly the engine's
//!   mutated object;
//! - reinvocation changes nothing: the mutated object sent again gets no patch and no denial
//!   (`reinvocationPolicy: IfNeeded`), as outfit-core's
//!   `tests/engine/gatekeeper_idempotence.rs` and `poddefault/tests/idempotence.rs` state it for
//!   generated policies.
//!
//! Run: `hack/fuzz.sh run admission 60`

#![no_main]

use std::borrow::Cow;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use outfit_core::{Operation, UserInfo};
use outfit_fuzz::{Decision, FIXED_SETS, decide};
use outfit_server::admission;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    // The same body as a tree, when serde_json can build one (it stops at 128 levels; the webhook
    // reads deeper objects when no policy needs all of them).
    let input: Option<Value> = serde_json::from_slice(body).ok();
    for fixed in FIXED_SETS.iter() {
        let Ok(answer) = admission::review(body, &fixed.set) else {
            continue;
        };
        let out: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
        assert_eq!(out["apiVersion"], admission::API_VERSION);
        assert_eq!(out["kind"], admission::KIND);
        let response = &out["response"];
        assert_eq!(response["uid"].as_str(), Some(&*answer.uid), "{}", fixed.name);
        assert!(!answer.uid.is_empty(), "answered a request without a uid");
        for warning in response["warnings"].as_array().into_iter().flatten() {
            let warning = warning.as_str().expect("a warning is a string");
            assert!(warning.chars().count() <= admission::MAX_WARNING_CHARS);
        }
        let allowed = response["allowed"].as_bool().expect("allowed is a boolean");
        if !allowed {
            let code = response["status"]["code"].as_u64().expect("a denial has a code");
            assert!(
                code == 400 || code == 403,
                "{}: denial with code {code}: {response}",
                fixed.name
            );
            assert!(response.get("patch").is_none());
        }
        let Some(input) = &input else { continue };
        let request = &input["request"];
        assert_eq!(response["uid"], request["uid"], "{}: uid echoed", fixed.name);

        let operation = Operation::parse(request["operation"].as_str().expect("operation read"))
            .expect("an answered operation is known");
        let object = request.get("object").filter(|o| !o.is_null());
        let patch = response.get("patch").map(|patch| {
            assert_eq!(response["patchType"], "JSONPatch");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(patch.as_str().expect("patch is a string"))
                .expect("patch is base64");
            serde_json::from_slice::<json_patch::Patch>(&bytes).expect("patch is an RFC 6902 patch")
        });
        let (Some(object), Operation::Create | Operation::Update) = (object, operation) else {
            assert!(allowed && patch.is_none(), "{}: {response}", fixed.name);
            continue;
        };
        let namespace = request["namespace"].as_str().unwrap_or_default();
        let user = request
            .get("userInfo")
            .filter(|u| !u.is_null())
            .map(|user| UserInfo {
                username: Cow::Borrowed(user["username"].as_str().unwrap_or_default()),
                groups: user["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|g| Cow::Borrowed(g.as_str().expect("group read")))
                    .collect(),
            });
        let engine = decide(&fixed.set, object, namespace, operation, user.as_ref());
        let mutated = match (&engine, allowed, patch) {
            (Decision::Unchanged, true, None) => continue,
            (Decision::Denied(_), false, None) => continue,
            (Decision::Mutated(expected), true, Some(patch)) => {
                let mut patched = object.clone();
                json_patch::patch(&mut patched, &patch)
                    .unwrap_or_else(|e| panic!("{}: the patch does not apply: {e}", fixed.name));
                assert_eq!(
                    &patched, expected,
                    "{}: patch result differs from the engine's",
                    fixed.name
                );
                patched
            }
            (engine, _, _) => panic!(
                "{}: the webhook answered {response} but the engine {engine:?}",
                fixed.name
            ),
        };
        if !fixed.idempotent {
            continue;
        }
        // The API server sends the mutated object again: nothing more may change.
        let mut again = input.clone();
        again["request"]["object"] = mutated.clone();
        let again_body = serde_json::to_vec(&again).expect("serializes");
        let answer = admission::review(&again_body, &fixed.set).expect("the mutated review is a review");
        let out: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
        assert!(
            out["response"]["allowed"] == true && out["response"].get("patch").is_none(),
            "{}: not idempotent: admitting the mutated object {mutated} again answered {}",
            fixed.name,
            out["response"]
        );
        assert_eq!(
            decide(&fixed.set, &mutated, namespace, operation, user.as_ref()),
            Decision::Unchanged,
            "{}: the engine is not idempotent",
            fixed.name
        );
    }
});
