//! The set itself: what a built [`PolicySet`] holds, and what its callers may ask of it. It is
//! made by `build`, applied by `apply`, and explained by `explain`, its siblings.

use std::any::Any;

use serde_json::{Map, Value};

use crate::{
    family::{Context, FamilySet, Targets},
    vocab::{FastMap, PolicyKind},
};

/// An immutable, indexed set of compiled policies plus the namespace labels matching needs.
#[derive(Debug)]
pub struct PolicySet {
    pub(super) families: Vec<Box<dyn FamilySet>>,
    /// The positions of the families that hold a policy: the only ones the engine runs (a family
    /// with none changes nothing, and the empty ones cost a call each on every admission).
    pub(super) holding: Vec<usize>,
    pub(super) kinds: Vec<PolicyKind>,
    /// How many policies the families hold, counted once when built: `is_empty` is asked on
    /// every admission.
    pub(super) len: usize,
    pub(super) namespaces: FastMap<String, Map<String, Value>>,
    /// Whether admissions add outfit's annotation (`record`).
    pub(super) annotate: bool,
    /// Whether admissions carry warnings for the requesting user.
    pub(super) warn: bool,
    /// The most bytes of JSON an admission's patch may take.
    pub(super) max_patch_bytes: usize,
    /// The kinds whose family keeps its own record on the object.
    pub(super) self_recorded: Vec<PolicyKind>,
}

impl PolicySet {
    /// Labels of a namespace read from a `Namespace` object, if one was loaded.
    pub fn namespace_labels(&self, namespace: &str) -> Option<&Map<String, Value>> {
        self.namespaces.get(namespace)
    }

    /// What every family reads of the set besides its own policies.
    pub(super) fn context(&self) -> Context<'_> {
        Context {
            namespaces: &self.namespaces,
            annotate: self.annotate,
            warn: self.warn,
            max_patch_bytes: self.max_patch_bytes,
        }
    }

    /// The families' parts, in the kinds table's order.
    pub(super) fn families(&self) -> impl Iterator<Item = &dyn FamilySet> {
        self.families.iter().map(|family| &**family)
    }

    /// The parts of the families that hold a policy, in the kinds table's order.
    pub(super) fn holding(&self) -> impl Iterator<Item = &dyn FamilySet> {
        self.holding.iter().map(|&position| &*self.families[position])
    }

    /// The part of one family, by its type (`outfit manifests` reads the Gatekeeper mutators').
    pub fn family<T: FamilySet>(&self) -> Option<&T> {
        self.families
            .iter()
            .find_map(|family| <dyn Any>::downcast_ref::<T>(family.as_any()))
    }

    /// The objects the set's policies may change, every family's together.
    pub fn targets(&self) -> Targets {
        self.families
            .iter()
            .fold(Targets::Kinds(Vec::new()), |all, family| {
                all.merge(family.targets())
            })
    }

    /// Every kind the set's families read, in the table's order.
    pub fn kinds(&self) -> &[PolicyKind] {
        &self.kinds
    }

    /// How many policies of `kind` the set holds.
    pub fn count(&self, kind: PolicyKind) -> usize {
        self.families.iter().map(|family| family.count(kind)).sum()
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The most bytes of JSON an admission's patch may take
    /// ([`PolicySetBuilder::max_patch_bytes`](crate::PolicySetBuilder::max_patch_bytes)): what
    /// the webhook bounds the patch it writes with ([`Admission::patch_json_within`](crate::Admission::patch_json_within)).
    pub fn max_patch_bytes(&self) -> usize {
        self.max_patch_bytes
    }

    /// Whether the set holds no policy.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
