//! Applying a [`PolicySet`] to one object: the admission decision shared by `outfit mutate` and
//! `outfit serve`.
//!
//! Order: PodDefaults first (on pod CREATE, as Kubeflow registers its webhook), then the Gatekeeper
//! mutators on the result (on CREATE and UPDATE, as Gatekeeper's webhook), in Gatekeeper's own
//! order and convergence loop. PodDefaults read the raw request object and emit RFC 6902
//! operations against it without copying it; the Gatekeeper step copies the object only once a
//! mutator is known to change it, and when it does, the patch is the diff of the request object
//! against the result.
//! Whatever no policy touched (unknown fields, nulls, integer formatting, key order) is left
//! exactly as it came.

use std::{borrow::Cow, fmt};

use json_patch::Patch;
use serde_json::{Value, value::RawValue};

use crate::{
    gatekeeper::{MutationError, system::RunInput},
    patch::Changes,
    poddefault::{self, Conflict, EXCLUDE_ANNOTATION, MIRROR_POD_ANNOTATION, MergeError, PodText},
    policy_set::{AppliedPolicy, PolicySet},
    view::{ObjectView, pod::PodView, raw_str},
    vocab::{Operation, PolicyKind, PolicyRef},
};

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

/// An admitted object. Borrows from the [`PolicySet`] that decided it: the values its patch adds
/// are the policies' own.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission<'p> {
    /// RFC 6902 operations that turn the input into the admitted object (empty when unchanged).
    changes: Changes<'p>,
    /// The policies that applied, in application order.
    pub applied: Vec<AppliedPolicy<'p>>,
    /// Messages for the requesting user.
    pub warnings: Vec<String>,
    /// The mutated object, kept when the engine had to build it anyway.
    mutated: Option<Value>,
}

impl Admission<'_> {
    pub(crate) fn unchanged() -> Self {
        Self {
            changes: Changes::default(),
            applied: Vec::new(),
            warnings: Vec::new(),
            mutated: None,
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
            mutated: self.mutated,
        }
    }

    /// The patch as JSON, serialized straight from the policies' values.
    pub fn patch_json(&self) -> Vec<u8> {
        let mut json = Vec::with_capacity(self.changes.json_len_hint());
        self.changes.write_json(&mut json);
        json
    }

    /// The admitted object. `original` must be the request's object: unless the engine kept the
    /// mutated object, it is built here by applying the patch to a copy (the webhook only needs the
    /// patch, so it never pays for this).
    pub fn object<'a>(&'a self, original: &'a Value) -> Result<Cow<'a, Value>, json_patch::PatchError> {
        if self.changes.is_empty() {
            return Ok(Cow::Borrowed(original));
        }
        if let Some(mutated) = &self.mutated {
            return Ok(Cow::Borrowed(mutated));
        }
        let mut object = original.clone();
        json_patch::patch(&mut object, &self.changes.to_patch())?;
        Ok(Cow::Owned(object))
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
    /// A bug in outfit.
    Internal,
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

impl PolicySet {
    /// Decides one object: applies every matching policy, or denies it when they conflict.
    pub fn apply(&self, request: &Request<'_>) -> Outcome<'_> {
        let mut admission = Admission::unchanged();
        if let Err(denial) = self.apply_pod_defaults(request, &mut admission) {
            return Outcome::Denied(denial);
        }
        if let Err(denial) = self.apply_gatekeeper(request, &mut admission) {
            return Outcome::Denied(denial);
        }
        Outcome::Admitted(admission)
    }

    /// The PodDefault step: adds its operations and the PodDefaults applied to `admission`.
    pub(crate) fn apply_pod_defaults<'p>(
        &'p self,
        request: &Request<'_>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if request.operation != Operation::Create || self.count(PolicyKind::PodDefault) == 0 {
            return Ok(());
        }
        match request.object {
            Object::Json(json) => match PodView::parse(json.get()) {
                Ok(view) => self.plan_pod_defaults(&view, &|| Some(json), request.namespace, admission),
                Err(_) => {
                    // A key repeated where the view reads: read the text as a `Value` does (the
                    // last one wins) and plan against that. The API server never sends such text.
                    let value: Value = serde_json::from_str(json.get()).map_err(|e| unreadable(&e))?;
                    self.plan_value(&value, request.namespace, admission)
                }
            },
            Object::Read { view, json } => {
                self.plan_pod_defaults(&view.0, json, request.namespace, admission)
            }
            Object::Value(value) => self.plan_value(value, request.namespace, admission),
        }
    }

    fn plan_value<'p>(
        &'p self,
        value: &Value,
        namespace: &str,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        let json = serde_json::value::to_raw_value(value).map_err(|e| unreadable(&e))?;
        let view = PodView::parse(json.get()).map_err(|e| unreadable(&e))?;
        self.plan_pod_defaults(&view, &|| Some(&*json), namespace, admission)
    }

    /// Matches and merges the PodDefaults for one object read as a view.
    fn plan_pod_defaults<'p, 't>(
        &'p self,
        pod: &PodView<'_>,
        json: &'t dyn Fn() -> Option<&'t RawValue>,
        request_namespace: &str,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        if !pod.is_pod() {
            return Ok(());
        }
        let metadata = pod.metadata();
        let annotations = metadata.and_then(|m| m.annotations.get());
        if let Some(annotations) = annotations {
            let excluded = annotations.get(EXCLUDE_ANNOTATION).and_then(raw_str).as_deref() == Some("true");
            if excluded || annotations.get(MIRROR_POD_ANNOTATION).is_some() {
                return Ok(());
            }
        }
        let namespace = metadata
            .and_then(|m| m.namespace.as_deref())
            .filter(|ns| !ns.is_empty())
            .unwrap_or(request_namespace);
        let labels = metadata.and_then(|m| m.labels.get());
        let mut matching = self.matching_pod_defaults(namespace, labels);
        // Kubeflow registers its webhook without reinvocation: it applies a PodDefault to a pod
        // once. A pod that records this very version of a PodDefault as applied (its marker
        // annotation, valued with the PodDefault's resourceVersion) is one outfit sees again,
        // after another mutation changed it; applying the PodDefault again could only conflict
        // with what that mutation did to its entries (a Gatekeeper mutator rewriting its sidecar's
        // image) or add to containers it added.
        if let Some(annotations) = annotations {
            matching.retain(|pd| !pd.recorded_in(annotations));
        }
        if matching.is_empty() {
            return Ok(());
        }
        let text = PodText::new(json);
        match poddefault::plan(pod, &text, &matching) {
            Ok(plan) => {
                admission.changes = Changes::Adds(plan.into_ops(pod));
                admission
                    .applied
                    .extend(matching.iter().map(|pd| Cow::Borrowed(pd.reference())));
                Ok(())
            }
            Err(error) => Err(pod_default_denial(pod.name(), &matching, error)),
        }
    }
}

/// The caller's object text could not be found again: a bug, reported rather than a panic.
fn no_text() -> Denial {
    Denial {
        message: "outfit internal error: the object's text is not available; please report this".into(),
        policies: Vec::new(),
        reason: DenialReason::Internal,
    }
}

fn unreadable(error: &serde_json::Error) -> Denial {
    Denial {
        message: format!("outfit cannot read the object: {error}"),
        policies: Vec::new(),
        reason: DenialReason::UnreadableObject,
    }
}

impl PolicySet {
    /// Gatekeeper mutators, after PodDefaults, on CREATE and UPDATE (as Gatekeeper's webhook).
    /// The Gatekeeper step, on the object as the PodDefaults left it. Its operations follow the
    /// PodDefaults' ones in `admission.patch`.
    fn apply_gatekeeper<'p>(
        &'p self,
        request: &Request<'_>,
        admission: &mut Admission<'p>,
    ) -> Result<(), Denial> {
        let mutators = self.gatekeeper_mutators();
        // As Gatekeeper's webhook: CREATE and UPDATE only. Checked before the object is parsed.
        if mutators.is_empty() || !matches!(request.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let parsed;
        let parse = |json: &RawValue| serde_json::from_str::<Value>(json.get()).map_err(|e| unreadable(&e));
        let original = match request.object {
            Object::Value(value) => value,
            Object::Json(json) => {
                parsed = parse(json)?;
                &parsed
            }
            Object::Read { json, .. } => {
                parsed = parse(json().ok_or_else(no_text)?)?;
                &parsed
            }
        };
        // The PodDefaults' result, when they changed anything (built by applying their own patch).
        let after_pod_defaults = match admission.object(original) {
            Ok(Cow::Owned(object)) => Some(object),
            Ok(Cow::Borrowed(_)) => None,
            Err(error) => return Err(internal_denial(&error)),
        };
        let namespace_labels = |namespace: &str| self.namespace_labels(namespace);
        let input = RunInput {
            namespace: request.namespace,
            operation: request.operation,
            namespace_labels: &namespace_labels,
        };
        let mut mutated = after_pod_defaults;
        let applied_before = admission.applied.len();
        mutators
            .run(original, &mut mutated, &input, &mut admission.applied)
            .map_err(|error| gatekeeper_denial(original, error))?;
        let gatekeeper_changed = admission.applied.len() > applied_before;
        if let Some(object) = mutated {
            // Gatekeeper mutates in place, so its operations are a diff; it replaces the
            // PodDefaults' operations rather than extending them, which would need a second copy of
            // the object to diff against.
            if gatekeeper_changed {
                admission.changes = Changes::Owned(json_patch::diff(original, &object));
            }
            admission.mutated = (!admission.changes.is_empty()).then_some(object);
        }
        Ok(())
    }
}

fn gatekeeper_denial(object: &Value, error: MutationError) -> Denial {
    let field = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let kind = field("/kind").unwrap_or("object");
    let name = field("/metadata/name")
        .or_else(|| field("/metadata/generateName"))
        .unwrap_or("<unnamed>");
    let policies = match &error {
        MutationError::Failed { mutator, .. } => vec![mutator.clone()],
        MutationError::NotConverging { mutators, .. } => mutators.clone(),
    };
    Denial {
        message: format!("gatekeeper mutation of {kind} {name}: {error}"),
        policies,
        reason: DenialReason::Policy,
    }
}

/// A patch outfit built that does not apply to its own input: a bug, reported rather than a panic.
fn internal_denial(error: &json_patch::PatchError) -> Denial {
    Denial {
        message: format!("outfit internal error: its own patch does not apply ({error}); please report this"),
        policies: Vec::new(),
        reason: DenialReason::Internal,
    }
}

/// Kubeflow's message, kept word for word up to `err:` so that existing alerts and searches still
/// match; what follows names each policy and field in conflict.
fn pod_default_denial(pod_name: &str, matching: &[&poddefault::PodDefault], error: MergeError) -> Denial {
    let names: Vec<&str> = matching.iter().map(|pd| pd.name()).collect();
    match error {
        MergeError::Malformed(what) => Denial {
            message: format!(
                "cannot apply poddefaults: {} on pod: {pod_name}: {what}",
                names.join(",")
            ),
            policies: matching.iter().map(|pd| pd.reference().clone()).collect(),
            reason: DenialReason::Policy,
        },
        MergeError::Conflicts(conflicts) => {
            let mut policies: Vec<PolicyRef> = matching
                .iter()
                .filter(|pd| conflicts.iter().any(|c| c.policy == pd.name()))
                .map(|pd| pd.reference().clone())
                .collect();
            policies.dedup();
            Denial {
                message: format!(
                    "conflict occurred while applying poddefaults: {} on pod: {pod_name} err: {}",
                    names.join(","),
                    aggregate(&conflicts)
                ),
                policies,
                reason: DenialReason::Policy,
            }
        }
    }
}

/// Formats errors as apimachinery's `utilerrors.NewAggregate` does: one alone, several in brackets.
fn aggregate(conflicts: &[Conflict]) -> String {
    match conflicts {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
