//! The AdmissionReview `admission.k8s.io/v1` protocol: reading a review, deciding it with the
//! engine, and writing outfit's own response.
//!
//! The response is our own type rather than kube-rs's, whose `patch` is encoded as an array of
//! numbers (kube-rs#1781); the API server documents base64. The request is read borrowing from the
//! body: `request.object` is handed to the engine as raw JSON, which PodDefaults read in place and
//! Gatekeeper mutators parse into a `serde_json::Value` only when there are any (never a typed
//! round trip, which would drop unknown and null fields); `oldObject` and every other field outfit
//! does not need is skipped without being built.

use std::{borrow::Cow, fmt::Write as _, sync::LazyLock};

use base64::Engine as _;
use outfit_core::{
    DenialReason, Object, ObjectView, Operation, Outcome, PolicyRef, PolicySet, Request, UserInfo,
};
use serde::{Deserialize, Serialize, de::IgnoredAny};
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
    /// Bytes that are not UTF-8 (JSON is UTF-8).
    #[error("the body is not UTF-8, so not JSON")]
    NotUtf8,
    /// An operation other than CREATE, UPDATE, DELETE and CONNECT.
    #[error("unknown operation {0:?}; expected CREATE, UPDATE, DELETE or CONNECT")]
    Operation(String),
}

/// The review, with `request.object` read as `O`: a view in the same pass (the fast path), or raw
/// text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
struct ReviewIn<'a, O> {
    #[serde(borrow, default)]
    api_version: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
    /// Boxed so that deserializing does not move the whole request (view included) through
    /// several frames by value.
    #[serde(borrow)]
    request: Option<Box<RequestIn<'a, O>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
struct RequestIn<'a, O> {
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
    #[serde(borrow)]
    user_info: Option<UserInfoIn<'a>>,
    object: Option<O>,
    #[serde(default)]
    dry_run: bool,
}

/// Only `request.object`, as text: found again in the body when a policy needs the whole object.
#[derive(Deserialize)]
struct ObjectTextIn<'a> {
    #[serde(borrow)]
    request: Option<ObjectTextRequestIn<'a>>,
}

#[derive(Deserialize)]
struct ObjectTextRequestIn<'a> {
    #[serde(borrow)]
    object: Option<&'a RawValue>,
}

/// How `request.object` was read with the review.
trait ReadObject<'a> {
    /// The object as the engine takes it; `json` finds its text in the body.
    fn engine_object<'x>(&'x self, json: &'x dyn Fn() -> Option<&'x RawValue>) -> Object<'x>
    where
        'a: 'x;
    /// `metadata.generateName`, for the log line, or where to find it.
    fn generate_name(&self) -> GenerateName<'a>;
}

impl<'a> ReadObject<'a> for ObjectView<'a> {
    fn engine_object<'x>(&'x self, json: &'x dyn Fn() -> Option<&'x RawValue>) -> Object<'x>
    where
        'a: 'x,
    {
        Object::Read { view: self, json }
    }

    fn generate_name(&self) -> GenerateName<'a> {
        GenerateName::Read(ObjectView::generate_name(self))
    }
}

impl<'a> ReadObject<'a> for &'a RawValue {
    fn engine_object<'x>(&'x self, _: &'x dyn Fn() -> Option<&'x RawValue>) -> Object<'x>
    where
        'a: 'x,
    {
        Object::Json(self)
    }

    fn generate_name(&self) -> GenerateName<'a> {
        GenerateName::InText(self)
    }
}

#[derive(Deserialize)]
struct KindIn<'a> {
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
}

#[derive(Deserialize)]
struct UserInfoIn<'a> {
    #[serde(borrow, default)]
    username: Cow<'a, str>,
    #[serde(borrow, default)]
    groups: Vec<GroupIn<'a>>,
}

/// A group name, borrowed from the body (serde borrows a `Cow<str>` only as a field of its own).
#[derive(Deserialize)]
struct GroupIn<'a>(#[serde(borrow)] Cow<'a, str>);

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
    status: Option<StatusOut<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    #[serde(skip_serializing_if = "AuditAnnotation::is_none")]
    audit_annotations: AuditAnnotation<'a>,
}

/// `auditAnnotations`: outfit writes at most one, naming the policies; none when there are none.
struct AuditAnnotation<'a>(Option<(&'static str, &'a str)>);

impl<'a> AuditAnnotation<'a> {
    fn new(key: &'static str, policies: &'a str) -> Self {
        Self((!policies.is_empty()).then_some((key, policies)))
    }

    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl Serialize for AuditAnnotation<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(usize::from(self.0.is_some())))?;
        if let Some((key, value)) = self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A `metav1.Status` for denials.
#[derive(Serialize)]
struct StatusOut<'a> {
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    code: u16,
}

/// `metadata.generateName` of an object whose request has no name yet (a controller asked the
/// API server to generate one): read with the review, or left in the object's text, read only if
/// the log line is written.
#[derive(Debug, Clone, Default)]
pub enum GenerateName<'a> {
    /// No object, or the request names it.
    #[default]
    None,
    /// Read with the review.
    Read(Option<Cow<'a, str>>),
    /// In this text, not read yet.
    InText(&'a RawValue),
}

impl GenerateName<'_> {
    /// The name, reading the object's text if it was not read with the review.
    pub fn get(&self) -> Option<Cow<'_, str>> {
        match self {
            GenerateName::None => None,
            GenerateName::Read(name) => name.as_deref().map(Cow::Borrowed),
            GenerateName::InText(text) => {
                let view: ObjectView<'_> = serde_json::from_str(text.get()).ok()?;
                view.generate_name().map(|name| Cow::Owned(name.into_owned()))
            }
        }
    }
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
    /// `request.name`; empty when the API server is to generate it.
    pub name: Cow<'a, str>,
    /// The object's `generateName` when `name` is empty.
    pub generate_name: GenerateName<'a>,
    /// `request.kind.kind` plus `/subResource` if any.
    pub kind: Cow<'a, str>,
    /// `request.operation`.
    pub operation: Cow<'a, str>,
    /// `request.dryRun`.
    pub dry_run: bool,
    /// The policies that applied (mutated) or denied, as the audit annotation names them:
    /// `PodDefault team-a/a, PodDefault team-a/b`.
    pub policies: String,
    /// The denial message, when denied.
    pub message: Option<String>,
    /// Denied because the patch would have passed the policy set's bound
    /// (`PolicySet::max_patch_bytes`).
    pub patch_too_large: bool,
}

/// Reads an AdmissionReview body and decides it with `policies`.
pub fn review<'a>(body: &'a [u8], policies: &PolicySet) -> Result<Answer<'a>, InvalidReview> {
    // UTF-8 is checked once for the whole body (JSON is UTF-8), so that reading each string after
    // that need not check it again.
    let Ok(text) = std::str::from_utf8(body) else {
        // serde_json reports where the body stops being UTF-8.
        return Err(serde_json::from_slice::<IgnoredAny>(body)
            .err()
            .map_or(InvalidReview::NotUtf8, InvalidReview::Json));
    };
    // One pass reads the review and what policies need of the object; with no policies, the
    // object is only skipped. A body the view refuses (a key repeated inside what it reads, which
    // the API server never sends) is read again with the object kept as text; that reading's
    // error is the one reported for a body that is not a review at all.
    if !policies.is_empty()
        && let Ok(review) = serde_json::from_str::<ReviewIn<'a, ObjectView<'a>>>(text)
    {
        return decide(review, text, policies);
    }
    decide(
        serde_json::from_str::<ReviewIn<'a, &'a RawValue>>(text)?,
        text,
        policies,
    )
}

fn decide<'a, O: ReadObject<'a>>(
    review: ReviewIn<'a, O>,
    body: &'a str,
    policies: &PolicySet,
) -> Result<Answer<'a>, InvalidReview> {
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
    let mut answer = Answer::new(&request);

    // DELETE and CONNECT carry no object to mutate (or an options object): allowed untouched; so
    // is everything when no policy is loaded.
    let object = match (operation, &request.object) {
        (Operation::Create | Operation::Update, Some(object)) if !policies.is_empty() => object,
        _ => {
            answer.body = allow(&request.uid, None, Vec::new(), "");
            return Ok(answer);
        }
    };
    let user = request.user_info.map(|user| UserInfo {
        username: user.username,
        groups: user.groups.into_iter().map(|group| group.0).collect(),
    });
    let json = || {
        let found: ObjectTextIn<'_> = serde_json::from_str(body).ok()?;
        found.request?.object
    };
    let engine_request = Request {
        object: object.engine_object(&json),
        namespace: &request.namespace,
        operation,
        user: user.as_ref(),
    };
    if answer.name.is_empty() {
        answer.generate_name = object.generate_name();
    }
    answer.record(
        &request.uid,
        policies.apply(&engine_request),
        policies.max_patch_bytes(),
    );
    Ok(answer)
}

impl<'a> Answer<'a> {
    /// An untouched allow for `request`, until decided otherwise.
    fn new<O>(request: &RequestIn<'a, O>) -> Self {
        let kind = request.kind.as_ref().map(|k| k.kind.clone()).unwrap_or_default();
        let kind = if request.sub_resource.is_empty() {
            kind
        } else {
            Cow::Owned(format!("{kind}/{}", request.sub_resource))
        };
        Answer {
            body: Vec::new(),
            outcome: RequestOutcome::Allowed,
            uid: request.uid.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            generate_name: GenerateName::None,
            kind,
            operation: request.operation.clone(),
            dry_run: request.dry_run,
            policies: String::new(),
            message: None,
            patch_too_large: false,
        }
    }

    /// `Pod team-a/web-0` (the `generateName` prefix when the API server is still to name it;
    /// no namespace for a cluster-scoped object), for messages.
    fn object(&self) -> String {
        let name = match self.generate_name.get() {
            Some(prefix) if self.name.is_empty() => prefix.into_owned(),
            _ => self.name.clone().into_owned(),
        };
        if self.namespace.is_empty() {
            format!("{} {name}", self.kind)
        } else {
            format!("{} {}/{name}", self.kind, self.namespace)
        }
    }

    /// Writes the engine's decision into the response body; a patch that passes
    /// `max_patch_bytes` as it is written turns the admission into a denial.
    fn record(&mut self, uid: &str, outcome: Outcome<'_>, max_patch_bytes: usize) {
        match outcome {
            Outcome::Admitted(admission) => {
                let patch = if admission.is_unchanged() {
                    None
                } else {
                    match admission.patch_json_within(max_patch_bytes) {
                        Ok(patch) => Some(patch),
                        Err(too_large) => {
                            let policies = admission.applied.iter().map(|p| (**p).clone()).collect();
                            let denial = too_large.denial(&self.object(), policies);
                            return self.record(uid, Outcome::Denied(denial), max_patch_bytes);
                        }
                    }
                };
                if patch.is_some() {
                    self.outcome = RequestOutcome::Mutated;
                }
                self.policies = join(admission.applied.iter().map(|a| &**a));
                self.body = allow(uid, patch.as_deref(), admission.warnings, &self.policies);
            }
            Outcome::Denied(denial) => {
                let (code, reason) = match denial.reason {
                    DenialReason::Policy => (403, "Forbidden"),
                    DenialReason::UnreadableObject => (400, "BadRequest"),
                    // metav1's StatusReasonRequestEntityTooLarge: what the API server would
                    // answer to a request the size of the patched object.
                    DenialReason::PatchTooLarge => (413, "RequestEntityTooLarge"),
                    DenialReason::Internal => (500, "InternalError"),
                };
                self.policies = join(denial.policies.iter());
                self.body = deny(uid, &denial.message, code, reason, &self.policies);
                self.outcome = RequestOutcome::Denied;
                self.patch_too_large = denial.reason == DenialReason::PatchTooLarge;
                self.message = Some(denial.message);
            }
        }
    }
}

fn allow(uid: &str, patch: Option<&[u8]>, warnings: Vec<String>, applied: &str) -> Vec<u8> {
    let audit_annotations = AuditAnnotation::new(AUDIT_APPLIED, applied);
    let response = ResponseOut {
        uid,
        allowed: true,
        status: None,
        warnings: warnings.into_iter().map(shorten).collect(),
        audit_annotations,
    };
    let mut body = encode(response, patch.map_or(0, base64_len));
    if let Some(patch) = patch {
        append_patch(&mut body, patch);
    }
    body
}

/// Adds `"patchType":"JSONPatch","patch":"<base64>"` as the last members of `response` in an
/// encoded review (which ends with the `}}` closing `response` and the review). The base64 is
/// written straight into the body: its alphabet needs no JSON escaping, so it need not go through
/// the serializer's character-by-character escaping, nor be copied once more.
fn append_patch(body: &mut Vec<u8>, patch: &[u8]) {
    debug_assert!(body.ends_with(b"}}"));
    body.truncate(body.len() - 2);
    body.extend_from_slice(br#","patchType":"JSONPatch","patch":""#);
    let start = body.len();
    body.resize(start + base64_len(patch), 0);
    // The buffer was sized for exactly this output.
    let _ = BASE64.encode_slice(patch, &mut body[start..]);
    body.extend_from_slice(br#""}}"#);
}

/// Standard base64 with padding, with AVX2 or NEON where the CPU has them (detected once): several
/// times faster than the scalar engine on the patches outfit sends.
static BASE64: LazyLock<base64::engine::Simd> =
    LazyLock::new(|| base64::engine::Simd::standard(base64::engine::general_purpose::PAD));

fn base64_len(bytes: &[u8]) -> usize {
    bytes.len().div_ceil(3) * 4
}

fn deny(uid: &str, message: &str, code: u16, reason: &'static str, policies: &str) -> Vec<u8> {
    let audit_annotations = AuditAnnotation::new(AUDIT_DENIED, policies);
    let response = ResponseOut {
        uid,
        allowed: false,
        status: Some(StatusOut {
            status: "Failure",
            message,
            reason,
            code,
        }),
        warnings: Vec::new(),
        audit_annotations,
    };
    encode(response, 0)
}

/// The review around `response`, with `room` more bytes reserved for what is appended after.
fn encode(response: ResponseOut<'_>, room: usize) -> Vec<u8> {
    let review = ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    let mut body = Vec::with_capacity(256 + room);
    // Strings, booleans and maps of strings always serialize.
    let _ = serde_json::to_writer(&mut body, &review);
    body
}

/// `PodDefault team-a/a, PodDefault team-a/b`.
pub fn join<'r>(policies: impl ExactSizeIterator<Item = &'r PolicyRef>) -> String {
    let mut joined = String::with_capacity(policies.len() * 40);
    for (i, policy) in policies.enumerate() {
        if i > 0 {
            joined.push_str(", ");
        }
        // Writing to a String cannot fail.
        let _ = write!(joined, "{policy}");
    }
    joined
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
    use outfit_core::{Document, vocab::Origin};
    use serde_json::{Value, json};

    use super::*;

    /// A set of one PodDefault for every pod of `team-a`, its patch bounded by `limit`.
    fn bounded_set(spec: Value, limit: usize) -> PolicySet {
        let mut builder = PolicySet::builder().max_patch_bytes(limit);
        let policy = json!({"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
                            "metadata": {"name": "pd", "namespace": "team-a", "resourceVersion": "1"},
                            "spec": spec});
        builder
            .add(&Document {
                origin: Origin::named("test"),
                value: policy,
            })
            .expect("a valid PodDefault");
        builder.build().0
    }

    /// A review of the pod `team-a/p` with `containers` containers.
    fn review_of(containers: usize) -> Vec<u8> {
        let containers: Vec<Value> = (0..containers)
            .map(|i| json!({"name": format!("c{i}"), "image": "busybox"}))
            .collect();
        serde_json::to_vec(&json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "name": "p", "namespace": "team-a", "operation": "CREATE",
                        "object": {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": "p", "namespace": "team-a"},
                                   "spec": {"containers": containers}}}
        }))
        .expect("JSON")
    }

    fn response(answer: &Answer<'_>) -> Value {
        serde_json::from_slice::<Value>(&answer.body).expect("a JSON review")["response"].clone()
    }

    fn assert_refused_for_size(answer: &Answer<'_>, limit: usize) {
        let response = response(answer);
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["code"], 413, "{response}");
        assert_eq!(response["status"]["reason"], "RequestEntityTooLarge");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Pod team-a/p") && message.contains(&format!("would exceed {limit} bytes")),
            "{message}"
        );
        assert_eq!(response.get("patch"), None);
        assert_eq!(response["auditAnnotations"][AUDIT_DENIED], "PodDefault team-a/pd");
        assert_eq!(answer.outcome, RequestOutcome::Denied);
        assert!(answer.patch_too_large);
    }

    /// Every container gets the env: the patch grows with the pod, and planning stops at the
    /// bound.
    #[test]
    fn a_review_whose_patch_would_pass_the_bound_is_refused_with_413_naming_the_pod() {
        let env = json!({"selector": {}, "env": [{"name": "A_NAME", "value": "a value"}]});
        let body = review_of(2000);
        let answer = review(&body, &bounded_set(env, 10_000)).expect("a review");
        assert_refused_for_size(&answer, 10_000);
    }

    /// One volume for the whole pod: nothing to stop while planning, so the bound is met while
    /// the patch is written.
    #[test]
    fn a_patch_that_passes_the_bound_as_it_is_written_is_refused_too() {
        let volume =
            json!({"selector": {}, "volumes": [{"name": "v", "emptyDir": {"medium": "x".repeat(400)}}]});
        let body = review_of(1);
        let answer = review(&body, &bounded_set(volume, 200)).expect("a review");
        assert_refused_for_size(&answer, 200);
    }

    #[test]
    fn a_patch_within_the_bound_is_sent_unchanged() {
        let env = json!({"selector": {}, "env": [{"name": "A_NAME", "value": "a value"}]});
        let body = review_of(2000);
        let unbounded = review(&body, &bounded_set(env.clone(), usize::MAX)).expect("a review");
        let patch = response(&unbounded)["patch"]
            .as_str()
            .expect("a patch")
            .to_owned();
        let size = BASE64.decode(&patch).expect("base64").len();
        let within = review(&body, &bounded_set(env, size)).expect("a review");
        assert_eq!(within.outcome, RequestOutcome::Mutated);
        assert!(!within.patch_too_large);
        assert_eq!(response(&within)["patch"], patch.as_str());
    }

    #[test]
    fn long_warnings_are_cut_below_120_characters() {
        let long = "é".repeat(300);
        let short = shorten(long);
        assert_eq!(short.chars().count(), MAX_WARNING_CHARS);
        assert!(short.ends_with("..."));
        assert_eq!(shorten("fine".to_owned()), "fine");
    }
}
