//! The compiled set of Gatekeeper mutators and Gatekeeper's loop (`pkg/mutation/system.go`): apply
//! every matching mutator in order (kind, then name), repeat until an iteration leaves the object
//! as it found it, and fail after `mutators + 1` iterations.

use std::{borrow::Cow, fmt};

use serde_json::{Map, Value};

use super::{Mutator, matching::Subject, setters::Meta};
use crate::{
    engine::Operation,
    policy_set::{FastMap, PolicyRef},
};

/// Positions (in application order) of the mutators that can apply to one group and version of a
/// kind.
#[derive(Debug, Default)]
struct KindIndex {
    entries: Vec<(String, String, Vec<u32>)>,
}

/// The enabled Gatekeeper mutators, sorted, with an index from the kinds their `applyTo` names to
/// their positions, so an object only visits mutators that can apply to it.
#[derive(Debug, Default)]
pub struct Mutators {
    items: Vec<Mutator>,
    by_kind: FastMap<String, KindIndex>,
    /// AssignMetadata has no `applyTo`: it is a candidate for every object.
    unindexed: Vec<u32>,
    max_iterations: usize,
}

/// Why mutation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MutationError {
    /// A mutator hit a value of the wrong type on its path (or a non-string image).
    Failed {
        /// The mutator.
        mutator: PolicyRef,
        /// What went wrong.
        message: String,
    },
    /// The object still changed in the last allowed iteration.
    NotConverging {
        /// How many iterations ran.
        iterations: usize,
        /// The mutators that changed the object in the last iteration.
        mutators: Vec<PolicyRef>,
    },
}

impl fmt::Display for MutationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MutationError::Failed { mutator, message } => write!(f, "{mutator} failed: {message}"),
            MutationError::NotConverging { iterations, mutators } => {
                let names: Vec<String> = mutators.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "mutation not converging: the object still changed after {iterations} iterations (last changed by {})",
                    names.join(", ")
                )
            }
        }
    }
}

impl Mutators {
    /// Sorts and indexes `items`. `loaded` is how many valid mutators were loaded, including those
    /// disabled by a conflict: Gatekeeper's iteration bound counts them too.
    pub(crate) fn new(mut items: Vec<Mutator>, loaded: usize) -> Self {
        // `PolicyKind` orders the Gatekeeper kinds as Gatekeeper does (byte-wise by kind), and
        // `String` orders names byte-wise.
        items.sort_by(|a, b| {
            (a.reference.kind, &a.reference.name).cmp(&(b.reference.kind, &b.reference.name))
        });
        let mut set = Self {
            max_iterations: loaded + 1,
            ..Self::default()
        };
        for (position, mutator) in items.iter().enumerate() {
            let position = u32::try_from(position).expect("fewer than 2^32 mutators");
            if mutator.apply_to.is_empty() {
                set.unindexed.push(position);
            }
            for entry in &mutator.apply_to {
                for kind in &entry.kinds {
                    let index = set.by_kind.entry(kind.clone()).or_default();
                    for group in &entry.groups {
                        for version in &entry.versions {
                            index.add(group, version, position);
                        }
                    }
                }
            }
        }
        set.items = items;
        set
    }

    /// The enabled mutators, in application order.
    pub fn items(&self) -> &[Mutator] {
        &self.items
    }

    /// How many mutators are enabled.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no mutator is enabled.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The positions of the mutators that can apply to the object `subject` describes: those
    /// whose `applyTo` names its group, version and kind, and the AssignMetadata ones.
    fn candidates(&self, subject: &Subject<'_>) -> (&[u32], &[u32]) {
        let indexed = self
            .by_kind
            .get(subject.kind)
            .and_then(|index| index.positions(subject.group, subject.version))
            .unwrap_or(&[]);
        (indexed, &self.unindexed)
    }

    /// Runs Gatekeeper's loop on `working` (or on `base`, copied into `working` only once some
    /// mutator will change it). Appends the mutators that changed the object to `applied`.
    pub(crate) fn run<'s, 'n>(
        &'s self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, 'n>,
        applied: &mut Vec<Cow<'s, PolicyRef>>,
    ) -> Result<(), MutationError> {
        if self.items.is_empty() || !matches!(input.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let untouched = working.is_none();
        let mut changed_by: Vec<u32> = Vec::new();
        for iteration in 1..=self.max_iterations {
            let mut snapshot: Option<Value> = None;
            let mut this_round: Vec<u32> = Vec::new();
            let mut after = None;
            while let Some(position) = self.step(
                base,
                working,
                input,
                &mut after,
                iteration > 1 || !untouched,
                &mut snapshot,
            )? {
                this_round.push(position);
            }
            if this_round.is_empty() {
                break;
            }
            changed_by.extend(&this_round);
            let start = snapshot.as_ref().unwrap_or(base);
            if working.as_ref() == Some(start) {
                break;
            }
            if iteration == self.max_iterations {
                return Err(MutationError::NotConverging {
                    iterations: iteration,
                    mutators: this_round
                        .iter()
                        .map(|&p| self.items[p as usize].reference.clone())
                        .collect(),
                });
            }
        }
        if untouched && working.as_ref() == Some(base) {
            // Gatekeeper: an object equal to its input was not mutated.
            *working = None;
            return Ok(());
        }
        for position in changed_by {
            let reference = &self.items[position as usize].reference;
            if !applied.iter().any(|a| **a == *reference) {
                applied.push(Cow::Borrowed(reference));
            }
        }
        Ok(())
    }

    /// Applies candidates after `after` until one changes the object; returns its position, or
    /// `None` when the iteration is over.
    fn step(
        &self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, '_>,
        after: &mut Option<u32>,
        needs_snapshot: bool,
        snapshot: &mut Option<Value>,
    ) -> Result<Option<u32>, MutationError> {
        loop {
            // Once a private copy exists (and the iteration's snapshot is taken), mutating it
            // directly is cheaper than probing first: the walk reports whether anything changed.
            let probe = working.is_none() || (needs_snapshot && snapshot.is_none());
            let current = working.as_ref().unwrap_or(base);
            let Some(subject) = Subject::new(current, input.namespace, input.operation) else {
                return Ok(None);
            };
            if subject.group.ends_with(".gatekeeper.sh") {
                return Ok(None);
            }
            let Some(position) = self.next_to_mutate(&subject, input, after, probe) else {
                return Ok(None);
            };
            let mutator = &self.items[position as usize];
            // Built while the object is still borrowed: it copies the name and namespace it needs.
            let setter = mutator.setter(Meta {
                name: subject.name(),
                namespace: subject.namespace,
            });
            if needs_snapshot && snapshot.is_none() {
                *snapshot = Some(current.clone());
            }
            let object = working.get_or_insert_with(|| base.clone());
            match mutator.apply(&setter, object) {
                Ok(true) => return Ok(Some(position)),
                Ok(false) => {}
                Err(error) => {
                    return Err(MutationError::Failed {
                        mutator: mutator.reference.clone(),
                        message: format!("at {}: {}", mutator.location, error.0),
                    });
                }
            }
        }
    }

    /// The next candidate after `after` that matches (and, when `probe`, would change the object).
    fn next_to_mutate(
        &self,
        subject: &Subject<'_>,
        input: &RunInput<'_, '_>,
        after: &mut Option<u32>,
        probe: bool,
    ) -> Option<u32> {
        let (indexed, unindexed) = self.candidates(subject);
        let first_after = |positions: &[u32], after: Option<u32>| {
            let start = after.map_or(0, |a| positions.partition_point(|&p| p <= a));
            positions.get(start).copied()
        };
        loop {
            let position = match (first_after(indexed, *after), first_after(unindexed, *after)) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b)?,
            };
            *after = Some(position);
            let mutator = &self.items[position as usize];
            if mutator.matches(subject, input.namespace_labels) && (!probe || mutator.would_change(subject)) {
                return Some(position);
            }
        }
    }
}

/// What the loop needs besides the object.
pub(crate) struct RunInput<'a, 'n> {
    /// The request's namespace, for objects that name none.
    pub(crate) namespace: &'a str,
    /// The admission operation.
    pub(crate) operation: Operation,
    /// Labels of a loaded Namespace.
    pub(crate) namespace_labels: &'a dyn Fn(&str) -> Option<&'n Map<String, Value>>,
}

impl KindIndex {
    fn add(&mut self, group: &str, version: &str, position: u32) {
        match self
            .entries
            .iter_mut()
            .find(|(g, v, _)| g == group && v == version)
        {
            Some((_, _, positions)) => {
                if positions.last() != Some(&position) {
                    positions.push(position);
                }
            }
            None => self
                .entries
                .push((group.to_owned(), version.to_owned(), vec![position])),
        }
    }

    fn positions(&self, group: &str, version: &str) -> Option<&[u32]> {
        self.entries
            .iter()
            .find(|(g, v, _)| g == group && v == version)
            .map(|(_, _, positions)| positions.as_slice())
    }
}
