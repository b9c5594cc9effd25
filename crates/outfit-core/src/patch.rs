//! The RFC 6902 patch an admission produces, in the form that is cheapest to build and to send.
//!
//! PodDefaults only ever add, and what they add is a value of the policy itself: their operations
//! borrow those values from the [`PolicySet`](crate::PolicySet) and are serialized straight to
//! JSON for the webhook, with no copy of any value and no intermediate `json_patch::Patch`. A
//! `json_patch::Patch` is built on demand for callers that apply the patch themselves (the CLI, the
//! tests). When a Gatekeeper mutator changes the object, the patch is a diff of the request's
//! object against the mutated one, kept with the mutated object its values are read from.

use std::fmt::Write as _;

use json_patch::{
    AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, jsonptr::PointerBuf,
};
use serde_json::{Map, Value, value::RawValue};

use crate::{
    diff::{self, DiffKind, DiffOp, push_token},
    view::raw_value,
};

/// A patch that would pass the bound on its size (`PolicySetBuilder::max_patch_bytes`): the
/// policies add too much to this one object (a pod with 100,000 containers, each given env and
/// mounts). Found while the patch is planned or written, so that it is never built whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchTooLarge {
    /// The bound, in bytes of the patch's JSON.
    pub limit: usize,
}

/// The changes an admission makes to its object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Changes<'p> {
    /// `add` operations with values borrowed from the policies.
    Adds(Vec<AddOp<'p>>),
    /// The object as the policies left it, and the operations that turn the request's object
    /// into it, their values read from it when written.
    Diff {
        /// The operations.
        ops: Vec<DiffOp>,
        /// The mutated object.
        object: Value,
    },
    /// An owned patch: a copy of borrowed `add`s.
    Owned(Patch),
}

impl Default for Changes<'_> {
    fn default() -> Self {
        Changes::Adds(Vec::new())
    }
}

impl Changes<'_> {
    /// The changes that turn `original` into `mutated`.
    pub(crate) fn between(original: &Value, mutated: Value) -> Self {
        Changes::Diff {
            ops: diff::diff(original, &mutated),
            object: mutated,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Changes::Adds(ops) => ops.is_empty(),
            Changes::Diff { ops, .. } => ops.is_empty(),
            Changes::Owned(patch) => patch.0.is_empty(),
        }
    }

    /// The mutated object, when the changes keep it.
    pub(crate) fn mutated(&self) -> Option<&Value> {
        match self {
            Changes::Diff { object, .. } => Some(object),
            Changes::Adds(_) | Changes::Owned(_) => None,
        }
    }

    /// The same changes, owning their values.
    pub(crate) fn into_owned(self) -> Changes<'static> {
        match self {
            Changes::Adds(_) => Changes::Owned(self.to_patch()),
            Changes::Diff { ops, object } => Changes::Diff { ops, object },
            Changes::Owned(patch) => Changes::Owned(patch),
        }
    }

    /// Writes the patch as JSON, directly: constant keys as literals and the policies' values as
    /// the text rendered at load, so that only paths and map entries go through serde_json's
    /// escaping. (The tests check it against `json_patch`'s own serialization of [`to_patch`].)
    /// Stops as soon as `out` holds more than `limit` bytes: one comparison per operation.
    ///
    /// [`to_patch`]: Changes::to_patch
    pub(crate) fn write_json(&self, out: &mut Vec<u8>, limit: usize) -> Result<(), PatchTooLarge> {
        let within = |out: &Vec<u8>| {
            if out.len() > limit {
                Err(PatchTooLarge { limit })
            } else {
                Ok(())
            }
        };
        out.push(b'[');
        match self {
            Changes::Adds(ops) => {
                for (i, op) in ops.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(br#"{"op":"add","path":"#);
                    write_string(out, &op.path);
                    out.extend_from_slice(br#","value":"#);
                    op.value.write_json(out);
                    out.push(b'}');
                    within(out)?;
                }
            }
            Changes::Diff { ops, object } => {
                for (i, op) in ops.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_diff_op(op, object, out);
                    within(out)?;
                }
            }
            Changes::Owned(patch) => {
                for (i, op) in patch.0.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    // An operation of JSON values always serializes.
                    let _ = serde_json::to_writer(&mut *out, op);
                    within(out)?;
                }
            }
        }
        out.push(b']');
        within(out)
    }

    /// About how long the JSON is, to size its buffer once.
    pub(crate) fn json_len_hint(&self) -> usize {
        match self {
            Changes::Adds(ops) => ops.iter().map(AddOp::json_len_hint).sum::<usize>() + 2,
            Changes::Diff { ops, .. } => 128 * ops.len(),
            Changes::Owned(patch) => 128 * patch.0.len(),
        }
    }

    /// As a `json_patch::Patch`, copying the borrowed values.
    pub(crate) fn to_patch(&self) -> Patch {
        match self {
            Changes::Adds(ops) => Patch(ops.iter().map(AddOp::to_operation).collect()),
            Changes::Diff { ops, object } => Patch(ops.iter().map(|op| diff_operation(op, object)).collect()),
            Changes::Owned(patch) => patch.clone(),
        }
    }
}

/// Writes one diff operation, its value serialized from where it sits in `object`.
fn write_diff_op(op: &DiffOp, object: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"op":""#);
    out.extend_from_slice(op.kind.as_str().as_bytes());
    out.extend_from_slice(br#"","path":"#);
    write_string(out, &op.path);
    if let Some(value) = op.value_in(object) {
        out.extend_from_slice(br#","value":"#);
        // A JSON value always serializes.
        let _ = serde_json::to_writer(&mut *out, value);
    }
    out.push(b'}');
}

/// One diff operation as a `json_patch` operation, its value copied from `object`.
fn diff_operation(op: &DiffOp, object: &Value) -> PatchOperation {
    // The path was built from escaped tokens, so it always parses.
    let path = PointerBuf::parse(&op.path).unwrap_or_default();
    // An add's or replace's path names its value's place in the object (see `diff`).
    let value = op.value_in(object).cloned().unwrap_or(Value::Null);
    match op.kind {
        DiffKind::Add => PatchOperation::Add(AddOperation { path, value }),
        DiffKind::Replace => PatchOperation::Replace(ReplaceOperation { path, value }),
        DiffKind::Remove => PatchOperation::Remove(RemoveOperation { path }),
    }
}

/// One `add` operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AddOp<'p> {
    /// A JSON pointer, already escaped.
    path: String,
    value: OpValue<'p>,
}

/// The value of an `add`, borrowed from a policy where it can be.
#[derive(Debug, Clone)]
pub(crate) enum OpValue<'p> {
    /// One value of a policy, as the JSON text rendered when the policy loaded.
    Json(&'p RawValue),
    /// A list made of values of policies.
    List(Vec<&'p RawValue>),
    /// A map of strings (labels, annotations).
    Strings(Vec<(&'p str, &'p str)>),
    /// A string.
    Str(&'p str),
    /// A boolean.
    Bool(bool),
    /// `{}`, to create a missing parent object.
    EmptyObject,
}

impl PartialEq for OpValue<'_> {
    /// JSON text is compared as text: both sides were rendered by serde_json from policies.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (OpValue::Json(a), OpValue::Json(b)) => a.get() == b.get(),
            (OpValue::List(a), OpValue::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.get() == b.get())
            }
            (OpValue::Strings(a), OpValue::Strings(b)) => a == b,
            (OpValue::Str(a), OpValue::Str(b)) => a == b,
            (OpValue::Bool(a), OpValue::Bool(b)) => a == b,
            (OpValue::EmptyObject, OpValue::EmptyObject) => true,
            _ => false,
        }
    }
}

impl<'p> AddOp<'p> {
    /// An `add` at the path made of `tokens`, each escaped as RFC 6901 requires.
    pub(crate) fn new<'t>(tokens: impl IntoIterator<Item = &'t str>, value: OpValue<'p>) -> Self {
        let mut path = String::with_capacity(64);
        for token in tokens {
            push_token(&mut path, token);
        }
        Self { path, value }
    }

    /// An `add` at position `index` of the list at the path made of `tokens`.
    pub(crate) fn at_index<'t>(
        tokens: impl IntoIterator<Item = &'t str>,
        index: usize,
        value: OpValue<'p>,
    ) -> Self {
        let mut op = Self::new(tokens, value);
        // Writing to a String cannot fail.
        let _ = write!(op.path, "/{index}");
        op
    }

    fn json_len_hint(&self) -> usize {
        let value = match &self.value {
            OpValue::Json(json) => json.get().len(),
            OpValue::List(items) => items.iter().map(|json| json.get().len() + 1).sum::<usize>() + 2,
            OpValue::Strings(entries) => {
                entries.iter().map(|(k, v)| k.len() + v.len() + 6).sum::<usize>() + 2
            }
            OpValue::Str(s) => s.len() + 2,
            OpValue::Bool(_) | OpValue::EmptyObject => 5,
        };
        // {"op":"add","path":"...","value":...},
        self.path.len() + value + 32
    }

    fn to_operation(&self) -> PatchOperation {
        let value = match &self.value {
            OpValue::Json(json) => raw_value(json),
            OpValue::List(items) => Value::Array(items.iter().map(|json| raw_value(json)).collect()),
            OpValue::Strings(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
                    .collect(),
            ),
            OpValue::Str(s) => Value::String((*s).to_owned()),
            OpValue::Bool(b) => Value::Bool(*b),
            OpValue::EmptyObject => Value::Object(Map::new()),
        };
        // The path was built from escaped tokens, so it always parses.
        let path = PointerBuf::parse(&self.path).unwrap_or_default();
        PatchOperation::Add(AddOperation { path, value })
    }
}

impl OpValue<'_> {
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            OpValue::Json(json) => out.extend_from_slice(json.get().as_bytes()),
            OpValue::List(items) => {
                out.push(b'[');
                for (i, json) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(json.get().as_bytes());
                }
                out.push(b']');
            }
            OpValue::Strings(entries) => {
                out.push(b'{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_string(out, key);
                    out.push(b':');
                    write_string(out, value);
                }
                out.push(b'}');
            }
            OpValue::Str(s) => write_string(out, s),
            OpValue::Bool(true) => out.extend_from_slice(b"true"),
            OpValue::Bool(false) => out.extend_from_slice(b"false"),
            OpValue::EmptyObject => out.extend_from_slice(b"{}"),
        }
    }
}

/// A JSON string, escaped by serde_json.
fn write_string(out: &mut Vec<u8>, s: &str) {
    // Writing a string to a Vec cannot fail.
    let _ = serde_json::to_writer(out, s);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn written_json_is_json_patch_s_own_serialization() {
        let value = serde_json::value::to_raw_value(&json!({"name": "a"})).expect("JSON");
        let ops = vec![
            AddOp::new(
                ["metadata", "annotations", "example.com/a~b"],
                OpValue::Str("x\"y"),
            ),
            AddOp::new(["spec", "volumes", "0"], OpValue::Json(&value)),
            AddOp::new(["spec", "containers"], OpValue::List(vec![&value])),
            AddOp::new(["metadata", "labels"], OpValue::Strings(vec![("k", "v")])),
            AddOp::new(["spec", "automountServiceAccountToken"], OpValue::Bool(false)),
            AddOp::new(["spec"], OpValue::EmptyObject),
        ];
        let changes = Changes::Adds(ops);
        let mut written = Vec::new();
        changes.write_json(&mut written, usize::MAX).expect("no bound");
        let direct: Value = serde_json::from_slice(&written).expect("valid JSON");
        let owned = serde_json::to_value(changes.to_patch()).expect("serializes");
        assert_eq!(direct, owned);
        assert_eq!(direct[0]["path"], "/metadata/annotations/example.com~1a~0b");
        assert_eq!(direct[3]["value"], json!({"k": "v"}));
        assert_eq!(direct[5]["value"], json!({}));
    }

    #[test]
    fn writing_stops_as_soon_as_the_patch_passes_its_bound() {
        let value = serde_json::value::to_raw_value(&json!({"name": "E", "value": "v"})).expect("JSON");
        let changes = Changes::Adds(
            (0..1000)
                .map(|i| AddOp::at_index(["spec", "containers"], i, OpValue::Json(&value)))
                .collect(),
        );
        let mut whole = Vec::new();
        changes.write_json(&mut whole, usize::MAX).expect("no bound");
        let mut exact = Vec::new();
        changes
            .write_json(&mut exact, whole.len())
            .expect("exactly at the bound");
        assert_eq!(exact, whole);
        let mut cut = Vec::new();
        let refused = changes.write_json(&mut cut, 500);
        assert_eq!(refused, Err(PatchTooLarge { limit: 500 }));
        // Stopped after the operation that passed the bound: not one more.
        assert!(cut.len() > 500 && cut.len() < 600, "{} bytes written", cut.len());
        let mut one_short = Vec::new();
        assert!(changes.write_json(&mut one_short, whole.len() - 1).is_err());
    }
}
