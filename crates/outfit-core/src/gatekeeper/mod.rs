//! Gatekeeper mutators (`mutations.gatekeeper.sh`): Assign, AssignMetadata, ModifySet and
//! AssignImage, in every version Gatekeeper serves, with Gatekeeper's location language, traversal,
//! ordering, convergence loop and schema-conflict rules. `docs/gatekeeper.md` lists where outfit
//! deliberately differs.
//!
//! `parse` validates one document into a [`Mutator`]; [`Mutators`] is the immutable, sorted and
//! indexed set the engine runs; [`conflicts`] finds mutators that disagree on the shape of an object.

mod action;
pub mod conflicts;
mod explain;
mod family;
pub mod image;
mod index;
mod keyed;
pub mod location;
pub mod matching;
mod mutator;
mod parse;
mod setters;
pub(crate) mod system;
pub mod traverse;

pub use action::{Action, AssignValue, MetadataField, Terminal};
pub use family::{FAMILY, Gatekeeper, GatekeeperSet};
pub use mutator::{
    ASSIGN, ASSIGN_IMAGE, ASSIGN_METADATA, GROUP, IMAGE_VERSIONS, MODIFY_SET, Mutator, VERSIONS,
};
#[cfg(test)]
pub(crate) use parse::parse;
pub use system::{MutationError, Mutators};

#[cfg(test)]
pub(crate) mod test_support {
    //! Building mutators from inline specs for the unit tests.

    use serde_json::{Value, json};

    use super::{Mutator, setters::Meta, traverse::WalkError};
    use crate::{document::Document, error::PolicyError, vocab::Origin};

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
        let changed = mutator.apply(
            &mutator.setter(meta),
            &mut out,
            &mut super::keyed::KeyedLists::default(),
        )?;
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
