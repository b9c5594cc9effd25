//! The RFC 6902 operations that turn one JSON value into another, without their values: an
//! `add` or `replace` reads its value from the target when the patch is written
//! ([`DiffOp::value_in`]). When Gatekeeper mutators add thousands of entries to a pod, copying
//! each into the patch (as `json_patch::diff` does) and freeing it again cost about a fifth of
//! the admission (BENCHMARKS.md).
//!
//! The operations are `json_patch::diff`'s: objects key by key, arrays index by index, extra
//! elements added at the end or removed from it. Every `add` and `replace` path therefore names
//! the value's place in the target itself, which is what lets the value be looked up there.

use serde_json::{Map, Value};

/// One operation of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffOp {
    /// What it does.
    pub(crate) kind: DiffKind,
    /// A JSON pointer, escaped.
    pub(crate) path: String,
}

/// The RFC 6902 operations a diff uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffKind {
    Add,
    Replace,
    Remove,
}

impl DiffKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiffKind::Add => "add",
            DiffKind::Replace => "replace",
            DiffKind::Remove => "remove",
        }
    }
}

impl DiffOp {
    /// The value an `add` or `replace` sets, found in `target` (the value the diff was made
    /// towards); `None` for a `remove`.
    pub(crate) fn value_in<'t>(&self, target: &'t Value) -> Option<&'t Value> {
        match self.kind {
            DiffKind::Remove => None,
            DiffKind::Add | DiffKind::Replace => target.pointer(&self.path),
        }
    }
}

/// The operations that turn `before` into `after`.
pub(crate) fn diff(before: &Value, after: &Value) -> Vec<DiffOp> {
    let mut ops = Vec::new();
    let mut path = String::with_capacity(64);
    diff_value(before, after, &mut path, &mut ops);
    ops
}

fn diff_value(before: &Value, after: &Value, path: &mut String, ops: &mut Vec<DiffOp>) {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => diff_object(before, after, path, ops),
        (Value::Array(before), Value::Array(after)) => diff_array(before, after, path, ops),
        _ if before == after => {}
        _ => push(ops, DiffKind::Replace, path),
    }
}

fn diff_object(
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    path: &mut String,
    ops: &mut Vec<DiffOp>,
) {
    let len = path.len();
    for (key, value) in after {
        push_token(path, key);
        match before.get(key) {
            Some(old) => diff_value(old, value, path, ops),
            None => push(ops, DiffKind::Add, path),
        }
        path.truncate(len);
    }
    for key in before.keys().filter(|key| !after.contains_key(*key)) {
        push_token(path, key);
        push(ops, DiffKind::Remove, path);
        path.truncate(len);
    }
}

fn diff_array(before: &[Value], after: &[Value], path: &mut String, ops: &mut Vec<DiffOp>) {
    let len = path.len();
    let common = before.len().min(after.len());
    for (index, (old, new)) in before.iter().zip(after).enumerate() {
        push_index(path, index);
        diff_value(old, new, path, ops);
        path.truncate(len);
    }
    for index in common..after.len() {
        push_index(path, index);
        push(ops, DiffKind::Add, path);
        path.truncate(len);
    }
    // Removing at `common` again and again drops the tail, as json_patch's diff does.
    for _ in common..before.len() {
        push_index(path, common);
        push(ops, DiffKind::Remove, path);
        path.truncate(len);
    }
}

fn push(ops: &mut Vec<DiffOp>, kind: DiffKind, path: &str) {
    ops.push(DiffOp {
        kind,
        path: path.to_owned(),
    });
}

fn push_index(path: &mut String, index: usize) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = write!(path, "/{index}");
}

/// Appends `/token` to a JSON pointer, escaping `~` and `/` as RFC 6901 requires.
pub(crate) fn push_token(path: &mut String, token: &str) {
    path.push('/');
    let mut rest = token;
    while let Some(at) = rest.find(['~', '/']) {
        path.push_str(&rest[..at]);
        path.push_str(if rest.as_bytes()[at] == b'~' { "~0" } else { "~1" });
        rest = &rest[at + 1..];
    }
    path.push_str(rest);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// A `json_patch::Patch` from the operations, values read from `after`.
    fn to_patch(ops: &[DiffOp], after: &Value) -> json_patch::Patch {
        let ops: Vec<Value> = ops
            .iter()
            .map(|op| match op.value_in(after) {
                Some(value) => json!({"op": op.kind.as_str(), "path": op.path, "value": value}),
                None => json!({"op": op.kind.as_str(), "path": op.path}),
            })
            .collect();
        serde_json::from_value(Value::Array(ops)).expect("a patch")
    }

    #[test]
    fn the_operations_are_json_patch_s_own() {
        let before = json!({"a": [1, 2, 3], "b": {"x~/y": 1, "gone": true}, "c": "same"});
        let after = json!({"a": [1, 5], "b": {"x~/y": 2, "new": [1]}, "c": "same"});
        let ops = diff(&before, &after);
        assert_eq!(to_patch(&ops, &after), json_patch::diff(&before, &after));
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..4).prop_map(Value::from),
            "[ab/~]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[ab/~]{0,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Applying the operations, with values read from the target, gives the target; and they
        /// are the operations json_patch's diff gives.
        #[test]
        fn applying_the_diff_gives_the_target(before in value(), after in value()) {
            let ops = diff(&before, &after);
            let patch = to_patch(&ops, &after);
            prop_assert_eq!(&patch, &json_patch::diff(&before, &after));
            let mut patched = before.clone();
            json_patch::patch(&mut patched, &patch).expect("the diff applies");
            prop_assert_eq!(patched, after);
        }
    }
}
