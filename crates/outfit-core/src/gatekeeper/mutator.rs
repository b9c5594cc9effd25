//! A validated, compiled Gatekeeper mutator, and the group and versions Gatekeeper serves them in.

use serde_json::Value;

use super::{
    action::{Action, Terminal},
    keyed::KeyedLists,
    location::Location,
    matching::{self, ApplyTo, Match, Subject},
    setters::{self, Meta},
    traverse::{self, Tester, WalkError},
};
use crate::vocab::{KindInfo, Operation, Origin, PolicyKind, PolicyRef, Served};

/// The API group of every Gatekeeper mutator.
pub const GROUP: &str = "mutations.gatekeeper.sh";

/// Versions served for Assign, AssignMetadata and ModifySet.
pub const VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha1"];

/// Versions served for AssignImage.
pub const IMAGE_VERSIONS: &[&str] = &["v1alpha1"];

/// A Gatekeeper mutator kind: cluster-scoped, in [`GROUP`].
const fn mutator_kind(
    name: &'static str,
    plural: &'static str,
    versions: &'static [&'static str],
) -> KindInfo {
    KindInfo {
        name,
        group: GROUP,
        versions,
        plural,
        namespaced: false,
        served: Served::Crd,
    }
}

/// `Assign` in the kinds table.
pub const ASSIGN: PolicyKind = PolicyKind::new(&mutator_kind("Assign", "assign", VERSIONS));
/// `AssignImage` in the kinds table.
pub const ASSIGN_IMAGE: PolicyKind =
    PolicyKind::new(&mutator_kind("AssignImage", "assignimage", IMAGE_VERSIONS));
/// `AssignMetadata` in the kinds table.
pub const ASSIGN_METADATA: PolicyKind =
    PolicyKind::new(&mutator_kind("AssignMetadata", "assignmetadata", VERSIONS));
/// `ModifySet` in the kinds table.
pub const MODIFY_SET: PolicyKind = PolicyKind::new(&mutator_kind("ModifySet", "modifyset", VERSIONS));

/// A validated, compiled Gatekeeper mutator.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutator {
    pub(crate) reference: PolicyRef,
    pub(crate) origin: Origin,
    /// `spec.applyTo`; empty for AssignMetadata, which applies to every kind.
    pub(crate) apply_to: Vec<ApplyTo>,
    pub(crate) matcher: Match,
    pub(crate) location: Location,
    pub(crate) tester: Tester,
    pub(crate) action: Action,
}

impl Mutator {
    /// The mutator's kind and name.
    pub fn reference(&self) -> &PolicyRef {
        &self.reference
    }

    /// Where it was read.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// `spec.location`, parsed.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// `spec.applyTo`.
    pub fn apply_to(&self) -> &[ApplyTo] {
        &self.apply_to
    }

    /// `spec.match.kinds` (empty: every kind).
    pub fn match_kinds(&self) -> &[matching::Kinds] {
        &self.matcher.kinds
    }

    /// The terminal type for schema conflicts; `None` for AssignMetadata, which takes no part.
    pub fn terminal(&self) -> Option<Terminal> {
        match self.action {
            Action::Assign(_) => Some(Terminal::Unknown),
            Action::ModifySet { .. } => Some(Terminal::Set),
            Action::Image(_) => Some(Terminal::String),
            Action::Metadata(_) => None,
        }
    }

    /// Whether `applyTo` and `match` select the object.
    pub fn matches<'n>(
        &self,
        subject: &Subject<'_>,
        namespace_labels: &dyn Fn(&str) -> Option<&'n serde_json::Map<String, Value>>,
    ) -> bool {
        self.applies(subject) && self.matcher.matches(subject, namespace_labels)
    }

    /// `applyTo` (the operation, for AssignMetadata, which has none).
    fn applies(&self, subject: &Subject<'_>) -> bool {
        match self.action {
            Action::Metadata(_) => {
                subject.operation == Operation::Create || subject.operation == Operation::Update
            }
            _ => self.apply_to.iter().any(|entry| entry.applies(subject)),
        }
    }

    /// The part of [`Mutator::matches`] that depends only on the object's identity (group,
    /// version, kind, namespace, the name of a Namespace) and the operation: what the mutator
    /// index decides for a whole class of mutators at once.
    pub(super) fn matches_identity(&self, subject: &Subject<'_>) -> bool {
        self.applies(subject) && self.matcher.matches_identity(subject)
    }

    pub(super) fn is_metadata(&self) -> bool {
        matches!(self.action, Action::Metadata(_))
    }

    /// Whether mutating the object `subject` describes would change it (or fail).
    pub fn would_change(&self, subject: &Subject<'_>) -> bool {
        self.would_change_in(subject, &mut KeyedLists::scan_only())
    }

    /// [`Mutator::would_change`], with the admission's index of the object's keyed lists.
    pub(super) fn would_change_in(&self, subject: &Subject<'_>, lists: &mut KeyedLists) -> bool {
        let meta = Meta {
            name: subject.name(),
            namespace: subject.namespace,
        };
        let setter = self.setter(meta);
        traverse::would_change_indexed(
            self.location.nodes(),
            &self.tester,
            &setter,
            subject.object,
            lists,
        )
    }

    /// What this mutator writes into an object whose name and namespace are `meta`. It copies what
    /// it needs of `meta`, so the object may be borrowed mutably afterwards.
    pub(super) fn setter(&self, meta: Meta<'_>) -> setters::ActionSetter<'_> {
        setters::for_action(&self.action, meta)
    }

    /// Mutates `object` with a setter from [`Mutator::setter`]; returns whether it changed.
    pub(super) fn apply(
        &self,
        setter: &setters::ActionSetter<'_>,
        object: &mut Value,
        lists: &mut KeyedLists,
    ) -> Result<bool, WalkError> {
        traverse::apply_indexed(self.location.nodes(), &self.tester, setter, object, lists)
    }
}
