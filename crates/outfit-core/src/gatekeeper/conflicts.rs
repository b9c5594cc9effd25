//! Schema conflicts between mutators (Gatekeeper's `pkg/mutation/schema`): two mutators that apply
//! to the same group/version/kind and operation but disagree on the shape of the object — one sees
//! an object where the other sees a list, one list is keyed by two fields, a set or an image string
//! where another goes below it. Gatekeeper disables every party to a conflict so that the result
//! does not depend on which was loaded first; outfit does the same and reports each at load.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{
    action::Terminal,
    location::{Node, quote},
    mutator::Mutator,
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

/// Where two locations first disagree, if they do: the pairwise definition, which the trie in
/// [`find`] must agree with.
#[cfg(test)]
fn disagreement(a: &[(&str, Shape<'_>)], b: &[(&str, Shape<'_>)]) -> Option<String> {
    let mut path = Vec::new();
    for (&(name_a, shape_a), &(name_b, shape_b)) in a.iter().zip(b) {
        if name_a != name_b {
            return None;
        }
        path.push(name_a);
        if disagree(shape_a, shape_b) {
            return Some(describe(&path, shape_a, shape_b));
        }
    }
    None
}

/// Whether two shapes of one field conflict (`Unknown`, Assign's terminal, agrees with all).
fn disagree(a: Shape<'_>, b: Shape<'_>) -> bool {
    let unknown = Shape::Terminal(Terminal::Unknown);
    a != b && a != unknown && b != unknown
}

fn describe(path: &[&str], a: Shape<'_>, b: Shape<'_>) -> String {
    let path: Vec<String> = path.iter().map(|name| quote(name)).collect();
    format!(
        "{} is {} for one and {} for the other",
        path.join("."),
        a.describe(),
        b.describe()
    )
}

/// One field in the locations of the mutators bound to one group/version/kind/operation: a
/// trie, so that finding conflicts costs the length of the locations, not the square of their
/// count (10,000 Assigns on one kind took 17 s pairwise).
#[derive(Default)]
struct Field<'a> {
    /// The mutators whose location goes through this field, by the shape each gives it.
    claims: Vec<(Shape<'a>, Vec<usize>)>,
    children: HashMap<&'a str, Field<'a>>,
}

impl<'a> Field<'a> {
    fn insert(&mut self, index: usize, steps: &[(&'a str, Shape<'a>)]) {
        let mut field = self;
        for &(name, shape) in steps {
            field = field.children.entry(name).or_default();
            match field.claims.iter_mut().find(|(claimed, _)| *claimed == shape) {
                Some((_, members)) => members.push(index),
                None => field.claims.push((shape, vec![index])),
            }
        }
    }

    /// Adds every pair that disagrees here or below and is not in `seen`. Parents come before
    /// children, so a pair is recorded where it first disagrees, as [`disagreement`] defines it.
    fn collect(&self, path: &mut Vec<&'a str>, seen: &mut HashSet<(usize, usize)>, out: &mut Vec<Conflict>) {
        for (i, (shape_a, members_a)) in self.claims.iter().enumerate() {
            for (shape_b, members_b) in &self.claims[i + 1..] {
                if !disagree(*shape_a, *shape_b) {
                    continue;
                }
                for &a in members_a {
                    for &b in members_b {
                        let (first, second) = (a.min(b), a.max(b));
                        if seen.insert((first, second)) {
                            let (shape_first, shape_second) = if first == a {
                                (*shape_a, *shape_b)
                            } else {
                                (*shape_b, *shape_a)
                            };
                            out.push(Conflict {
                                first,
                                second,
                                detail: describe(path, shape_first, shape_second),
                            });
                        }
                    }
                }
            }
        }
        for (name, child) in &self.children {
            path.push(name);
            child.collect(path, seen, out);
            path.pop();
        }
    }
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
    let mut by_binding: HashMap<(&str, &str, &str, bool), Field<'_>> = HashMap::new();
    for (index, mutator) in mutators.iter().enumerate() {
        let Some(terminal) = mutator.terminal() else {
            continue;
        };
        let steps = steps(mutator, terminal);
        for binding in bindings(mutator) {
            by_binding.entry(binding).or_default().insert(index, &steps);
        }
    }
    // A pair bound to several group/version/kind/operations disagrees the same way in each (the
    // locations alone decide): `seen` keeps it once.
    let mut seen = HashSet::new();
    let mut conflicts = Vec::new();
    for root in by_binding.values() {
        root.collect(&mut Vec::new(), &mut seen, &mut conflicts);
    }
    conflicts.sort_by_key(|c| (c.first, c.second));
    conflicts
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::gatekeeper::test_support::mutator;

    /// A mutator from a few fields and shapes, so that random sets share prefixes often.
    fn build(index: usize, kind: u8, fields: &[u8], list: Option<u8>, pod: bool) -> Mutator {
        const NAMES: [&str; 3] = ["a", "b", "c"];
        let mut location: Vec<String> = fields
            .iter()
            .map(|&f| NAMES[usize::from(f % 3)].to_owned())
            .collect();
        if let (Some(key), Some(last)) = (list, location.last_mut()) {
            last.push_str(&format!("[{}: x]", NAMES[usize::from(key % 2)]));
            location.push("v".into());
        }
        let apply_to =
            json!([{"groups": [""], "versions": ["v1"], "kinds": [if pod { "Pod" } else { "Foo" }]}]);
        let name = format!("m{index}");
        let location = location.join(".");
        match kind % 3 {
            0 => mutator("Assign", &name, json!({"applyTo": apply_to, "location": location, "parameters": {"assign": {"value": 1}}})),
            1 => mutator("ModifySet", &name, json!({"applyTo": apply_to, "location": location, "parameters": {"values": {"fromList": [1]}}})),
            _ => mutator("AssignImage", &name, json!({"applyTo": apply_to, "location": location, "parameters": {"assignTag": ":v1"}})),
        }
        .unwrap_or_else(|error| panic!("{location}: {error}"))
    }

    /// Every pair, compared with [`disagreement`]: the definition the trie must agree with.
    fn pairwise(mutators: &[Mutator]) -> Vec<Conflict> {
        let steps: Vec<_> = mutators
            .iter()
            .map(|m| m.terminal().map(|t| super::steps(m, t)))
            .collect();
        let mut out = Vec::new();
        for first in 0..mutators.len() {
            for second in first + 1..mutators.len() {
                let (Some(a), Some(b)) = (&steps[first], &steps[second]) else {
                    continue;
                };
                let shared = bindings(&mutators[first])
                    .intersection(&bindings(&mutators[second]))
                    .count()
                    > 0;
                if let Some(detail) = disagreement(a, b).filter(|_| shared) {
                    out.push(Conflict {
                        first,
                        second,
                        detail,
                    });
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn the_trie_finds_what_pairwise_comparison_finds(
            specs in proptest::collection::vec(
                (any::<u8>(), proptest::collection::vec(0u8..3, 1..4), proptest::option::of(0u8..2), any::<bool>()),
                0..24,
            )
        ) {
            let mutators: Vec<Mutator> = specs
                .iter()
                .enumerate()
                .map(|(index, (kind, fields, list, pod))| build(index, *kind, fields, *list, *pod))
                .collect();
            prop_assert_eq!(find(&mutators), pairwise(&mutators));
        }
    }

    #[test]
    fn names_the_field_where_two_locations_first_disagree() {
        let assign = |location: &str| build_at(location);
        fn build_at(location: &str) -> Mutator {
            mutator(
                "Assign",
                "m",
                json!({
                    "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                    "location": location,
                    "parameters": {"assign": {"value": 1}},
                }),
            )
            .unwrap()
        }
        let found = find(&[assign("spec.a.b"), assign("spec.a[name: x].b"), assign("spec.c")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].first, found[0].second), (0, 1));
        assert_eq!(
            found[0].detail,
            "spec.a is an object for one and a list keyed by name for the other"
        );
    }
}
