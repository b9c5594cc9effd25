//! outfit's record on the objects it changes: the annotation `outfit.dev/mutated-by` lists the
//! policies that changed the object, for the kinds that keep no record of their own (Kubeflow's
//! PodDefault webhook writes its own annotations, and outfit keeps those as they are).
//!
//! The value is the sorted union of what the object already lists and what this admission applied,
//! so that a reinvocation, which changes nothing, leaves it as it is (the webhook stays
//! idempotent, unlike Gatekeeper's `gatekeeper.sh/mutation-id`, a new UUID each time). The entries
//! read `Kind/namespace/name`, the shape of Gatekeeper's `gatekeeper.sh/mutations` without its
//! generation (`Assign//add-nfs` for a cluster-scoped mutator).

use std::{borrow::Cow, collections::BTreeSet};

use json_patch::{AddOperation, PatchOperation, jsonptr::PointerBuf};
use serde_json::{Map, Value};

use crate::{
    decision::{Admission, AppliedPolicy, Denial, Request, internal_denial},
    patch::Changes,
    vocab::{PolicyKind, PolicyRef},
};

/// The annotation listing the policies that changed an object.
pub const ANNOTATION: &str = "outfit.dev/mutated-by";

/// How an applied policy is written in the annotation.
pub fn entry(policy: &PolicyRef) -> String {
    format!(
        "{}/{}/{}",
        policy.kind,
        policy.namespace.as_deref().unwrap_or(""),
        policy.name
    )
}

/// The entries an annotation value lists (empty entries ignored).
pub fn entries(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// The object's current annotation value, if any.
pub(crate) fn listed(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ANNOTATION))
        .and_then(Value::as_str)
}

/// Adds or extends the annotation on the admitted object, for the applied policies whose kind is
/// not in `self_recorded`. Does nothing when there are none, or when the object lists them all.
pub(crate) fn annotate<'p>(
    admission: &mut Admission<'p>,
    request: &Request<'_>,
    self_recorded: &[PolicyKind],
) -> Result<(), Denial> {
    let new: Vec<&AppliedPolicy<'p>> = admission
        .applied
        .iter()
        .filter(|p| !self_recorded.contains(&p.kind))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    let original = request.object_value()?;
    // The object as admitted so far: the one the families kept, or their patch applied to a copy.
    let mut mutated = match admission.mutated.take() {
        Some(mutated) => mutated,
        None => admission
            .object(&original)
            .map_err(|error| internal_denial(&error))?
            .into_owned(),
    };
    let before = listed(&mutated).unwrap_or("");
    let mut all: BTreeSet<Cow<'_, str>> = entries(before).map(Cow::Borrowed).collect();
    let count = all.len();
    all.extend(new.iter().map(|p| Cow::Owned(entry(p))));
    if all.len() == count {
        admission.mutated = (!admission.changes.is_empty()).then_some(mutated);
        return Ok(());
    }
    let value = all.into_iter().collect::<Vec<_>>().join(", ");
    let has_annotations = mutated
        .pointer("/metadata/annotations")
        .is_some_and(Value::is_object);
    let operation = if has_annotations {
        add(&["metadata", "annotations", ANNOTATION], Value::String(value))
    } else {
        let mut annotations = Map::new();
        annotations.insert(ANNOTATION.to_owned(), Value::String(value));
        add(&["metadata", "annotations"], Value::Object(annotations))
    };
    json_patch::patch(&mut mutated, std::slice::from_ref(&operation))
        .map_err(|error| internal_denial(&error))?;
    let mut patch = admission.changes.to_patch();
    patch.0.push(operation);
    admission.changes = Changes::Owned(patch);
    admission.mutated = Some(mutated);
    Ok(())
}

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(tokens.iter().copied()),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gatekeeper::ASSIGN, poddefault::POLICY_KIND};

    #[test]
    fn entries_read_what_entry_writes_in_gatekeeper_s_shape() {
        let cluster = PolicyRef::new(ASSIGN, None, "add-nfs");
        let namespaced = PolicyRef::new(POLICY_KIND, Some("team"), "gpu");
        assert_eq!(entry(&cluster), "Assign//add-nfs");
        assert_eq!(entry(&namespaced), "PodDefault/team/gpu");
        let listed = format!("{}, {},", entry(&cluster), entry(&namespaced));
        assert_eq!(
            entries(&listed).collect::<Vec<_>>(),
            ["Assign//add-nfs", "PodDefault/team/gpu"]
        );
    }
}
