//! Adding PodPolicies' values to a pod. Every value has a place (`spec.nodeSelector[gpu]`, a
//! container's `resources.limits[nvidia.com/gpu]`, an env var by name); a place the pod or an
//! earlier policy already holds with an equal value is left as it is, and one it holds with a
//! different value is a conflict that refuses the pod, naming the place and both sides (as
//! Kubeflow's PodDefault webhook refuses conflicting env vars and volumes). Tolerations only add:
//! two tolerations never contradict each other.

use std::{borrow::Cow, collections::HashMap, fmt};

use serde_json::{Map, Value};

use super::policy::{Additions, PodPolicy};
use crate::{quantity, semantic, vocab::PolicyRef};

/// Two values for one place.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Conflict<'p> {
    /// The place, e.g. `spec.containers[main].resources.limits[nvidia.com/gpu]`.
    pub(crate) field: String,
    /// The policy that wanted `wanted` there.
    pub(crate) policy: &'p PolicyRef,
    pub(crate) wanted: Value,
    /// The policy that put `found` there, or `None` when the pod came with it.
    pub(crate) other: Option<&'p PolicyRef>,
    pub(crate) found: Value,
}

impl fmt::Display for Conflict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} sets {}, ", self.field, self.policy, self.wanted)?;
        match self.other {
            Some(other) => write!(f, "{other} sets {}", self.found),
            None => write!(f, "the pod has {}", self.found),
        }
    }
}

/// Adds policies to one pod, one after the other, remembering which policy set each place.
#[derive(Debug, Default)]
pub(crate) struct Merger<'p> {
    setters: HashMap<String, &'p PolicyRef>,
    pub(crate) conflicts: Vec<Conflict<'p>>,
}

impl<'p> Merger<'p> {
    /// Adds `policy`'s values to `pod`; whether it changed anything.
    pub(crate) fn add(&mut self, pod: &mut Value, policy: &'p PodPolicy) -> bool {
        let Some(pod) = pod.as_object_mut() else {
            return false;
        };
        let by = &policy.reference;
        let add = &policy.add;
        let mut changed = false;
        let metadata = object_at(pod, "metadata");
        for (map, entries, name) in [
            ("annotations", &add.annotations, "metadata.annotations"),
            ("labels", &add.labels, "metadata.labels"),
        ] {
            if !entries.is_empty() {
                let map = object_at(metadata, map);
                for (key, value) in entries {
                    changed |= self.put(
                        map,
                        key,
                        Value::String(value.clone()),
                        format!("{name}[{key}]"),
                        by,
                        same,
                    );
                }
            }
        }
        let spec = object_at(pod, "spec");
        if !add.node_selector.is_empty() {
            let selector = object_at(spec, "nodeSelector");
            for (key, value) in &add.node_selector {
                let field = format!("spec.nodeSelector[{key}]");
                changed |= self.put(selector, key, Value::String(value.clone()), field, by, same);
            }
        }
        if let Some(class) = &add.runtime_class_name {
            let field = "spec.runtimeClassName".to_owned();
            changed |= self.put(
                spec,
                "runtimeClassName",
                Value::String(class.clone()),
                field,
                by,
                same,
            );
        }
        changed |= self.keyed(spec, "volumes", &add.volumes, "spec.volumes", by);
        if !add.tolerations.is_empty() {
            let tolerations = array_at(spec, "tolerations");
            for toleration in &add.tolerations {
                if !tolerations.iter().any(|t| semantic::equal(t, toleration)) {
                    tolerations.push(toleration.clone());
                    changed = true;
                }
            }
        }
        if let Some(Value::Array(containers)) = spec.get_mut("containers") {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                changed |= self.add_to_container(container, add, by);
            }
        }
        changed
    }

    fn add_to_container(
        &mut self,
        container: &mut Map<String, Value>,
        add: &Additions,
        by: &'p PolicyRef,
    ) -> bool {
        let name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if add
            .containers
            .as_ref()
            .is_some_and(|names| !names.contains(&name))
        {
            return false;
        }
        let at = format!("spec.containers[{name}]");
        let mut changed = false;
        for (kind, quantities) in [("limits", &add.limits), ("requests", &add.requests)] {
            if quantities.is_empty() {
                continue;
            }
            let map = object_at(object_at(container, "resources"), kind);
            for (resource, quantity) in quantities {
                let field = format!("{at}.resources.{kind}[{resource}]");
                let value = Value::String(quantity.clone());
                changed |= self.put(map, resource, value, field, by, same_amount);
            }
        }
        changed |= self.keyed(container, "env", &add.env, &format!("{at}.env"), by);
        changed |= self.keyed(
            container,
            "volumeMounts",
            &add.volume_mounts,
            &format!("{at}.volumeMounts"),
            by,
        );
        changed
    }

    /// Puts `value` at `key` of `map` unless a value `same` calls equal is there; a different one
    /// conflicts.
    fn put(
        &mut self,
        map: &mut Map<String, Value>,
        key: &str,
        value: Value,
        field: String,
        by: &'p PolicyRef,
        same: fn(&Value, &Value) -> bool,
    ) -> bool {
        match map.get(key) {
            None | Some(Value::Null) => {
                map.insert(key.to_owned(), value);
                self.setters.insert(field, by);
                true
            }
            Some(found) if same(found, &value) => {
                self.setters.entry(field).or_insert(by);
                false
            }
            Some(found) => {
                let found = found.clone();
                self.conflict(field, by, value, found);
                false
            }
        }
    }

    /// Adds entries to the list at `key`, identified by their `name`.
    fn keyed(
        &mut self,
        object: &mut Map<String, Value>,
        key: &str,
        entries: &[(String, Value)],
        at: &str,
        by: &'p PolicyRef,
    ) -> bool {
        if entries.is_empty() {
            return false;
        }
        let list = array_at(object, key);
        let mut changed = false;
        for (name, entry) in entries {
            let field = format!("{at}[{name}]");
            let found = list
                .iter()
                .find(|item| item.get("name").and_then(Value::as_str) == Some(name));
            match found {
                None => {
                    list.push(entry.clone());
                    self.setters.insert(field, by);
                    changed = true;
                }
                Some(found) if semantic::equal(found, entry) => {
                    self.setters.entry(field).or_insert(by);
                }
                Some(found) => {
                    let found = found.clone();
                    self.conflict(field, by, entry.clone(), found);
                }
            }
        }
        changed
    }

    fn conflict(&mut self, field: String, by: &'p PolicyRef, wanted: Value, found: Value) {
        let other = self.setters.get(&field).copied();
        self.conflicts.push(Conflict {
            field,
            policy: by,
            wanted,
            other,
            found,
        });
    }
}

/// Whether `found` is `wanted`; a quantity the request sends as a number (`1`) is the string the
/// API server stores (`"1"`).
fn same(found: &Value, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::Number(n), Value::String(s)) => n.to_string() == *s,
        _ => semantic::equal(found, wanted),
    }
}

/// Whether two quantities (strings, or a number as a request may send one) are the same amount.
fn same_amount(found: &Value, wanted: &Value) -> bool {
    fn text(value: &Value) -> Option<Cow<'_, str>> {
        match value {
            Value::String(s) => Some(Cow::Borrowed(s)),
            Value::Number(n) => Some(Cow::Owned(n.to_string())),
            _ => None,
        }
    }
    match (text(found), text(wanted)) {
        (Some(a), Some(b)) => quantity::same_amount(&a, &b),
        _ => found == wanted,
    }
}

/// The object at `key`, made (or made an object) if it is not one.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("made an object above")
}

/// The list at `key`, made (or made a list) if it is not one.
fn array_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Vec<Value> {
    let slot = map.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().expect("made a list above")
}
