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

use super::{
    keyed::{Found, KeyedLists, Seg},
    location::{KeyValue, Node},
};

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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
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

/// Applies `setter` at `path` in `root`, honouring `tester`. Returns whether `root` changed.
pub fn apply(
    path: &[Node],
    tester: &Tester,
    setter: &dyn Setter,
    root: &mut Value,
) -> Result<bool, WalkError> {
    apply_indexed(path, tester, setter, root, &mut KeyedLists::scan_only())
}

/// [`apply`], looking keyed-list elements up in (and keeping up to date) the admission's index of
/// `root`'s keyed lists.
pub(crate) fn apply_indexed(
    path: &[Node],
    tester: &Tester,
    setter: &dyn Setter,
    root: &mut Value,
    lists: &mut KeyedLists,
) -> Result<bool, WalkError> {
    if path.is_empty() {
        return Err(WalkError("attempting to mutate an empty target location".into()));
    }
    Walk::new(path, tester, setter, lists).apply(root, 0, true)
}

/// Whether [`apply`] would change `root` (or fail), without touching it.
pub fn would_change(path: &[Node], tester: &Tester, setter: &dyn Setter, root: &Value) -> bool {
    would_change_indexed(path, tester, setter, root, &mut KeyedLists::scan_only())
}

/// [`would_change`] with the admission's index of `root`'s keyed lists.
pub(crate) fn would_change_indexed(
    path: &[Node],
    tester: &Tester,
    setter: &dyn Setter,
    root: &Value,
    lists: &mut KeyedLists,
) -> bool {
    path.is_empty() || Walk::new(path, tester, setter, lists).probe(root, 0, true)
}

/// One walk. `attached` says whether the value visited is part of the object (rather than a
/// container the walk created and will attach only if something below it changes): only then is
/// `at` its concrete path, and only then are its keyed lists indexed.
struct Walk<'a, 'l> {
    path: &'a [Node],
    tester: &'a Tester,
    setter: &'a dyn Setter,
    lists: &'l mut KeyedLists,
    /// The concrete path of the value visited at depth `d` is `at[..d]`.
    at: Vec<Seg<'a>>,
}

fn position_u32(position: usize) -> u32 {
    u32::try_from(position).expect("lists shorter than 2^32 elements")
}

impl<'a> Walk<'a, '_> {
    fn new<'l>(
        path: &'a [Node],
        tester: &'a Tester,
        setter: &'a dyn Setter,
        lists: &'l mut KeyedLists,
    ) -> Walk<'a, 'l> {
        Walk {
            path,
            tester,
            setter,
            lists,
            at: Vec::with_capacity(path.len()),
        }
    }

    fn is_last(&self, depth: usize) -> bool {
        depth + 1 == self.path.len()
    }

    /// The concrete path at `depth` followed by `seg`.
    fn descend(&mut self, depth: usize, seg: Seg<'a>) {
        self.at.truncate(depth);
        self.at.push(seg);
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

    /// The elements of `items` (the list at depth `depth`) whose `key` equals `value`.
    fn find(&mut self, items: &[Value], key: &str, value: &KeyValue, depth: usize, attached: bool) -> Found {
        if attached {
            self.at.truncate(depth);
            self.lists.find(&self.at, key, value, items)
        } else {
            Found::scan(items, key, value)
        }
    }

    fn apply(&mut self, current: &mut Value, depth: usize, attached: bool) -> Result<bool, WalkError> {
        let path = self.path;
        match &path[depth] {
            Node::Object(name) => {
                let Value::Object(map) = current else {
                    return Err(mismatch("object", current));
                };
                if !self.tester.allows(depth, map.contains_key(name)) {
                    return Ok(false);
                }
                if self.is_last(depth) {
                    let Some(new) = self.setter.value_for(map.get(name)).map_err(WalkError)? else {
                        return Ok(false);
                    };
                    let old = map.insert(name.clone(), new);
                    if attached {
                        self.descend(depth, Seg::Field(name));
                        self.lists.replaced(&self.at, old.as_ref());
                    }
                    return Ok(true);
                }
                if let Some(next) = map.get_mut(name) {
                    if attached {
                        self.descend(depth, Seg::Field(name));
                    }
                    return self.apply(next, depth + 1, attached);
                }
                let mut next = self.empty_container(depth + 1);
                let changed = self.apply(&mut next, depth + 1, false)?;
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
                    self.upsert(items, key, value, depth, attached)
                } else {
                    self.apply_list(items, key, value, depth, attached)
                }
            }
        }
    }

    fn apply_list(
        &mut self,
        items: &mut Vec<Value>,
        key: &str,
        value: &KeyValue,
        depth: usize,
        attached: bool,
    ) -> Result<bool, WalkError> {
        if *value == KeyValue::Glob {
            // A glob with MustNotExist can never hold (Gatekeeper checks ExistsOkay here).
            if !self.tester.exists_ok(depth) {
                return Ok(false);
            }
            let mut changed = false;
            for (position, item) in items.iter_mut().enumerate() {
                if attached {
                    self.descend(depth, Seg::Index(position_u32(position)));
                }
                changed |= self.apply(item, depth + 1, attached)?;
            }
            return Ok(changed);
        }
        let found = self.find(items, key, value, depth, attached);
        if !found.matches().is_empty() {
            if !self.tester.exists_ok(depth) {
                return Ok(false);
            }
            let mut changed = false;
            for &position in found.matches() {
                if attached {
                    self.descend(depth, Seg::Index(position));
                }
                changed |= self.apply(&mut items[position as usize], depth + 1, attached)?;
            }
            return Ok(changed);
        }
        if !self.tester.missing_ok(depth) {
            return Ok(false);
        }
        let mut element = Self::new_element(key, value);
        if !self.apply(&mut element, depth + 1, false)? {
            return Ok(false);
        }
        items.push(element);
        if attached {
            self.at.truncate(depth);
            self.lists.pushed(&self.at, items);
        }
        Ok(true)
    }

    /// A location ending in `[key: value]`: replace the first matching element wholesale, or append.
    /// An element that is not an object before the first match fails the walk.
    fn upsert(
        &mut self,
        items: &mut Vec<Value>,
        key: &str,
        value: &KeyValue,
        depth: usize,
        attached: bool,
    ) -> Result<bool, WalkError> {
        if *value == KeyValue::Glob {
            return Err(WalkError("last path entry can not be globbed".into()));
        }
        let setter = self.setter;
        let element = setter.element().map_err(WalkError)?;
        let found = self.find(items, key, value, depth, attached);
        if let Some(bad) = found.first_non_object
            && found.first().is_none_or(|first| (bad as usize) < first)
        {
            return Err(mismatch("object", &items[bad as usize]));
        }
        if let Some(first) = found.first() {
            if !self.tester.exists_ok(depth) || items[first] == *element {
                return Ok(false);
            }
            let old = std::mem::replace(&mut items[first], element.clone());
            if attached {
                self.at.truncate(depth);
                self.lists
                    .replaced_element(&self.at, position_u32(first), &old, &items[first]);
            }
            return Ok(true);
        }
        if !self.tester.missing_ok(depth) {
            return Ok(false);
        }
        items.push(element.clone());
        if attached {
            self.at.truncate(depth);
            self.lists.pushed(&self.at, items);
        }
        Ok(true)
    }

    /// [`Walk::apply`] without writing: whether it would change something or fail.
    fn probe(&mut self, current: &Value, depth: usize, attached: bool) -> bool {
        let path = self.path;
        match &path[depth] {
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
                    Some(next) => {
                        if attached {
                            self.descend(depth, Seg::Field(name));
                        }
                        self.probe(next, depth + 1, attached)
                    }
                    None => self.probe(&self.empty_container(depth + 1), depth + 1, false),
                }
            }
            Node::List { key, value } => {
                let Value::Array(items) = current else {
                    return true;
                };
                if self.is_last(depth) {
                    self.probe_upsert(items, key, value, depth, attached)
                } else {
                    self.probe_list(items, key, value, depth, attached)
                }
            }
        }
    }

    fn probe_list(
        &mut self,
        items: &[Value],
        key: &str,
        value: &KeyValue,
        depth: usize,
        attached: bool,
    ) -> bool {
        if *value == KeyValue::Glob {
            if !self.tester.exists_ok(depth) {
                return false;
            }
            for (position, item) in items.iter().enumerate() {
                if attached {
                    self.descend(depth, Seg::Index(position_u32(position)));
                }
                if self.probe(item, depth + 1, attached) {
                    return true;
                }
            }
            return false;
        }
        let found = self.find(items, key, value, depth, attached);
        if !found.matches().is_empty() {
            if !self.tester.exists_ok(depth) {
                return false;
            }
            for &position in found.matches() {
                if attached {
                    self.descend(depth, Seg::Index(position));
                }
                if self.probe(&items[position as usize], depth + 1, attached) {
                    return true;
                }
            }
            return false;
        }
        self.tester.missing_ok(depth) && self.probe(&Self::new_element(key, value), depth + 1, false)
    }

    fn probe_upsert(
        &mut self,
        items: &[Value],
        key: &str,
        value: &KeyValue,
        depth: usize,
        attached: bool,
    ) -> bool {
        let setter = self.setter;
        let Ok(element) = setter.element() else {
            return true;
        };
        if *value == KeyValue::Glob {
            return true;
        }
        let found = self.find(items, key, value, depth, attached);
        if let Some(bad) = found.first_non_object
            && found.first().is_none_or(|first| (bad as usize) < first)
        {
            return true;
        }
        match found.first() {
            Some(first) => self.tester.exists_ok(depth) && items[first] != *element,
            None => self.tester.missing_ok(depth),
        }
    }
}

#[cfg(test)]
mod tests;
