//! What the engine decides on: one object to admit ([`Request`]), and what it answers
//! ([`Outcome`]: an [`Admission`] with its patch, or a [`Denial`]). Every policy family reads the
//! request and writes into the admission; the engine (`engine`) runs them in the kinds table's
//! order.

use std::{borrow::Cow, fmt};

use json_patch::Patch;
use serde_json::{Value, value::RawValue};

pub use crate::patch::PatchTooLarge;
use crate::{
    patch::Changes,
    view::ObjectView,
    vocab::{Operation, PolicyRef},
};

/// A policy that changed an object: borrowed from the policy set that decided it, so that
/// naming the policies costs no copy on the admission path.
pub type AppliedPolicy<'p> = Cow<'p, PolicyRef>;

/// The requesting user, from `AdmissionRequest.userInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo<'a> {
    /// `userInfo.username`.
    pub username: Cow<'a, str>,
    /// `userInfo.groups`.
    pub groups: Vec<Cow<'a, str>>,
}

/// The object to admit, as the caller has it.
#[derive(Clone, Copy)]
pub enum Object<'a> {
    /// JSON text, as a webhook receives `request.object`. PodDefaults read it in place; it is
    /// parsed into a `Value` only when a Gatekeeper mutator may apply.
    Json(&'a RawValue),
    /// A parsed object, as the CLI reads manifests.
    Value(&'a Value),
    /// Read in the same pass as the document around it (the webhook reads it with the review):
    /// `json` gives the object's whole text when a policy needs more than the view.
    Read {
        /// The view read with the document.
        view: &'a ObjectView<'a>,
        /// The object's text, found again in the document.
        json: &'a dyn Fn() -> Option<&'a RawValue>,
    },
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Object::Json(json) => f.debug_tuple("Json").field(json).finish(),
            Object::Value(value) => f.debug_tuple("Value").field(value).finish(),
            Object::Read { view, .. } => f.debug_struct("Read").field("view", view).finish_non_exhaustive(),
        }
    }
}

impl<'a> From<&'a Value> for Object<'a> {
    fn from(value: &'a Value) -> Self {
        Object::Value(value)
    }
}

impl<'a> From<&'a RawValue> for Object<'a> {
    fn from(json: &'a RawValue) -> Self {
        Object::Json(json)
    }
}

/// One object to admit.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The raw object (`request.object`).
    pub object: Object<'a>,
    /// The request's namespace, used when the object names none (pods created by controllers).
    pub namespace: &'a str,
    /// The operation.
    pub operation: Operation,
    /// The requesting user, when known.
    pub user: Option<&'a UserInfo<'a>>,
}

impl<'a> Request<'a> {
    /// A CREATE of `object` in `namespace` by an unknown user: what the offline tools, tests and
    /// benchmarks ask. Another operation or a user: `Request { operation, ..Request::create(..) }`.
    pub fn create(object: impl Into<Object<'a>>, namespace: &'a str) -> Self {
        Self {
            object: object.into(),
            namespace,
            operation: Operation::Create,
            user: None,
        }
    }
}

/// An admitted object. Borrows from the [`PolicySet`] that decided it: the values its patch adds
/// are the policies' own.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission<'p> {
    /// RFC 6902 operations that turn the input into the admitted object (empty when unchanged).
    pub(crate) changes: Changes<'p>,
    /// The policies that applied, in application order.
    pub applied: Vec<AppliedPolicy<'p>>,
    /// Messages for the requesting user.
    pub warnings: Vec<String>,
}

impl Admission<'_> {
    pub(crate) fn unchanged() -> Self {
        Self {
            changes: Changes::default(),
            applied: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Whether the object is admitted as it came.
    pub fn is_unchanged(&self) -> bool {
        self.changes.is_empty()
    }

    /// The RFC 6902 patch that turns the request object into the admitted one (empty when
    /// unchanged), as a `json_patch::Patch` (a copy: [`Admission::patch_json`] is cheaper when
    /// only the JSON is needed).
    pub fn patch(&self) -> Patch {
        self.changes.to_patch()
    }

    /// The same admission, no longer borrowing from the policy set (its patch values copied).
    pub fn into_owned(self) -> Admission<'static> {
        Admission {
            changes: self.changes.into_owned(),
            applied: self
                .applied
                .into_iter()
                .map(|a| Cow::Owned(a.into_owned()))
                .collect(),
            warnings: self.warnings,
        }
    }

    /// The patch as JSON, serialized straight from the policies' values.
    pub fn patch_json(&self) -> Vec<u8> {
        let mut json = Vec::with_capacity(self.changes.json_len_hint());
        // No bound, so never too large.
        let _ = self.changes.write_json(&mut json, usize::MAX);
        json
    }

    /// The patch as JSON, as [`Admission::patch_json`], or `PatchTooLarge` as soon as what is
    /// written passes `limit` bytes: a patch too large to send is never written whole (nor its
    /// buffer sized for the whole of it).
    pub fn patch_json_within(&self, limit: usize) -> Result<Vec<u8>, PatchTooLarge> {
        let mut json = Vec::with_capacity(self.changes.json_len_hint().min(limit.saturating_add(1)));
        self.changes.write_json(&mut json, limit)?;
        Ok(json)
    }

    /// The admitted object. `original` must be the request's object: unless the engine kept the
    /// mutated object (a family that works on whole objects ran), it is built here by applying the
    /// patch to a copy (the webhook only needs the patch, so it never pays for this).
    pub fn object<'a>(&'a self, original: &'a Value) -> Result<Cow<'a, Value>, json_patch::PatchError> {
        if self.changes.is_empty() {
            return Ok(Cow::Borrowed(original));
        }
        if let Some(mutated) = self.changes.mutated() {
            return Ok(Cow::Borrowed(mutated));
        }
        let mut object = original.clone();
        json_patch::patch(&mut object, &self.changes.to_patch())?;
        Ok(Cow::Owned(object))
    }
}

impl<'p> Admission<'p> {
    /// For a family's step that works on a whole object: `mutated` is the request's object
    /// (`original`) as the earlier steps and this one left it, and `applied` the policies of this
    /// step that changed it. The patch becomes the diff of the two, replacing the earlier steps'
    /// operations (they are part of `mutated`), and keeps `mutated` to read its values from.
    pub fn record(
        &mut self,
        original: &Value,
        mutated: Value,
        applied: impl IntoIterator<Item = AppliedPolicy<'p>>,
    ) {
        let before = self.applied.len();
        self.applied.extend(applied);
        if self.applied.len() > before {
            self.changes = Changes::between(original, mutated);
        }
    }
}

impl Request<'_> {
    /// The object as a `Value`: borrowed when the caller has one, else parsed from its text (for
    /// a family's step that works on a whole object).
    pub fn object_value(&self) -> Result<Cow<'_, Value>, Denial> {
        let text = match self.object {
            Object::Value(value) => return Ok(Cow::Borrowed(value)),
            Object::Json(json) => json,
            Object::Read { json, .. } => json().ok_or_else(no_text)?,
        };
        serde_json::from_str(text.get())
            .map(Cow::Owned)
            .map_err(|e| unreadable(&e))
    }
}

/// A refused object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The whole reason, for the user.
    pub message: String,
    /// The policies involved.
    pub policies: Vec<PolicyRef>,
    /// What kind of refusal this is.
    pub reason: DenialReason,
}

/// Why an object was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenialReason {
    /// Policies refused it (conflicts, a malformed field they must merge into, a failed mutation).
    Policy,
    /// outfit could not read the object into the form a policy that may apply needs (nested deeper
    /// than serde_json's limit of 128 levels): the request, not a policy, is at fault.
    UnreadableObject,
    /// The patch would pass the set's bound ([`PatchTooLarge`]): the object asks for more than
    /// outfit will send.
    PatchTooLarge,
    /// A bug in outfit.
    Internal,
}

impl PatchTooLarge {
    /// The refusal of `object` (`Pod team-a/web-0`), naming the `policies` that would have
    /// patched it.
    pub fn denial(self, object: &str, policies: Vec<PolicyRef>) -> Denial {
        Denial {
            message: format!(
                "outfit refuses {object}: the patch its policies make would exceed {} bytes, outfit's bound on a patch (the API server accepts requests of at most 3 MiB)",
                self.limit
            ),
            policies,
            reason: DenialReason::PatchTooLarge,
        }
    }
}

/// The decision for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<'p> {
    /// Admitted, possibly mutated.
    Admitted(Admission<'p>),
    /// Denied.
    Denied(Denial),
}

impl Outcome<'_> {
    /// The same outcome, no longer borrowing from the policy set.
    pub fn into_owned(self) -> Outcome<'static> {
        match self {
            Outcome::Admitted(admission) => Outcome::Admitted(admission.into_owned()),
            Outcome::Denied(denial) => Outcome::Denied(denial),
        }
    }
}

/// The caller's object text could not be found again: a bug, reported rather than a panic.
pub(crate) fn no_text() -> Denial {
    Denial {
        message: "outfit internal error: the object's text is not available; please report this".into(),
        policies: Vec::new(),
        reason: DenialReason::Internal,
    }
}

pub(crate) fn unreadable(error: &serde_json::Error) -> Denial {
    Denial {
        message: format!("outfit cannot read the object: {error}"),
        policies: Vec::new(),
        reason: DenialReason::UnreadableObject,
    }
}

/// A patch outfit built that does not apply to its own input: a bug, reported rather than a panic.
pub(crate) fn internal_denial(error: &json_patch::PatchError) -> Denial {
    Denial {
        message: format!("outfit internal error: its own patch does not apply ({error}); please report this"),
        policies: Vec::new(),
        reason: DenialReason::Internal,
    }
}

/// An object's kind, namespace and name as messages show them: `object` and `<unnamed>` where
/// absent, the name falling back on `generateName` (a controller's pod before the API server
/// names it).
pub(crate) struct Named<'a> {
    pub(crate) kind: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
}

/// The namespace an object names (`metadata.namespace`, when not empty).
pub(crate) fn object_namespace(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
}

impl<'a> Named<'a> {
    pub(crate) fn of(object: &'a Value) -> Self {
        let field = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        Self {
            kind: field("/kind").unwrap_or("object"),
            namespace: object_namespace(object),
            name: field("/metadata/name")
                .or_else(|| field("/metadata/generateName"))
                .unwrap_or("<unnamed>"),
        }
    }
}

/// `<kind> <namespace>/<name>` for messages; `default_namespace` where the object names none.
pub fn describe(object: &Value, default_namespace: &str) -> String {
    let Named {
        kind,
        namespace,
        name,
    } = Named::of(object);
    format!("{kind} {}/{name}", namespace.unwrap_or(default_namespace))
}
