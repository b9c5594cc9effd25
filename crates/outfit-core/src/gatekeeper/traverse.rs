//! Walking a parsed location through a raw object, as Gatekeeper's `core.Mutate` does: missing
//! fields are created only when something below them changes, a missing keyed element is appended
//! as `{key: value}`, a glob visits every element (and creates nothing), and `pathTests` are checked
//! at each depth on the way down.
//!
//! Unlike Gatekeeper, a walk reports a change only when the object really changed (Gatekeeper
//! reports one whenever the leaf is reached and compares whole objects afterwards); the system loop
//! compares iteration snapshots too, so the results are the same. [`would_change`] is the same walk
//! on a shared reference, so the engine copies an object only when a mutator will change it.

use serde_json::{Map, Value};

use super::location::{KeyValue, Node};

/// A `pathTests` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// The sub-path must exist for the mutation to happen.
    MustExist,
    /// The sub-path must not exist.
    MustNotExist,
}

/// The pathTests of one mutator, by depth (the index of the sub-path's last node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tester {
    by_depth: Vec<Option<Condition>>,
}

impl Tester {
    /// A tester from `(depth, condition)` pairs already validated by the caller.
    pub fn new(tests: &[(usize, Condition)]) -> Self {
        let mut by_depth = Vec::new();
        for &(depth, condition) in tests {
            if by_depth.len() <= depth {
                by_depth.resize(depth + 1, None);
            }
            by_depth[depth] = Some(condition);
        }
        Self { by_depth }
    }

    fn at(&self, depth: usize) -> Option<Condition> {
        self.by_depth.get(depth).copied().flatten()
    }

    fn exists_ok(&self, depth: usize) -> bool {
        self.at(depth) != Some(Condition::MustNotExist)
    }

    fn missing_ok(&self, depth: usize) -> bool {
        self.at(depth) != Some(Condition::MustExist)
    }

    fn allows(&self, depth: usize, exists: bool) -> bool {
        if exists {
            self.exists_ok(depth)
        } else {
            self.missing_ok(depth)
        }
    }
}

/// What a mutator writes once the walk reaches its last node.
pub trait Setter {
    /// The new value of a field whose current value is `current` (`None` when absent), or
    /// `Ok(None)` when the field is already as wanted.
    fn value_for(&self, current: Option<&Value>) -> Result<Option<Value>, String>;

    /// Whether [`Setter::value_for`] would return a new value or an error; cheap, no allocation
    /// when possible.
    fn would_change(&self, current: Option<&Value>) -> bool;

    /// The element a location ending in a keyed list upserts (Assign only).
    fn element(&self) -> Result<&Value, String> {
        Err("this mutator cannot set a keyed list element".into())
    }
}

/// Where a walk failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkError(pub String);

fn mismatch(expected: &str, found: &Value) -> WalkError {
    let found = match found {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    };
    WalkError(format!(
        "mismatch between path entry (type: {expected}) and received object (type: {found})"
    ))
}

/// A list element's key field. Elements of keyed lists are small objects, for which a linear scan
/// is several times faster than hashing the key.
fn key_field_of<'v>(object: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if object.len() <= 16 {
        object.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        object.get(key)
    }
}

fn key_field<'v>(item: &'v Value, key: &str) -> Option<&'v Value> {
    item.as_object().and_then(|object| key_field_of(object, key))
}

/// Applies `setter` at `path` in `root`, honouring `tester`. Returns whether `root` changed.
pub fn apply(
    path: &[Node],
    tester: &Tester,
    setter: &dyn Setter,
    root: &mut Value,
) -> Result<bool, WalkError> {
    if path.is_empty() {
        return Err(WalkError("attempting to mutate an empty target location".into()));
    }
    Walk { path, tester, setter }.apply(root, 0)
}

/// Whether [`apply`] would change `root` (or fail), without touching it.
pub fn would_change(path: &[Node], tester: &Tester, setter: &dyn Setter, root: &Value) -> bool {
    path.is_empty() || Walk { path, tester, setter }.probe(root, 0)
}

struct Walk<'a> {
    path: &'a [Node],
    tester: &'a Tester,
    setter: &'a dyn Setter,
}

impl Walk<'_> {
    fn is_last(&self, depth: usize) -> bool {
        depth + 1 == self.path.len()
    }

    /// The container created for a missing field: `{}` or `[]` depending on the next node.
    fn empty_container(&self, depth: usize) -> Value {
        match self.path[depth] {
            Node::Object(_) => Value::Object(Map::new()),
            Node::List { .. } => Value::Array(Vec::new()),
        }
    }

    fn new_element(key: &str, value: &KeyValue) -> Value {
        let mut element = Map::new();
        element.insert(key.to_owned(), value.to_json().unwrap_or(Value::Null));
        Value::Object(element)
    }

    fn apply(&self, current: &mut Value, depth: usize) -> Result<bool, WalkError> {
        match &self.path[depth] {
            Node::Object(name) => {
                let Value::Object(map) = current else {
                    return Err(mismatch("object", current));
                };
                if !self.tester.allows(depth, map.contains_key(name)) {
                    return Ok(false);
                }
                if self.is_last(depth) {
                    let new = self.setter.value_for(map.get(name)).map_err(WalkError)?;
                    let changed = new.is_some();
                    if let Some(new) = new {
                        map.insert(name.clone(), new);
                    }
                    return Ok(changed);
                }
                if let Some(next) = map.get_mut(name) {
                    return self.apply(next, depth + 1);
                }
                let mut next = self.empty_container(depth + 1);
                let changed = self.apply(&mut next, depth + 1)?;
                if changed {
                    map.insert(name.clone(), next);
                }
                Ok(changed)
            }
            Node::List { key, value } => {
                let Value::Array(items) = current else {
                    return Err(mismatch("list", current));
                };
                if self.is_last(depth) {
                    self.upsert(items, key, value, depth)
                } else {
                    self.apply_list(items, key, value, depth)
                }
            }
        }
    }

    fn apply_list(
        &self,
        items: &mut Vec<Value>,
        key: &str,
        value: &KeyValue,
        depth: usize,
    ) -> Result<bool, WalkError> {
        if *value == KeyValue::Glob {
            // A glob with MustNotExist can never hold (Gatekeeper checks ExistsOkay here).
            if !self.tester.exists_ok(depth) {
                return Ok(false);
            }
            let mut changed = false;
            for item in items.iter_mut() {
                changed |= self.apply(item, depth + 1)?;
            }
            return Ok(changed);
        }
        let (mut found, mut changed) = (false, false);
        for item in items.iter_mut() {
            if key_field(item, key).is_some_and(|field| value.matches(field)) {
                if !self.tester.exists_ok(depth) {
                    return Ok(false);
                }
                found = true;
                changed |= self.apply(item, depth + 1)?;
            }
        }
        if !found {
            if !self.tester.missing_ok(depth) {
                return Ok(false);
            }
            let mut element = Self::new_element(key, value);
            if self.apply(&mut element, depth + 1)? {
                items.push(element);
                changed = true;
            }
        }
        Ok(changed)
    }

    /// A location ending in `[key: value]`: replace the first matching element wholesale, or append.
    fn upsert(
        &self,
        items: &mut Vec<Value>,
        key: &str,
        value: &KeyValue,
        depth: usize,
    ) -> Result<bool, WalkError> {
        if *value == KeyValue::Glob {
            return Err(WalkError("last path entry can not be globbed".into()));
        }
        let element = self.setter.element().map_err(WalkError)?;
        for item in items.iter_mut() {
            let Value::Object(object) = item else {
                return Err(mismatch("object", item));
            };
            if key_field_of(object, key).is_some_and(|field| value.matches(field)) {
                if !self.tester.exists_ok(depth) || item == element {
                    return Ok(false);
                }
                *item = element.clone();
                return Ok(true);
            }
        }
        if !self.tester.missing_ok(depth) {
            return Ok(false);
        }
        items.push(element.clone());
        Ok(true)
    }

    /// [`Walk::apply`] without writing: whether it would change something or fail.
    fn probe(&self, current: &Value, depth: usize) -> bool {
        match &self.path[depth] {
            Node::Object(name) => {
                let Value::Object(map) = current else {
                    return true;
                };
                let existing = map.get(name);
                if !self.tester.allows(depth, existing.is_some()) {
                    return false;
                }
                if self.is_last(depth) {
                    return self.setter.would_change(existing);
                }
                match existing {
                    Some(next) => self.probe(next, depth + 1),
                    None => self.probe(&self.empty_container(depth + 1), depth + 1),
                }
            }
            Node::List { key, value } => {
                let Value::Array(items) = current else {
                    return true;
                };
                if self.is_last(depth) {
                    self.probe_upsert(items, key, value, depth)
                } else {
                    self.probe_list(items, key, value, depth)
                }
            }
        }
    }

    fn probe_list(&self, items: &[Value], key: &str, value: &KeyValue, depth: usize) -> bool {
        if *value == KeyValue::Glob {
            return self.tester.exists_ok(depth) && items.iter().any(|item| self.probe(item, depth + 1));
        }
        let mut found = false;
        for item in items {
            if key_field(item, key).is_some_and(|field| value.matches(field)) {
                if !self.tester.exists_ok(depth) {
                    return false;
                }
                found = true;
                if self.probe(item, depth + 1) {
                    return true;
                }
            }
        }
        !found && self.tester.missing_ok(depth) && self.probe(&Self::new_element(key, value), depth + 1)
    }

    fn probe_upsert(&self, items: &[Value], key: &str, value: &KeyValue, depth: usize) -> bool {
        let Ok(element) = self.setter.element() else {
            return true;
        };
        if *value == KeyValue::Glob {
            return true;
        }
        for item in items {
            let Value::Object(object) = item else {
                return true;
            };
            if key_field_of(object, key).is_some_and(|field| value.matches(field)) {
                return self.tester.exists_ok(depth) && item != element;
            }
        }
        self.tester.missing_ok(depth)
    }
}

#[cfg(test)]
mod tests;
