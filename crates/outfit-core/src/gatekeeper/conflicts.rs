//! Schema conflicts between mutators (Gatekeeper's `pkg/mutation/schema`): two mutators that apply
//! to the same group/version/kind and operation but disagree on the shape of the object — one sees
//! an object where the other sees a list, one list is keyed by two fields, a set or an image string
//! where another goes below it. Gatekeeper disables every party to a conflict so that the result
//! does not depend on which was loaded first; outfit does the same and reports each at load.

use std::collections::{BTreeSet, HashMap};

use super::{
    Mutator, Terminal,
    location::{Node, quote},
};

/// Two mutators whose locations disagree on the object's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Index of the first mutator (in the slice given to [`find`]).
    pub first: usize,
    /// Index of the second.
    pub second: usize,
    /// What they disagree on, naming the field.
    pub detail: String,
}

/// What a location says a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape<'a> {
    Object,
    List(&'a str),
    Terminal(Terminal),
}

impl Shape<'_> {
    fn describe(self) -> String {
        match self {
            Shape::Object => "an object".into(),
            Shape::List(key) => format!("a list keyed by {}", quote(key)),
            Shape::Terminal(Terminal::Set) => "a set of values (ModifySet)".into(),
            Shape::Terminal(Terminal::String) => "an image string nothing may go below (AssignImage)".into(),
            Shape::Terminal(Terminal::Unknown) => "any value".into(),
        }
    }
}

/// The fields a location walks through, each with the shape the next node gives it. List
/// selectors only set the shape of the field before them; their values do not matter (`[name: a]`
/// and `[name: *]` are the same list).
fn steps(mutator: &Mutator, terminal: Terminal) -> Vec<(&str, Shape<'_>)> {
    let nodes = mutator.location.nodes();
    let mut out = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        if let Node::Object(name) = node {
            let shape = match nodes.get(index + 1) {
                None => Shape::Terminal(terminal),
                Some(Node::Object(_)) => Shape::Object,
                Some(Node::List { key, .. }) => Shape::List(key),
            };
            out.push((name.as_str(), shape));
        }
    }
    out
}

/// Where two locations first disagree, if they do.
fn disagreement(a: &[(&str, Shape<'_>)], b: &[(&str, Shape<'_>)]) -> Option<String> {
    let mut path = String::new();
    for (&(name_a, shape_a), &(name_b, shape_b)) in a.iter().zip(b) {
        if name_a != name_b {
            return None;
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&quote(name_a));
        let unknown = Shape::Terminal(Terminal::Unknown);
        if shape_a != shape_b && shape_a != unknown && shape_b != unknown {
            return Some(format!(
                "{path} is {} for one and {} for the other",
                shape_a.describe(),
                shape_b.describe()
            ));
        }
    }
    None
}

/// Every group/version/kind/operation a mutator is bound to.
fn bindings(mutator: &Mutator) -> BTreeSet<(&str, &str, &str, bool)> {
    let mut out = BTreeSet::new();
    for entry in &mutator.apply_to {
        for group in &entry.groups {
            for version in &entry.versions {
                for kind in &entry.kinds {
                    for (create, covered) in
                        [(true, entry.operations.create), (false, entry.operations.update)]
                    {
                        if covered {
                            out.insert((group.as_str(), version.as_str(), kind.as_str(), create));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every pair of conflicting mutators, each pair once, in index order.
pub fn find(mutators: &[Mutator]) -> Vec<Conflict> {
    let mut by_binding: HashMap<(&str, &str, &str, bool), Vec<usize>> = HashMap::new();
    let mut all_steps = Vec::with_capacity(mutators.len());
    for (index, mutator) in mutators.iter().enumerate() {
        let Some(terminal) = mutator.terminal() else {
            all_steps.push(Vec::new());
            continue;
        };
        all_steps.push(steps(mutator, terminal));
        for binding in bindings(mutator) {
            by_binding.entry(binding).or_default().push(index);
        }
    }
    let mut conflicts = Vec::new();
    for members in by_binding.values() {
        for (i, &first) in members.iter().enumerate() {
            for &second in &members[i + 1..] {
                if let Some(detail) = disagreement(&all_steps[first], &all_steps[second]) {
                    conflicts.push(Conflict {
                        first,
                        second,
                        detail,
                    });
                }
            }
        }
    }
    // A pair bound to several group/version/kind/operations is found once per binding.
    conflicts.sort_by_key(|c| (c.first, c.second));
    conflicts.dedup_by_key(|c| (c.first, c.second));
    conflicts
}
