//! The RFC 6902 patch an admission produces, in the form that is cheapest to build and to send.
//!
//! PodDefaults only ever add, and what they add is a value of the policy itself: their operations
//! borrow those values from the [`PolicySet`](crate::PolicySet) and are serialized straight to
//! JSON for the webhook, with no copy of any value and no intermediate `json_patch::Patch`. A
//! `json_patch::Patch` is built on demand for callers that apply the patch themselves (the CLI, the
//! tests). When a Gatekeeper mutator changes the object, the patch is a diff and already owned.

use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use serde::{Serialize, Serializer, ser::SerializeMap};
use serde_json::{Map, Value, value::RawValue};

use crate::view::raw_value;

/// The changes an admission makes to its object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Changes<'p> {
    /// `add` operations with values borrowed from the policies.
    Adds(Vec<AddOp<'p>>),
    /// An owned patch: a diff of the request object against the mutated one, or a copy.
    Owned(Patch),
}

impl Default for Changes<'_> {
    fn default() -> Self {
        Changes::Adds(Vec::new())
    }
}

impl Changes<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Changes::Adds(ops) => ops.is_empty(),
            Changes::Owned(patch) => patch.0.is_empty(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Changes::Adds(ops) => ops.len(),
            Changes::Owned(patch) => patch.0.len(),
        }
    }

    /// The same changes, owning their values.
    pub(crate) fn into_owned(self) -> Changes<'static> {
        match self {
            Changes::Adds(_) => Changes::Owned(self.to_patch()),
            Changes::Owned(patch) => Changes::Owned(patch),
        }
    }

    /// As a `json_patch::Patch`, copying the borrowed values.
    pub(crate) fn to_patch(&self) -> Patch {
        match self {
            Changes::Adds(ops) => Patch(ops.iter().map(AddOp::to_operation).collect()),
            Changes::Owned(patch) => patch.clone(),
        }
    }
}

impl Serialize for Changes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Changes::Adds(ops) => ops.serialize(serializer),
            Changes::Owned(patch) => patch.serialize(serializer),
        }
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
        let mut path = String::with_capacity(48);
        for token in tokens {
            path.push('/');
            if token.contains(['~', '/']) {
                path.push_str(&token.replace('~', "~0").replace('/', "~1"));
            } else {
                path.push_str(token);
            }
        }
        Self { path, value }
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

impl Serialize for AddOp<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("op", "add")?;
        map.serialize_entry("path", &self.path)?;
        map.serialize_entry("value", &self.value)?;
        map.end()
    }
}

impl Serialize for OpValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            OpValue::Json(json) => json.serialize(serializer),
            OpValue::List(items) => items.serialize(serializer),
            OpValue::Strings(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            OpValue::Str(s) => serializer.serialize_str(s),
            OpValue::Bool(b) => serializer.serialize_bool(*b),
            OpValue::EmptyObject => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_are_escaped_and_both_forms_agree() {
        let value = serde_json::value::to_raw_value(&json!({"name": "a"})).expect("JSON");
        let ops = vec![
            AddOp::new(["metadata", "annotations", "example.com/a~b"], OpValue::Str("x")),
            AddOp::new(["spec", "volumes", "0"], OpValue::Json(&value)),
            AddOp::new(["spec", "containers"], OpValue::List(vec![&value])),
            AddOp::new(["metadata", "labels"], OpValue::Strings(vec![("k", "v")])),
            AddOp::new(["spec", "automountServiceAccountToken"], OpValue::Bool(false)),
            AddOp::new(["spec"], OpValue::EmptyObject),
        ];
        let changes = Changes::Adds(ops);
        let direct = serde_json::to_value(&changes).expect("serializes");
        let owned = serde_json::to_value(changes.to_patch()).expect("serializes");
        assert_eq!(direct, owned);
        assert_eq!(direct[0]["path"], "/metadata/annotations/example.com~1a~0b");
        assert_eq!(direct[3]["value"], json!({"k": "v"}));
        assert_eq!(direct[5]["value"], json!({}));
    }
}
