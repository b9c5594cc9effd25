//! What a mutator does at its location, as parsed from its `parameters`: below the mutator, the
//! setters and the parsers, which all speak it.

use serde_json::Value;

use super::image::ImageParams;

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
