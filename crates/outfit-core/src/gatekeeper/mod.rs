//! Gatekeeper mutators (`mutations.gatekeeper.sh`): Assign, AssignMetadata, ModifySet and
//! AssignImage, in every version Gatekeeper serves, with Gatekeeper's location language, traversal,
//! ordering, convergence loop and schema-conflict rules. `docs/gatekeeper.md` lists where outfit
//! deliberately differs.
//!
//! `parse` validates one document into a [`Mutator`]; [`Mutators`] is the immutable, sorted and
//! indexed set the engine runs; [`conflicts`] finds mutators that disagree on the shape of an object.

pub mod conflicts;
pub mod image;
mod index;
mod keyed;
pub mod location;
pub mod matching;
mod parse;
mod setters;
pub(crate) mod system;
pub mod traverse;

use serde_json::Value;

pub(crate) use parse::parse;
pub use system::{MutationError, Mutators};

use self::{
    image::ImageParams,
    keyed::KeyedLists,
    location::Location,
    matching::{ApplyTo, Match, Subject},
    setters::Meta,
    traverse::{Tester, WalkError},
};
use crate::{document::Origin, policy_set::PolicyRef};

/// The API group of every Gatekeeper mutator.
pub const GROUP: &str = "mutations.gatekeeper.sh";

/// Versions served for Assign, AssignMetadata and ModifySet.
pub const VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha1"];

/// Versions served for AssignImage.
pub const IMAGE_VERSIONS: &[&str] = &["v1alpha1"];

/// Where `parameters.assign.fromMetadata` reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataField {
    /// `metadata.name`.
    Name,
    /// The object's namespace (the request's, when the object names none).
    Namespace,
}

/// `parameters.assign` of Assign and AssignMetadata.
#[derive(Debug, Clone, PartialEq)]
pub enum AssignValue {
    /// `value`: any JSON, assigned wholesale.
    Value(Value),
    /// `fromMetadata.field`.
    FromMetadata(MetadataField),
}

/// What a mutator does at its location.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Assign: replace the value (or upsert the keyed element).
    Assign(AssignValue),
    /// AssignMetadata: add a label or annotation that is not there yet.
    Metadata(AssignValue),
    /// ModifySet: add the values missing from a list, or remove them.
    ModifySet {
        /// `operation: prune` (otherwise merge).
        prune: bool,
        /// `values.fromList`.
        values: Vec<Value>,
    },
    /// AssignImage: replace the domain, path and/or tag of an image string.
    Image(ImageParams),
}

/// The type a mutator gives the node its location ends at, for schema conflicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    /// Assign: anything.
    Unknown,
    /// ModifySet: a list of values.
    Set,
    /// AssignImage: a string nothing may go below.
    String,
}

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
                subject.operation == crate::Operation::Create || subject.operation == crate::Operation::Update
            }
            _ => self.apply_to.iter().any(|entry| entry.applies(subject)),
        }
    }

    /// The part of [`Mutator::matches`] that depends only on the object's identity (group,
    /// version, kind, namespace, the name of a Namespace) and the operation: what the mutator
    /// index decides for a whole class of mutators at once.
    fn matches_identity(&self, subject: &Subject<'_>) -> bool {
        self.applies(subject) && self.matcher.matches_identity(subject)
    }

    fn is_metadata(&self) -> bool {
        matches!(self.action, Action::Metadata(_))
    }

    /// Whether mutating the object `subject` describes would change it (or fail).
    pub fn would_change(&self, subject: &Subject<'_>) -> bool {
        self.would_change_in(subject, &mut KeyedLists::scan_only())
    }

    /// [`Mutator::would_change`], with the admission's index of the object's keyed lists.
    fn would_change_in(&self, subject: &Subject<'_>, lists: &mut KeyedLists) -> bool {
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
    fn setter(&self, meta: Meta<'_>) -> setters::ActionSetter<'_> {
        setters::for_action(&self.action, meta)
    }

    /// Mutates `object` with a setter from [`Mutator::setter`]; returns whether it changed.
    fn apply(
        &self,
        setter: &setters::ActionSetter<'_>,
        object: &mut Value,
        lists: &mut KeyedLists,
    ) -> Result<bool, WalkError> {
        traverse::apply_indexed(self.location.nodes(), &self.tester, setter, object, lists)
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Building mutators from inline specs for the unit tests.

    use serde_json::{Value, json};

    use super::{Mutator, setters::Meta, traverse::WalkError};
    use crate::{
        document::{Document, Origin},
        error::PolicyError,
    };

    /// Parses a mutator of `kind` with `spec`, served as v1 (v1alpha1 for AssignImage).
    pub(crate) fn mutator(kind: &str, name: &str, spec: Value) -> Result<Mutator, PolicyError> {
        let version = if kind == "AssignImage" { "v1alpha1" } else { "v1" };
        let document = Document {
            origin: Origin::named("test"),
            value: json!({
                "apiVersion": format!("mutations.gatekeeper.sh/{version}"),
                "kind": kind,
                "metadata": {"name": name},
                "spec": spec,
            }),
        };
        super::parse(&document, &mut Vec::new())
    }

    /// An Assign on `Foo` objects (group "", version v1) at `location`.
    pub(crate) fn assign(location: &str, value: Value, path_tests: Value) -> Mutator {
        mutator(
            "Assign",
            "test",
            json!({
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Foo", "Pod"]}],
                "location": location,
                "parameters": {"assign": {"value": value}, "pathTests": path_tests},
            }),
        )
        .unwrap_or_else(|e| panic!("{location}: {e}"))
    }

    /// Applies one mutator once, ignoring matching; checks the probe agrees with the result.
    pub(crate) fn mutate_once(mutator: &Mutator, object: &Value) -> Result<Value, WalkError> {
        let mut out = object.clone();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let meta = Meta {
            name,
            namespace: Some("ns1"),
        };
        let setter = super::setters::for_action(&mutator.action, meta);
        let predicted =
            super::traverse::would_change(mutator.location.nodes(), &mutator.tester, &setter, object);
        let changed = mutator.apply(&mutator.setter(meta), &mut out, &mut super::KeyedLists::default())?;
        assert!(
            predicted || !changed,
            "probe said no change but {} changed the object",
            mutator.location
        );
        assert_eq!(
            changed,
            out != *object,
            "reported change must equal actual change"
        );
        Ok(out)
    }

    /// A `Foo` object with `spec`.
    pub(crate) fn foo(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "my-foo"}, "spec": spec})
    }
}
