//! Dotted field paths (`spec.volumes[2].name`) used to point at the field at fault in messages.

use std::fmt;

/// A path into a JSON document, rendered the way `kubectl explain` and API server errors do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// The root of a document.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// A path from its rendered form, e.g. `spec.selector`.
    pub fn new(path: impl Into<String>) -> Self {
        Self(path.into())
    }

    /// This path extended by an object field.
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// This path extended by a list index.
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// The rendered path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("<root>")
        } else {
            f.write_str(&self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_fields_and_indexes_like_kubectl() {
        let path = FieldPath::root()
            .field("spec")
            .field("volumes")
            .index(2)
            .field("name");
        assert_eq!(path.to_string(), "spec.volumes[2].name");
        assert_eq!(FieldPath::root().to_string(), "<root>");
    }
}
