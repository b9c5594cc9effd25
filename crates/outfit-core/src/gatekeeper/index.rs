//! Which mutators can match an object, found without visiting the others.
//!
//! Mutators are grouped into classes that agree on everything [`Mutator::matches`] reads of an
//! object's identity: `applyTo` (group, version, kind, operations), `match.kinds`, `scope`,
//! `namespaces`, `excludedNamespaces` and `source` (not the selectors or `name`, which read the
//! object's labels, its namespace's labels and its name). The classes are indexed by the kinds they
//! can apply to (`applyTo`'s exact group, version and kind; AssignMetadata, which has no
//! `applyTo`, by the kinds its `match.kinds` names when it names them all) and, within a kind, by
//! the namespaces they can match (exact names, `x*` prefixes and `*x` suffixes; a class with
//! `*x*` or no `namespaces` is a candidate in every namespace).
//!
//! For an object, the index yields the classes that may match, checks each class's identity
//! criteria once (on one of its mutators: they are the same for all of them), and returns the
//! positions of the classes that pass. That is a superset of the mutators that match: each still
//! goes through the full match. Mutators sharing their criteria (every mutator excluding
//! `kube-*`, say) cost one check for an object none of them can match, however many there are.

use std::{borrow::Cow, collections::HashMap};

use super::{
    matching::{ApplyTo, Kinds, Scope, Source, Subject, Wildcard},
    mutator::Mutator,
};
use crate::vocab::FastMap;

/// What a class of mutators agrees on.
#[derive(PartialEq, Eq, Hash)]
struct Filter<'m> {
    metadata: bool,
    apply_to: &'m [ApplyTo],
    kinds: &'m [Kinds],
    scope: Scope,
    namespaces: &'m [Wildcard],
    excluded: &'m [Wildcard],
    source: Source,
}

impl<'m> Filter<'m> {
    fn of(mutator: &'m Mutator) -> Self {
        let matcher = &mutator.matcher;
        Filter {
            metadata: mutator.is_metadata(),
            apply_to: &mutator.apply_to,
            kinds: &matcher.kinds,
            scope: matcher.scope,
            namespaces: &matcher.namespaces,
            excluded: &matcher.excluded_namespaces,
            source: matcher.source,
        }
    }
}

/// Mutators with the same [`Filter`].
#[derive(Debug)]
struct Class {
    /// The position of one of them, whose identity criteria stand for all.
    representative: u32,
    /// Their positions, ascending.
    positions: Vec<u32>,
}

/// The classes one group, version and kind may meet.
#[derive(Debug)]
struct GroupVersion {
    group: String,
    version: String,
    namespaces: Namespaces,
}

/// The index (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct MutatorIndex {
    classes: Vec<Class>,
    /// Classes whose `applyTo` names the kind, by kind, then group and version.
    by_kind: FastMap<String, Vec<GroupVersion>>,
    /// AssignMetadata classes whose `match.kinds` names every kind they match.
    by_match_kind: FastMap<String, Namespaces>,
    /// AssignMetadata classes that may match any kind.
    any_kind: Namespaces,
}

impl MutatorIndex {
    /// Indexes `items` (in application order).
    pub(crate) fn new(items: &[Mutator]) -> Self {
        let mut index = Self::default();
        let mut ids: HashMap<Filter<'_>, u32> = HashMap::new();
        for (position, mutator) in items.iter().enumerate() {
            let position = u32::try_from(position).expect("fewer than 2^32 mutators");
            let next = u32::try_from(index.classes.len()).expect("fewer than 2^32 classes");
            let id = *ids.entry(Filter::of(mutator)).or_insert_with(|| {
                index.classes.push(Class {
                    representative: position,
                    positions: Vec::new(),
                });
                next
            });
            index.classes[id as usize].positions.push(position);
        }
        for id in 0..index.classes.len() {
            let mutator = &items[index.classes[id].representative as usize];
            index.add(u32::try_from(id).expect("fewer than 2^32 classes"), mutator);
        }
        index
    }

    fn add(&mut self, id: u32, mutator: &Mutator) {
        let namespaces = &mutator.matcher.namespaces;
        if !mutator.is_metadata() {
            for entry in &mutator.apply_to {
                for kind in &entry.kinds {
                    let versions = self.by_kind.entry(kind.clone()).or_default();
                    for group in &entry.groups {
                        for version in &entry.versions {
                            group_version(versions, group, version).add(id, namespaces);
                        }
                    }
                }
            }
            return;
        }
        match explicit_kinds(&mutator.matcher.kinds) {
            Some(kinds) => {
                for kind in kinds {
                    self.by_match_kind
                        .entry(kind.to_owned())
                        .or_default()
                        .add(id, namespaces);
                }
            }
            None => self.any_kind.add(id, namespaces),
        }
    }

    /// The positions, ascending, of the mutators of `items` (the indexed ones) that may match
    /// `subject`: every mutator that matches it is among them.
    pub(crate) fn candidates<'s>(&'s self, items: &[Mutator], subject: &Subject<'_>) -> Cow<'s, [u32]> {
        let namespace = subject.namespace_key();
        let mut classes: Vec<u32> = Vec::new();
        if let Some(versions) = self.by_kind.get(subject.kind) {
            for entry in versions {
                if entry.group == subject.group && entry.version == subject.version {
                    entry.namespaces.lookup(namespace, &mut classes);
                }
            }
        }
        if let Some(namespaces) = self.by_match_kind.get(subject.kind) {
            namespaces.lookup(namespace, &mut classes);
        }
        self.any_kind.lookup(namespace, &mut classes);
        classes.sort_unstable();
        classes.dedup();
        classes.retain(|&id| {
            let representative = self.classes[id as usize].representative;
            items[representative as usize].matches_identity(subject)
        });
        match classes.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(&self.classes[*one as usize].positions),
            many => {
                let mut positions: Vec<u32> = many
                    .iter()
                    .flat_map(|&id| self.classes[id as usize].positions.iter().copied())
                    .collect();
                positions.sort_unstable();
                Cow::Owned(positions)
            }
        }
    }
}

fn group_version<'v>(versions: &'v mut Vec<GroupVersion>, group: &str, version: &str) -> &'v mut Namespaces {
    let at = match versions
        .iter()
        .position(|e| e.group == group && e.version == version)
    {
        Some(at) => at,
        None => {
            versions.push(GroupVersion {
                group: group.to_owned(),
                version: version.to_owned(),
                namespaces: Namespaces::default(),
            });
            versions.len() - 1
        }
    };
    &mut versions[at].namespaces
}

/// The kinds `match.kinds` restricts an object to, when every entry names its kinds (an empty
/// list or `*` means any kind).
fn explicit_kinds(kinds: &[Kinds]) -> Option<Vec<&str>> {
    if kinds.is_empty() {
        return None;
    }
    let mut names = Vec::new();
    for entry in kinds {
        if entry.kinds.is_empty() || entry.kinds.iter().any(|k| k == "*") {
            return None;
        }
        names.extend(entry.kinds.iter().map(String::as_str));
    }
    names.sort_unstable();
    names.dedup();
    Some(names)
}

/// What a `namespaces` pattern matches, as [`Wildcard::matches`] reads it.
#[derive(Debug, PartialEq, Eq)]
enum Pattern<'w> {
    Exact(&'w str),
    Prefix(&'w str),
    Suffix(&'w str),
    /// `*x*`, `*`: not indexed.
    Other,
}

fn classify(wildcard: &Wildcard) -> Pattern<'_> {
    let w = wildcard.0.as_str();
    match (w.strip_prefix('*'), w.strip_suffix('*')) {
        (Some(_), Some(_)) if w.len() >= 2 => Pattern::Other,
        (Some(""), _) | (None, Some("")) => Pattern::Other,
        (Some(suffix), _) => Pattern::Suffix(suffix),
        (None, Some(prefix)) => Pattern::Prefix(prefix),
        (None, None) => Pattern::Exact(w),
    }
}

/// Classes by the namespaces their `namespaces` list can match.
#[derive(Debug, Default)]
struct Namespaces {
    /// Every class: candidates for objects with no namespace, which `namespaces` never filters.
    all: Vec<u32>,
    /// Classes with no `namespaces`, or a pattern not indexed.
    anywhere: Vec<u32>,
    exact: FastMap<String, Vec<u32>>,
    prefix: FastMap<String, Vec<u32>>,
    /// The lengths of the prefixes, ascending.
    prefix_lengths: Vec<usize>,
    suffix: FastMap<String, Vec<u32>>,
    suffix_lengths: Vec<usize>,
}

fn push_once(ids: &mut Vec<u32>, id: u32) {
    if ids.last() != Some(&id) {
        ids.push(id);
    }
}

fn add_length(lengths: &mut Vec<usize>, length: usize) {
    if let Err(at) = lengths.binary_search(&length) {
        lengths.insert(at, length);
    }
}

impl Namespaces {
    /// Adds class `id` (classes are added in ascending order, each once per kind it applies to).
    fn add(&mut self, id: u32, namespaces: &[Wildcard]) {
        if self.all.last() == Some(&id) {
            return;
        }
        self.all.push(id);
        let patterns: Vec<Pattern<'_>> = namespaces.iter().map(classify).collect();
        if patterns.is_empty() || patterns.contains(&Pattern::Other) {
            self.anywhere.push(id);
            return;
        }
        for pattern in patterns {
            match pattern {
                Pattern::Exact(name) => push_once(self.exact.entry(name.to_owned()).or_default(), id),
                Pattern::Prefix(prefix) => {
                    push_once(self.prefix.entry(prefix.to_owned()).or_default(), id);
                    add_length(&mut self.prefix_lengths, prefix.len());
                }
                Pattern::Suffix(suffix) => {
                    push_once(self.suffix.entry(suffix.to_owned()).or_default(), id);
                    add_length(&mut self.suffix_lengths, suffix.len());
                }
                Pattern::Other => unreachable!("handled above"),
            }
        }
    }

    /// Appends the classes whose `namespaces` may match `namespace` (`None`: every class).
    fn lookup(&self, namespace: Option<&str>, out: &mut Vec<u32>) {
        let Some(namespace) = namespace else {
            out.extend_from_slice(&self.all);
            return;
        };
        out.extend_from_slice(&self.anywhere);
        if let Some(ids) = self.exact.get(namespace) {
            out.extend_from_slice(ids);
        }
        for &length in self.prefix_lengths.iter().take_while(|&&l| l <= namespace.len()) {
            if let Some(ids) = namespace.get(..length).and_then(|p| self.prefix.get(p)) {
                out.extend_from_slice(ids);
            }
        }
        for &length in self.suffix_lengths.iter().take_while(|&&l| l <= namespace.len()) {
            let start = namespace.len() - length;
            if let Some(ids) = namespace.get(start..).and_then(|s| self.suffix.get(s)) {
                out.extend_from_slice(ids);
            }
        }
    }
}

#[cfg(test)]
mod tests;
