//! Keyed-list lookups (`[name: x]`) by index, within one admission.
//!
//! Gatekeeper finds the elements of `env[name: VAR_1]` by scanning the list. With N mutators each
//! adding one element to the same list, that scan makes an admission cost N². [`KeyedLists`]
//! indexes a list the first time a walk looks a key up in it (from key value to positions) and
//! keeps the index up to date as walks change the object, so each later lookup costs a hash.
//!
//! A list is identified by its concrete path from the object's root (field names and element
//! positions), so an index stays valid however the object is moved or copied (the engine copies it
//! only once a mutator will change it, with the same shape). The walks report every write:
//! - an element pushed onto an indexed list is added to its indexes;
//! - an element replaced in place moves between keys of its list's indexes, and indexes below it
//!   are dropped;
//! - a field whose old value was an object or a list and is replaced drops every index at or
//!   below it.
//!
//! Nothing else changes an object during a Gatekeeper run. Lists under containers a walk creates
//! (not yet part of the object) are never indexed. Lookups return only positions whose element
//! really has the key (checked against the object), and a debug build checks every lookup against
//! a scan.

use std::hash::{BuildHasher, Hash};

use serde_json::{Map, Value};

use super::location::KeyValue;
use crate::vocab::FastMap;

/// One step of a concrete path from the object's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Seg<'a> {
    /// A field of an object.
    Field(&'a str),
    /// An element of a list.
    Index(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnedSeg {
    Field(Box<str>),
    Index(u32),
}

impl OwnedSeg {
    fn is(&self, seg: &Seg<'_>) -> bool {
        match (self, seg) {
            (OwnedSeg::Field(a), Seg::Field(b)) => **a == **b,
            (OwnedSeg::Index(a), Seg::Index(b)) => a == b,
            _ => false,
        }
    }
}

fn same_path(owned: &[OwnedSeg], path: &[Seg<'_>]) -> bool {
    owned.len() == path.len() && owned.iter().zip(path).all(|(a, b)| a.is(b))
}

fn under(owned: &[OwnedSeg], prefix: &[Seg<'_>]) -> bool {
    owned.len() >= prefix.len() && owned.iter().zip(prefix).all(|(a, b)| a.is(b))
}

/// Whether a list of `len` elements is worth indexing: for a short one, hashing costs more than
/// comparing a few keys. Debug builds (the tests) index every list, so that the index is what they
/// exercise, and check it.
fn worth_indexing(len: usize) -> bool {
    cfg!(debug_assertions) || len >= 16
}

/// A list element's key field. Elements of keyed lists are small objects, for which a linear scan
/// is several times faster than hashing the key.
pub(crate) fn key_field_of<'v>(object: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if object.len() <= 16 {
        object.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        object.get(key)
    }
}

pub(crate) fn key_field<'v>(item: &'v Value, key: &str) -> Option<&'v Value> {
    item.as_object().and_then(|object| key_field_of(object, key))
}

/// The elements of a list whose key field equals a [`KeyValue`], in list order, and the first
/// element that is not an object (which fails a walk that must replace an element).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Found {
    matches: Vec<u32>,
    pub(crate) first_non_object: Option<u32>,
}

impl Found {
    /// Scans `items` as Gatekeeper does.
    pub(crate) fn scan(items: &[Value], key: &str, value: &KeyValue) -> Self {
        let mut found = Found::default();
        for (position, item) in items.iter().enumerate() {
            let position = position_u32(position);
            match item {
                Value::Object(object) => {
                    if key_field_of(object, key).is_some_and(|field| value.matches(field)) {
                        found.matches.push(position);
                    }
                }
                _ => {
                    found.first_non_object.get_or_insert(position);
                }
            }
        }
        found
    }

    /// The matching positions, ascending.
    pub(crate) fn matches(&self) -> &[u32] {
        &self.matches
    }

    /// The first matching position.
    pub(crate) fn first(&self) -> Option<usize> {
        self.matches.first().map(|&p| p as usize)
    }
}

fn position_u32(position: usize) -> u32 {
    u32::try_from(position).expect("lists shorter than 2^32 elements")
}

/// The hash under which an element whose key field is `field` is indexed: only strings and
/// integers can equal a [`KeyValue`].
fn field_hash(hasher: &foldhash::fast::FixedState, field: &Value) -> Option<u64> {
    match field {
        Value::String(s) => Some(hasher.hash_one((0u8, s.as_str()))),
        Value::Number(n) => n.as_i64().map(|i| hasher.hash_one((1u8, i))),
        _ => None,
    }
}

fn value_hash(hasher: &foldhash::fast::FixedState, value: &KeyValue) -> Option<u64> {
    match value {
        KeyValue::Str(s) => Some(hasher.hash_one((0u8, s.as_str()))),
        KeyValue::Int(i) => Some(hasher.hash_one((1u8, *i))),
        KeyValue::Glob => None,
    }
}

/// The index of one list for one key field.
#[derive(Debug)]
struct Entry {
    path: Box<[OwnedSeg]>,
    key: Box<str>,
    /// Positions (ascending) of the elements by the hash of their key field.
    positions: FastMap<u64, Vec<u32>>,
    first_non_object: Option<u32>,
    /// How many elements were indexed: a list of another length was changed behind the index.
    len: usize,
}

impl Entry {
    fn build(hasher: &foldhash::fast::FixedState, path: &[Seg<'_>], key: &str, items: &[Value]) -> Self {
        let mut entry = Entry {
            path: path
                .iter()
                .map(|seg| match *seg {
                    Seg::Field(name) => OwnedSeg::Field(name.into()),
                    Seg::Index(i) => OwnedSeg::Index(i),
                })
                .collect(),
            key: key.into(),
            positions: FastMap::default(),
            first_non_object: None,
            len: 0,
        };
        for item in items {
            entry.push(hasher, item);
        }
        entry
    }

    fn push(&mut self, hasher: &foldhash::fast::FixedState, item: &Value) {
        let position = position_u32(self.len);
        self.len += 1;
        match item {
            Value::Object(object) => {
                if let Some(hash) = key_field_of(object, &self.key).and_then(|f| field_hash(hasher, f)) {
                    self.positions.entry(hash).or_default().push(position);
                }
            }
            _ => {
                self.first_non_object.get_or_insert(position);
            }
        }
    }

    /// Moves `position` from the key of `old` to the key of `new`; `false` when the index must be
    /// rebuilt instead (an element that is or was not an object).
    fn replace(
        &mut self,
        hasher: &foldhash::fast::FixedState,
        position: u32,
        old: &Value,
        new: &Value,
    ) -> bool {
        let hash_of = |item: &Value| key_field(item, &self.key).and_then(|f| field_hash(hasher, f));
        if !old.is_object() || !new.is_object() {
            return false;
        }
        let (before, after) = (hash_of(old), hash_of(new));
        if before == after {
            return true;
        }
        if let Some(hash) = before
            && let Some(positions) = self.positions.get_mut(&hash)
        {
            positions.retain(|&p| p != position);
            if positions.is_empty() {
                self.positions.remove(&hash);
            }
        }
        if let Some(hash) = after {
            let positions = self.positions.entry(hash).or_default();
            let at = positions.partition_point(|&p| p < position);
            positions.insert(at, position);
        }
        true
    }

    fn find(&self, hasher: &foldhash::fast::FixedState, value: &KeyValue, items: &[Value]) -> Found {
        let matches = value_hash(hasher, value)
            .and_then(|hash| self.positions.get(&hash))
            .map(|positions| {
                positions
                    .iter()
                    .copied()
                    .filter(|&p| {
                        items
                            .get(p as usize)
                            .and_then(|item| key_field(item, &self.key))
                            .is_some_and(|field| value.matches(field))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Found {
            matches,
            first_non_object: self.first_non_object,
        }
    }
}

/// The per-admission index of keyed lists (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct KeyedLists {
    /// Entries by the hash of their path.
    by_path: FastMap<u64, Vec<Entry>>,
    hasher: foldhash::fast::FixedState,
    /// Scan every list (one-off walks, and tests comparing the two).
    disabled: bool,
}

impl KeyedLists {
    /// An index that indexes nothing: every lookup scans, as Gatekeeper does.
    pub(crate) fn scan_only() -> Self {
        Self {
            disabled: true,
            ..Self::default()
        }
    }

    fn path_hash(&self, path: &[Seg<'_>]) -> u64 {
        self.hasher.hash_one(path)
    }

    /// The elements of the list `items`, found at `path`, whose `key` field equals `value` (not a
    /// glob).
    pub(crate) fn find(&mut self, path: &[Seg<'_>], key: &str, value: &KeyValue, items: &[Value]) -> Found {
        if self.disabled || !worth_indexing(items.len()) {
            return Found::scan(items, key, value);
        }
        let hash = self.path_hash(path);
        let hasher = self.hasher.clone();
        let entries = self.by_path.entry(hash).or_default();
        let at = entries
            .iter()
            .position(|e| *e.key == *key && same_path(&e.path, path));
        let entry = match at {
            Some(at) if entries[at].len == items.len() => &entries[at],
            Some(at) => {
                debug_assert!(false, "keyed-list index out of date at {path:?}");
                entries[at] = Entry::build(&hasher, path, key, items);
                &entries[at]
            }
            None => {
                entries.push(Entry::build(&hasher, path, key, items));
                entries.last().expect("just pushed")
            }
        };
        let found = entry.find(&hasher, value, items);
        #[cfg(debug_assertions)]
        assert_eq!(
            found,
            Found::scan(items, key, value),
            "keyed-list index at {path:?}"
        );
        found
    }

    /// `items`, the list at `path`, has just had an element pushed.
    pub(crate) fn pushed(&mut self, path: &[Seg<'_>], items: &[Value]) {
        if self.by_path.is_empty() {
            return;
        }
        let hash = self.path_hash(path);
        let Some(entries) = self.by_path.get_mut(&hash) else {
            return;
        };
        let item = items.last().expect("an element was pushed");
        for entry in entries.iter_mut().filter(|e| same_path(&e.path, path)) {
            if entry.len + 1 == items.len() {
                entry.push(&self.hasher, item);
            } else {
                debug_assert!(false, "keyed-list index out of date at {path:?}");
                *entry = Entry::build(&self.hasher, path, &entry.key.clone(), items);
            }
        }
    }

    /// The element at `position` of the list at `path` was `old` and is now `new`.
    pub(crate) fn replaced_element(&mut self, path: &[Seg<'_>], position: u32, old: &Value, new: &Value) {
        if self.by_path.is_empty() {
            return;
        }
        let hash = self.path_hash(path);
        if let Some(entries) = self.by_path.get_mut(&hash) {
            let hasher = &self.hasher;
            entries.retain_mut(|e| !same_path(&e.path, path) || e.replace(hasher, position, old, new));
        }
        let mut below = path.to_vec();
        below.push(Seg::Index(position));
        self.drop_under(&below, Some(old));
    }

    /// The field at `path` held `old` and now holds something else.
    pub(crate) fn replaced(&mut self, path: &[Seg<'_>], old: Option<&Value>) {
        self.drop_under(path, old);
    }

    /// Drops the indexes at or below `path`, where `old` was: only an object or a list can have
    /// had indexed lists at or below it.
    fn drop_under(&mut self, path: &[Seg<'_>], old: Option<&Value>) {
        if self.by_path.is_empty() || !matches!(old, Some(Value::Object(_) | Value::Array(_))) {
            return;
        }
        self.by_path.retain(|_, entries| {
            entries.retain(|e| !under(&e.path, path));
            !entries.is_empty()
        });
    }
}

#[cfg(test)]
mod tests;
