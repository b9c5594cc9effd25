//! The per-document context both policy parsers (PodDefault and the Gatekeeper mutators) read a
//! document with: it builds errors and warnings that name the document and the policy. Each parser
//! adds its own helpers in an `impl PolicyContext` block next to it.

use std::{cell::RefCell, fmt};

use serde_json::{Map, Value};

use crate::{
    document::Document,
    error::{LoadWarning, PolicyError, Problem},
    fieldpath::FieldPath,
    vocab::PolicyRef,
};

/// The objects of a list field, each with its path.
pub(crate) type ObjectEntries<'v> = Vec<(FieldPath, &'v Map<String, Value>)>;

/// Builds errors and warnings that name the document and the policy.
pub(crate) struct PolicyContext<'a> {
    pub(crate) document: &'a Document,
    pub(crate) reference: PolicyRef,
    /// Collected behind a `RefCell` so that every validation helper can take `&PolicyContext`.
    pub(crate) warnings: RefCell<Vec<LoadWarning>>,
    /// Why a field the policy's kind does not have is ignored, in the parser's own words.
    unknown_field: String,
}

impl<'a> PolicyContext<'a> {
    /// A context for the policy `reference` read from `document`; `unknown_field` ends the warning
    /// about each field the kind does not have.
    pub(crate) fn new(document: &'a Document, reference: PolicyRef, unknown_field: String) -> Self {
        Self {
            document,
            reference,
            warnings: RefCell::new(Vec::new()),
            unknown_field,
        }
    }
}

impl PolicyContext<'_> {
    pub(crate) fn error(&self, field: FieldPath, problem: Problem) -> PolicyError {
        PolicyError {
            origin: self.document.origin.clone(),
            policy: self.reference.clone(),
            field,
            problem,
        }
    }

    pub(crate) fn wrong_type(&self, field: FieldPath, expected: &'static str) -> PolicyError {
        self.error(field, Problem::WrongType { expected })
    }

    /// A warning about this policy.
    pub(crate) fn warn(&self, message: &str) {
        let warning = LoadWarning {
            origin: self.document.origin.clone(),
            message: format!("{}: {message}", self.reference),
        };
        self.warnings.borrow_mut().push(warning);
    }

    /// Warns about each field of `object` (found at `at`) that is not in `known`.
    pub(crate) fn warn_unknown(&self, object: &Map<String, Value>, at: impl fmt::Display, known: &[&str]) {
        for field in object.keys().filter(|f| !known.contains(&f.as_str())) {
            self.warn(&format!("{at}.{field}: {}", self.unknown_field));
        }
    }

    /// A list of objects at `at`; absent or `null` is empty.
    pub(crate) fn objects<'v>(
        &self,
        value: Option<&'v Value>,
        at: &FieldPath,
    ) -> Result<ObjectEntries<'v>, PolicyError> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(index, item)| match item {
                    Value::Object(object) => Ok((at.index(index), object)),
                    _ => Err(self.wrong_type(at.index(index), "an object")),
                })
                .collect(),
            Some(_) => Err(self.wrong_type(at.clone(), "a list")),
        }
    }
}
