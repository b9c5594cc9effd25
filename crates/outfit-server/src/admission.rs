//! The AdmissionReview `admission.k8s.io/v1` protocol: reading a review, deciding it with the
//! engine, and writing outfit's own response.
//!
//! The response is our own type rather than kube-rs's, whose `patch` is encoded as an array of
//! numbers (kube-rs#1781); the API server documents base64. The request is read borrowing from the
//! body: `request.object` is handed to the engine as raw JSON, which PodDefaults read in place and
//! Gatekeeper mutators parse into a `serde_json::Value` only when there are any (never a typed
//! round trip, which would drop unknown and null fields); `oldObject` and every other field outfit
//! does not need is skipped without being built.

use std::{borrow::Cow, collections::BTreeMap};

use base64::Engine as _;
use outfit_core::{DenialReason, Object, Operation, Outcome, PolicyRef, PolicySet, Request, UserInfo};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::metrics::RequestOutcome;

/// The only review version outfit answers.
pub const API_VERSION: &str = "admission.k8s.io/v1";
/// The review kind.
pub const KIND: &str = "AdmissionReview";
/// The longest warning sent back, in characters (the API server asks for at most 120).
pub const MAX_WARNING_CHARS: usize = 119;
/// The audit annotation naming the policies that mutated the object.
pub const AUDIT_APPLIED: &str = "applied-policies";
/// The audit annotation naming the policies that denied the object.
pub const AUDIT_DENIED: &str = "denied-by";

/// A body that is not an `admission.k8s.io/v1` AdmissionReview: answered with HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum InvalidReview {
    /// Not JSON, or JSON of the wrong shape.
    #[error("the body is not a JSON AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    /// Another apiVersion or kind.
    #[error(
        "expected apiVersion {API_VERSION} and kind {KIND}, got apiVersion {api_version:?} and kind {kind:?}"
    )]
    Version {
        /// What the body said.
        api_version: String,
        /// What the body said.
        kind: String,
    },
    /// No `request`.
    #[error("the AdmissionReview has no request")]
    MissingRequest,
    /// No `request.uid`, so no answer could be matched to it.
    #[error("the AdmissionReview request has no uid")]
    MissingUid,
    /// An operation other than CREATE, UPDATE, DELETE and CONNECT.
    #[error("unknown operation {0:?}; expected CREATE, UPDATE, DELETE or CONNECT")]
    Operation(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(borrow, default)]
    api_version: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn<'a> {
    #[serde(borrow, default)]
    uid: Cow<'a, str>,
    #[serde(borrow)]
    kind: Option<KindIn<'a>>,
    #[serde(borrow, default)]
    sub_resource: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    operation: Cow<'a, str>,
    user_info: Option<UserInfoIn>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
struct KindIn<'a> {
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct UserInfoIn {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: BTreeMap<&'static str, String>,
}

/// A `metav1.Status` for denials.
#[derive(Serialize)]
struct StatusOut<'a> {
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    code: u16,
}

/// The answer to one review, with what the log line and the metrics need.
/// Its strings borrow from the request body.
#[derive(Debug)]
pub struct Answer<'a> {
    /// The serialized AdmissionReview response.
    pub body: Vec<u8>,
    /// The decision.
    pub outcome: RequestOutcome,
    /// `request.uid`.
    pub uid: Cow<'a, str>,
    /// `request.namespace`.
    pub namespace: Cow<'a, str>,
    /// `request.name`, or the object's `generateName` when the name is not known yet.
    pub name: Cow<'a, str>,
    /// `request.kind.kind` plus `/subResource` if any.
    pub kind: Cow<'a, str>,
    /// `request.operation`.
    pub operation: Cow<'a, str>,
    /// `request.dryRun`.
    pub dry_run: bool,
    /// The policies that applied (mutated) or denied.
    pub policies: Vec<PolicyRef>,
    /// The denial message, when denied.
    pub message: Option<String>,
}

/// Reads an AdmissionReview body and decides it with `policies`.
pub fn review<'a>(body: &'a [u8], policies: &PolicySet) -> Result<Answer<'a>, InvalidReview> {
    let review: ReviewIn<'_> = serde_json::from_slice(body)?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(InvalidReview::Version {
            api_version: review.api_version.into_owned(),
            kind: review.kind.into_owned(),
        });
    }
    let request = review.request.ok_or(InvalidReview::MissingRequest)?;
    if request.uid.is_empty() {
        return Err(InvalidReview::MissingUid);
    }
    let operation = Operation::parse(&request.operation)
        .ok_or_else(|| InvalidReview::Operation(request.operation.clone().into_owned()))?;

    let kind = request.kind.as_ref().map(|k| k.kind.clone()).unwrap_or_default();
    let kind = if request.sub_resource.is_empty() {
        kind
    } else {
        Cow::Owned(format!("{kind}/{}", request.sub_resource))
    };
    let mut answer = Answer {
        body: Vec::new(),
        outcome: RequestOutcome::Allowed,
        uid: request.uid.clone(),
        namespace: request.namespace.clone(),
        name: request.name.clone(),
        kind,
        operation: request.operation.clone(),
        dry_run: request.dry_run,
        policies: Vec::new(),
        message: None,
    };

    // DELETE and CONNECT carry no object to mutate (or an options object): allowed untouched; so
    // is everything when no policy is loaded, without parsing the object.
    let raw_object = match (operation, request.object) {
        (Operation::Create | Operation::Update, Some(object)) if !policies.is_empty() => object,
        _ => {
            answer.body = allow(&request.uid, None, Vec::new(), &[]);
            return Ok(answer);
        }
    };
    let user = request.user_info.map(|user| UserInfo {
        username: user.username,
        groups: user.groups,
    });
    let engine_request = Request {
        object: Object::Json(raw_object),
        namespace: &request.namespace,
        operation,
        user: user.as_ref(),
    };
    let outcome = policies.apply(&engine_request);
    match outcome {
        Outcome::Admitted(admission) => {
            let patch = if admission.is_unchanged() {
                None
            } else {
                answer.outcome = RequestOutcome::Mutated;
                Some(base64_string(&admission.patch_json()))
            };
            answer.body = allow(&request.uid, patch, admission.warnings, &admission.applied);
            answer.policies = admission.applied;
        }
        Outcome::Denied(denial) => {
            let (code, reason) = match denial.reason {
                DenialReason::Policy => (403, "Forbidden"),
                DenialReason::UnreadableObject => (400, "BadRequest"),
                DenialReason::Internal => (500, "InternalError"),
            };
            answer.body = deny(&request.uid, &denial.message, code, reason, &denial.policies);
            answer.outcome = RequestOutcome::Denied;
            answer.policies = denial.policies;
            answer.message = Some(denial.message);
        }
    }
    // Only the log line needs the name a controller asked the API server to generate from, and
    // reading it is one more scan of the object: done when the line will be written.
    if answer.name.is_empty() && crate::webhook::logs(answer.outcome) {
        answer.name = Cow::Owned(generate_name(raw_object).unwrap_or_default());
    }
    Ok(answer)
}

/// `metadata.generateName` of an object.
fn generate_name(object: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Object<'a> {
        #[serde(borrow)]
        metadata: Option<Metadata<'a>>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata<'a> {
        #[serde(borrow)]
        generate_name: Option<Cow<'a, str>>,
    }
    let object: Object<'_> = serde_json::from_str(object.get()).ok()?;
    object.metadata?.generate_name.map(Cow::into_owned)
}

fn allow(uid: &str, patch: Option<Box<RawValue>>, warnings: Vec<String>, applied: &[PolicyRef]) -> Vec<u8> {
    let mut audit_annotations = BTreeMap::new();
    if !applied.is_empty() {
        audit_annotations.insert(AUDIT_APPLIED, join(applied));
    }
    encode(ResponseOut {
        uid,
        allowed: true,
        patch_type: patch.as_ref().map(|_| "JSONPatch"),
        patch,
        status: None,
        warnings: warnings.into_iter().map(shorten).collect(),
        audit_annotations,
    })
}

fn deny(uid: &str, message: &str, code: u16, reason: &'static str, policies: &[PolicyRef]) -> Vec<u8> {
    let mut audit_annotations = BTreeMap::new();
    if !policies.is_empty() {
        audit_annotations.insert(AUDIT_DENIED, join(policies));
    }
    encode(ResponseOut {
        uid,
        allowed: false,
        patch_type: None,
        patch: None,
        status: Some(StatusOut {
            status: "Failure",
            message,
            reason,
            code,
        }),
        warnings: Vec::new(),
        audit_annotations,
    })
}

fn encode(response: ResponseOut<'_>) -> Vec<u8> {
    let review = ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    // Strings, booleans and maps of strings always serialize.
    serde_json::to_vec(&review).unwrap_or_default()
}

/// `bytes` in base64 as a JSON string, ready to be written as it is: base64 needs no escaping, so
/// the response need not scan it character by character as `serialize_str` would.
fn base64_string(bytes: &[u8]) -> Box<RawValue> {
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4 + 2);
    text.push('"');
    base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut text);
    text.push('"');
    // Quoted base64 is always a JSON string.
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// `PodDefault team-a/a, PodDefault team-a/b`.
pub fn join(policies: &[PolicyRef]) -> String {
    policies
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Cuts a warning to [`MAX_WARNING_CHARS`], marking the cut with `...`.
fn shorten(warning: String) -> String {
    if warning.chars().count() <= MAX_WARNING_CHARS {
        return warning;
    }
    let mut short: String = warning.chars().take(MAX_WARNING_CHARS - 3).collect();
    short.push_str("...");
    short
}

/// The body of an HTTP error response: `{"error": "..."}`.
pub fn error_body(message: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_warnings_are_cut_below_120_characters() {
        let long = "é".repeat(300);
        let short = shorten(long);
        assert_eq!(short.chars().count(), MAX_WARNING_CHARS);
        assert!(short.ends_with("..."));
        assert_eq!(shorten("fine".to_owned()), "fine");
    }
}
