//! Borrowed, partial views of objects read straight from their JSON text.
//!
//! The admission path used to parse every `request.object` into a `serde_json::Value`: an
//! allocation per string and per map, and a hash per key, about 6.5 µs for a typical notebook pod
//! on the project machine, where PodDefault matching and merging read a dozen fields of it. A view
//! reads only those fields in one scan of the text, borrows every string it can, and reads the
//! entries of keyed lists as their identities (names, mount paths, toleration keys); the merge
//! reads an entry whole only when a PodDefault has one with the same identity. The webhook reads
//! the view in the same pass as the AdmissionReview around it ([`ObjectView`]).
//!
//! The types here are lenient where a typed struct would fail: a field of the wrong JSON type is
//! recorded as `Shape::Wrong` or `List::Wrong` (or a `None` string), so the merge can report
//! exactly which field is malformed, as it did on a `Value`.

pub(crate) mod pod;
mod shapes;

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};

pub(crate) use shapes::{List, Members, Shape, Str, raw_str, raw_value};

/// An object read in place from JSON text: the fields policies match and merge on, nothing else.
/// Deserialize it where the object sits in a larger document (`request.object` of an
/// AdmissionReview) to read it in the same pass as the document, and hand it to the engine as
/// [`Object::Read`](crate::Object::Read).
#[derive(Debug, Default)]
pub struct ObjectView<'a>(pub(crate) pod::PodView<'a>);

impl<'a> ObjectView<'a> {
    /// `metadata.generateName`, if the object has one (borrowed from the text unless escaped).
    pub fn generate_name(&self) -> Option<Cow<'a, str>> {
        self.0.metadata().and_then(|m| m.generate_name.0.clone())
    }

    /// `metadata.namespace`, if the object names one.
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.0
            .metadata()
            .and_then(|m| m.namespace.as_deref())
            .filter(|ns| !ns.is_empty())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ObjectView<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        pod::PodView::deserialize(deserializer).map(ObjectView)
    }
}
