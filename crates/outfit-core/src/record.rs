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

use serde_json::{Map, Value};

use crate::{
    decision::{Admission, AppliedPolicy, Denial, Request, internal_denial},
    diff::{DiffKind, DiffOp, push_token},
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
    // The object as admitted so far: the one a family kept (the request's object is then not
    // needed), or the patch applied to a copy of the request's.
    admission.changes = match std::mem::take(&mut admission.changes) {
        Changes::Diff { mut ops, mut object } => {
            if let Some(path) = extend(&mut object, &new) {
                ops.push(DiffOp {
                    kind: DiffKind::Add,
                    path,
                });
            }
            Changes::Diff { ops, object }
        }
        changes => {
            let original = request.object_value()?;
            let mut object = original.as_ref().clone();
            json_patch::patch(&mut object, &changes.to_patch()).map_err(|error| internal_denial(&error))?;
            extend(&mut object, &new);
            Changes::between(&original, object)
        }
    };
    Ok(())
}

/// Adds the `new` policies to the list `object` carries; returns the path of the `add` that sets
/// it, or `None` when it lists them all already.
fn extend(object: &mut Value, new: &[&AppliedPolicy<'_>]) -> Option<String> {
    let before = listed(object).unwrap_or("");
    let mut all: BTreeSet<Cow<'_, str>> = entries(before).map(Cow::Borrowed).collect();
    let count = all.len();
    all.extend(new.iter().map(|p| Cow::Owned(entry(p))));
    if all.len() == count {
        return None;
    }
    let value = all.into_iter().collect::<Vec<_>>().join(", ");
    Some(insert(object, value))
}

/// Sets the annotation on `object` to `value`; returns the path of the `add` that does it: the
/// annotation's own, or the whole `metadata.annotations` when the object has none.
fn insert(object: &mut Value, value: String) -> String {
    let mut path = String::from("/metadata/annotations");
    let metadata = match object.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(metadata) => metadata,
        // Every object the API server admits has metadata; one that does not gets it.
        None => {
            object["metadata"] = Value::Object(Map::new());
            path = String::from("/metadata");
            object["metadata"].as_object_mut().expect("just set")
        }
    };
    match metadata.get_mut("annotations").and_then(Value::as_object_mut) {
        Some(annotations) => {
            annotations.insert(ANNOTATION.to_owned(), Value::String(value));
            push_token(&mut path, ANNOTATION);
        }
        None => {
            let mut annotations = Map::new();
            annotations.insert(ANNOTATION.to_owned(), Value::String(value));
            metadata.insert("annotations".to_owned(), Value::Object(annotations));
        }
    }
    path
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

    /// An Assign of `spec.priority`, and one from the PodDefault family (which records itself).
    fn set() -> crate::PolicySet {
        let documents = crate::document::parse_stream(
            "apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: priority}
spec:
  applyTo: [{groups: [''], versions: [v1], kinds: [Pod]}]
  location: spec.priority
  parameters: {assign: {value: 7}}
---
apiVersion: kubeflow.org/v1alpha1
kind: PodDefault
metadata: {name: env, namespace: default}
spec: {selector: {}, env: [{name: A, value: b}]}
",
            "policies.yaml",
        )
        .unwrap();
        let mut builder = crate::PolicySet::builder().annotate(true);
        builder.add_all(&documents);
        builder.build().0
    }

    fn admit(set: &crate::PolicySet, object: &serde_json::Value) -> serde_json::Value {
        let request = Request::create(object, "default");
        match set.apply(&request) {
            crate::Outcome::Admitted(admission) => {
                // The webhook's JSON patch gives the same object as the kept one.
                let patch: json_patch::Patch = serde_json::from_slice(&admission.patch_json()).unwrap();
                let mut patched = object.clone();
                json_patch::patch(&mut patched, &patch).unwrap();
                assert_eq!(&patched, admission.object(object).unwrap().as_ref());
                patched
            }
            crate::Outcome::Denied(denial) => panic!("{}", denial.message),
        }
    }

    #[test]
    fn the_annotation_lists_what_changed_the_object_extends_a_list_and_survives_a_reinvocation() {
        let set = set();
        for (metadata, expected) in [
            // No annotations yet: the map is added (the PodDefault adds its own in the same patch).
            (serde_json::json!({"name": "p"}), "Assign//priority"),
            // An annotation of someone else's is kept beside it.
            (
                serde_json::json!({"name": "p", "annotations": {"team": "a"}}),
                "Assign//priority",
            ),
            // An earlier list (another webhook's call, another set) is extended and sorted.
            (
                serde_json::json!({"name": "p", "annotations": {ANNOTATION: "ModifySet//args"}}),
                "Assign//priority, ModifySet//args",
            ),
        ] {
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}});
            let admitted = admit(&set, &pod);
            assert_eq!(
                admitted["metadata"]["annotations"][ANNOTATION], expected,
                "{admitted}"
            );
            assert_eq!(admitted["spec"]["priority"], 7);
            // Kubeflow's record of the PodDefault, which outfit's leaves to it.
            assert_eq!(
                admitted["metadata"]["annotations"]["poddefault.admission.kubeflow.org/poddefault-env"],
                ""
            );
            if let Some(team) = pod["metadata"]["annotations"].get("team") {
                assert_eq!(&admitted["metadata"]["annotations"]["team"], team);
            }
            // The API server's reinvocation: nothing to add, nothing changed.
            assert_eq!(admit(&set, &admitted), admitted);
        }
    }
}
