//! Typed errors for reading documents and loading policies.
//!
//! Every message names where the problem is: the file and document index ([`Origin`]), the policy
//! (`kind namespace/name`) and the field path, so a user can fix a policy without guessing.

use std::fmt;

use crate::{fieldpath::FieldPath, vocab::Origin, vocab::PolicyRef};

/// A YAML or JSON stream that could not be read as Kubernetes objects.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The file could not be read at all.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The text is neither valid JSON nor valid YAML.
    #[error("{file}: invalid {format}: {message}")]
    Syntax {
        /// The file (or `<stdin>`).
        file: String,
        /// `JSON` or `YAML`.
        format: &'static str,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A document parsed but is not a Kubernetes object (not a mapping, or no `kind`).
    #[error("{origin}: {message}")]
    NotAnObject {
        /// Where the document is.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
}

/// What is wrong with one field of a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A required field is absent or empty.
    Missing,
    /// The field has the wrong JSON type.
    WrongType {
        /// What was expected, e.g. `a list` or `a string`.
        expected: &'static str,
    },
    /// Two entries of one list share an identity key inside one policy.
    Duplicate {
        /// The repeated key, e.g. `name "FOO"`.
        key: String,
    },
    /// A label selector that does not parse.
    InvalidSelector(String),
    /// A value that does not satisfy the field's rules.
    Invalid(String),
    /// A feature outfit deliberately does not support.
    Unsupported(String),
    /// Two policies with the same kind, namespace and name.
    DuplicatePolicy {
        /// Where the first one was read.
        first: Origin,
    },
    /// A Gatekeeper `location` (or `pathTests[].subPath`) that does not parse.
    Location(LocationError),
    /// Two Gatekeeper mutators disagree on the shape of an object; both are left out.
    SchemaConflict {
        /// The other mutator.
        other: PolicyRef,
        /// Where the other one was read.
        other_origin: Origin,
        /// The field and the two shapes.
        detail: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing => f.write_str("required field is missing"),
            Problem::WrongType { expected } => write!(f, "must be {expected}"),
            Problem::Duplicate { key } => write!(f, "duplicate entry with {key}"),
            Problem::InvalidSelector(why) => write!(f, "invalid label selector: {why}"),
            Problem::Invalid(why) => f.write_str(why),
            Problem::Unsupported(why) => write!(f, "not supported: {why}"),
            Problem::DuplicatePolicy { first } => write!(f, "defined again (first defined at {first})"),
            Problem::Location(error) => write!(f, "invalid location: {error}"),
            Problem::SchemaConflict {
                other,
                other_origin,
                detail,
            } => write!(
                f,
                "conflicting schema with {other} ({other_origin}): {detail}; both mutators are disabled, as Gatekeeper does"
            ),
        }
    }
}

/// A policy rejected at load time. The policy is left out of the [`crate::PolicySet`]; the others
/// keep working.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {policy}: {field}: {problem}")]
pub struct PolicyError {
    /// Where the policy document was read.
    pub origin: Origin,
    /// The policy's kind, namespace and name.
    pub policy: PolicyRef,
    /// The field at fault.
    pub field: FieldPath,
    /// What is wrong with it.
    pub problem: Problem,
}

/// Something about a loaded policy worth telling its author that does not stop it from working
/// (a field that its upstream project would silently ignore, for example).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadWarning {
    /// Where the document was read.
    pub origin: Origin,
    /// What it says.
    pub message: String,
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// Why a Gatekeeper `location` (`gatekeeper::location`) does not parse, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationError {
    /// The column (in characters, from 1) of the offending character or token.
    pub column: usize,
    /// What the parser wanted there.
    pub expected: String,
    /// What it found.
    pub found: String,
}

impl fmt::Display for LocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "column {}: expected {}, found {}",
            self.column, self.expected, self.found
        )
    }
}

impl std::error::Error for LocationError {}
