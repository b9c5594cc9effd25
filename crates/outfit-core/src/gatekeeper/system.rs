//! The compiled set of Gatekeeper mutators and Gatekeeper's loop (`pkg/mutation/system.go`): apply
//! every matching mutator in order (kind, then name), repeat until an iteration leaves the object
//! as it found it, and fail after `mutators + 1` iterations.

use std::{borrow::Cow, fmt};

use serde_json::{Map, Value};

use super::{index::MutatorIndex, keyed::KeyedLists, matching::Subject, mutator::Mutator, setters::Meta};
use crate::{vocab::Operation, vocab::PolicyRef};

/// The enabled Gatekeeper mutators, sorted, with an index ([`MutatorIndex`]) so that an object
/// only visits mutators that may match it.
#[derive(Debug, Default)]
pub struct Mutators {
    items: Vec<Mutator>,
    index: MutatorIndex,
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

impl std::error::Error for MutationError {}

impl Mutators {
    /// Sorts and indexes `items`. `loaded` is how many valid mutators were loaded, including those
    /// disabled by a conflict: Gatekeeper's iteration bound counts them too.
    pub(crate) fn new(mut items: Vec<Mutator>, loaded: usize) -> Self {
        // `PolicyKind` orders the Gatekeeper kinds as Gatekeeper does (byte-wise by kind), and
        // `String` orders names byte-wise.
        items.sort_by(|a, b| {
            (a.reference.kind, &a.reference.name).cmp(&(b.reference.kind, &b.reference.name))
        });
        Self {
            index: MutatorIndex::new(&items),
            items,
            max_iterations: loaded + 1,
        }
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

    /// Runs Gatekeeper's loop on `working` (or on `base`, copied into `working` only once some
    /// mutator will change it). Appends the mutators that changed the object to `applied`.
    pub(crate) fn run<'s, 'n>(
        &'s self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, 'n>,
        applied: &mut Vec<Cow<'s, PolicyRef>>,
        unchanged: &mut Vec<u32>,
    ) -> Result<(), MutationError> {
        self.run_with(base, working, input, applied, unchanged, RunState::new(false))
    }

    /// [`Mutators::run`] visiting every mutator and scanning every keyed list, as Gatekeeper
    /// does: what the indexes must not change.
    #[cfg(test)]
    pub(crate) fn run_exhaustive<'s, 'n>(
        &'s self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, 'n>,
        applied: &mut Vec<Cow<'s, PolicyRef>>,
        unchanged: &mut Vec<u32>,
    ) -> Result<(), MutationError> {
        self.run_with(base, working, input, applied, unchanged, RunState::new(true))
    }

    fn run_with<'s, 'n>(
        &'s self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, 'n>,
        applied: &mut Vec<Cow<'s, PolicyRef>>,
        unchanged: &mut Vec<u32>,
        mut state: RunState<'s>,
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
            let needs_snapshot = iteration > 1 || !untouched;
            let mut cursor = Cursor {
                after: &mut after,
                needs_snapshot,
                snapshot: &mut snapshot,
            };
            while let Some(position) = self.step(base, working, input, &mut state, &mut cursor)? {
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
        // The mutators that matched and never changed the object, each once.
        unchanged.append(&mut state.unchanged);
        unchanged.sort_unstable();
        unchanged.dedup();
        if !unchanged.is_empty() && !changed_by.is_empty() {
            let mut changed = changed_by.clone();
            changed.sort_unstable();
            unchanged.retain(|p| changed.binary_search(p).is_err());
        }
        if untouched && working.as_ref() == Some(base) {
            // Gatekeeper: an object equal to its input was not mutated.
            *working = None;
            return Ok(());
        }
        self.record(changed_by, applied);
        Ok(())
    }

    /// Appends the mutators at `changed_by` to `applied`, each once, in the order they first
    /// changed the object.
    fn record<'s>(&'s self, changed_by: Vec<u32>, applied: &mut Vec<Cow<'s, PolicyRef>>) {
        let before = applied.len();
        let mut seen = vec![false; self.items.len()];
        for position in changed_by {
            if std::mem::replace(&mut seen[position as usize], true) {
                continue;
            }
            let reference = &self.items[position as usize].reference;
            if !applied[..before].iter().any(|a| **a == *reference) {
                applied.push(Cow::Borrowed(reference));
            }
        }
    }

    /// Applies candidates after the cursor until one changes the object; returns its position, or
    /// `None` when the iteration is over.
    fn step<'s>(
        &'s self,
        base: &Value,
        working: &mut Option<Value>,
        input: &RunInput<'_, '_>,
        state: &mut RunState<'s>,
        cursor: &mut Cursor<'_>,
    ) -> Result<Option<u32>, MutationError> {
        loop {
            // Once a private copy exists (and the iteration's snapshot is taken), mutating it
            // directly is cheaper than probing first: the walk reports whether anything changed.
            let probe = working.is_none() || (cursor.needs_snapshot && cursor.snapshot.is_none());
            let current = working.as_ref().unwrap_or(base);
            let Some(subject) = Subject::new(current, input.namespace, input.operation) else {
                return Ok(None);
            };
            if subject.group.ends_with(".gatekeeper.sh") {
                return Ok(None);
            }
            let Some(position) = self.next_to_mutate(&subject, input, state, cursor.after, probe) else {
                return Ok(None);
            };
            let mutator = &self.items[position as usize];
            // Built while the object is still borrowed: it copies the name and namespace it needs.
            let setter = mutator.setter(Meta {
                name: subject.name(),
                namespace: subject.namespace,
            });
            if cursor.needs_snapshot && cursor.snapshot.is_none() {
                *cursor.snapshot = Some(current.clone());
            }
            let object = working.get_or_insert_with(|| base.clone());
            match mutator.apply(&setter, object, &mut state.lists) {
                Ok(true) => return Ok(Some(position)),
                Ok(false) => state.unchanged.push(position),
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
    fn next_to_mutate<'s>(
        &'s self,
        subject: &Subject<'_>,
        input: &RunInput<'_, '_>,
        state: &mut RunState<'s>,
        after: &mut Option<u32>,
        probe: bool,
    ) -> Option<u32> {
        let RunState {
            candidates,
            lists,
            unchanged,
        } = state;
        let candidates = candidates.get(self, subject);
        let mut next = after.map_or(0, |a| candidates.partition_point(|&p| p <= a));
        while let Some(&position) = candidates.get(next) {
            next += 1;
            *after = Some(position);
            let mutator = &self.items[position as usize];
            if !mutator.matches(subject, input.namespace_labels) {
                continue;
            }
            if !probe || mutator.would_change_in(subject, lists) {
                return Some(position);
            }
            unchanged.push(position);
        }
        None
    }
}

/// Where an iteration of the loop stands.
struct Cursor<'a> {
    /// The last candidate visited.
    after: &'a mut Option<u32>,
    /// Whether the iteration must remember the object as it found it (to tell whether it changed).
    needs_snapshot: bool,
    /// The object as the iteration found it, taken before its first change.
    snapshot: &'a mut Option<Value>,
}

/// What one run keeps between mutators: the candidates for the object's identity and the index of
/// its keyed lists.
struct RunState<'s> {
    candidates: CandidateCache<'s>,
    lists: KeyedLists,
    /// Mutators that matched and changed nothing when visited (maybe changing it later).
    unchanged: Vec<u32>,
}

impl RunState<'_> {
    fn new(exhaustive: bool) -> Self {
        Self {
            candidates: CandidateCache {
                identity: None,
                positions: Cow::Borrowed(&[]),
                exhaustive,
            },
            lists: if exhaustive {
                KeyedLists::scan_only()
            } else {
                KeyedLists::default()
            },
            unchanged: Vec::new(),
        }
    }
}

/// The candidates for the identity (group, version, kind, namespace) of the object last asked
/// about. A mutator may change any field but metadata, `apiVersion` and `kind` included, so the
/// identity is compared at every step; it almost never changes.
struct CandidateCache<'s> {
    identity: Option<Identity>,
    positions: Cow<'s, [u32]>,
    /// Every mutator is a candidate (tests).
    exhaustive: bool,
}

#[derive(Debug, PartialEq, Eq)]
struct Identity {
    group: String,
    version: String,
    kind: String,
    namespace: Option<String>,
}

impl Identity {
    fn of(subject: &Subject<'_>) -> Self {
        Self {
            group: subject.group.to_owned(),
            version: subject.version.to_owned(),
            kind: subject.kind.to_owned(),
            namespace: subject.namespace_key().map(str::to_owned),
        }
    }

    fn is(&self, subject: &Subject<'_>) -> bool {
        self.group == subject.group
            && self.version == subject.version
            && self.kind == subject.kind
            && self.namespace.as_deref() == subject.namespace_key()
    }
}

impl<'s> CandidateCache<'s> {
    fn get(&mut self, mutators: &'s Mutators, subject: &Subject<'_>) -> &[u32] {
        if !self.identity.as_ref().is_some_and(|i| i.is(subject)) {
            self.positions = if self.exhaustive {
                Cow::Owned((0..mutators.items.len()).map(|p| p as u32).collect())
            } else {
                mutators.index.candidates(&mutators.items, subject)
            };
            self.identity = Some(Identity::of(subject));
        }
        &self.positions
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
