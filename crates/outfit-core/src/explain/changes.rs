//! What changed between two versions of an object, as `explain` shows it.

use serde_json::Value;

use super::report::Change;

/// The fields that differ between two objects, as pointers with both values. Changes inside a
/// list of plain values (`args`, `command`) are shown as the whole list before and after: the
/// element-by-element diff of a list that lost its first item reads as every item changing.
pub(crate) fn changes_between(before: &Value, after: &Value) -> Vec<Change> {
    let mut changes: Vec<Change> = Vec::new();
    for operation in &json_patch::diff(before, after).0 {
        let mut path = operation.path().to_string();
        if let Some((parent, _)) = path.rsplit_once('/') {
            let scalars = |root: &Value| {
                root.pointer(parent)
                    .and_then(Value::as_array)
                    .is_some_and(|items| items.iter().all(|item| !item.is_object() && !item.is_array()))
            };
            if scalars(before) && scalars(after) {
                path = parent.to_owned();
            }
        }
        if changes.last().is_some_and(|last| last.path == path) {
            continue;
        }
        changes.push(Change {
            before: before.pointer(&path).cloned(),
            after: after.pointer(&path).cloned(),
            path,
        });
    }
    changes
}
