//! Reading YAML and JSON streams into Kubernetes objects.
//!
//! A stream may hold several documents (`---` in YAML; concatenated or line-delimited JSON), and a
//! `kind: List` (or any `*List` with `items`) is flattened into its items, as kubectl does. Every
//! object keeps its [`Origin`] so errors can point back at it.

use std::{fmt, sync::Arc};

use serde_json::Value;

use crate::error::DocumentError;

/// Where an object was read: the file, the document's index in the stream (from 0), and the item's
/// index when the document was a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// File path, `<stdin>`, or another source name (`cluster` for watched objects).
    pub source: Arc<str>,
    /// Index of the document in the stream, from 0.
    pub document: usize,
    /// Index inside a `kind: List` document.
    pub item: Option<usize>,
}

impl Origin {
    /// An origin for an object that did not come from a file (a test, a cluster watch).
    pub fn named(source: &str) -> Self {
        Self {
            source: Arc::from(source),
            document: 0,
            item: None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {}", self.source, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        f.write_str(")")
    }
}

/// One Kubernetes object with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where the object was read.
    pub origin: Origin,
    /// The raw object.
    pub value: Value,
}

impl Document {
    /// The object's `kind`, or `""`.
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    /// The object's `apiVersion`, or `""`.
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(Value::as_str).unwrap_or("")
    }

    /// The object's `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Parses a stream of YAML or JSON documents named `source` (used in messages).
///
/// JSON is recognised by a leading `{` or `[` and parsed by serde_json (exact integers, any number
/// of concatenated values); anything else, or JSON that does not parse, is read as YAML.
pub fn parse_stream(text: &str, source: &str) -> Result<Vec<Document>, DocumentError> {
    let source: Arc<str> = Arc::from(source);
    let values = parse_values(text, &source)?;
    let mut documents = Vec::with_capacity(values.len());
    for (index, value) in values.into_iter().enumerate() {
        let origin = Origin {
            source: source.clone(),
            document: index,
            item: None,
        };
        flatten(value, origin, &mut documents)?;
    }
    Ok(documents)
}

fn parse_values(text: &str, source: &str) -> Result<Vec<Value>, DocumentError> {
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let json: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(trimmed).into_iter().collect();
        match json {
            Ok(values) => return Ok(expand_json_arrays(values)),
            Err(json_error) => {
                // YAML flow style (`{a: b}`) also starts with `{`; only when YAML fails too is the
                // JSON error the better message.
                return serde_saphyr::from_multiple::<Value>(text).map_err(|_| DocumentError::Syntax {
                    file: source.to_owned(),
                    format: "JSON",
                    message: json_error.to_string(),
                });
            }
        }
    }
    serde_saphyr::from_multiple::<Value>(text).map_err(|error| DocumentError::Syntax {
        file: source.to_owned(),
        format: "YAML",
        message: error.to_string(),
    })
}

/// A top-level JSON array is a list of objects, like a `kind: List`.
fn expand_json_arrays(values: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        match value {
            Value::Array(items) => out.extend(items),
            other => out.push(other),
        }
    }
    out
}

fn flatten(value: Value, origin: Origin, out: &mut Vec<Document>) -> Result<(), DocumentError> {
    let Value::Object(mut object) = value else {
        if value.is_null() {
            return Ok(());
        }
        return Err(DocumentError::NotAnObject {
            origin,
            message: "document is not a mapping".into(),
        });
    };
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(DocumentError::NotAnObject {
            origin,
            message: "object has no `kind`".into(),
        });
    }
    if kind.ends_with("List") && object.get("items").is_some_and(Value::is_array) {
        let Some(Value::Array(items)) = object.remove("items") else {
            unreachable!("checked above")
        };
        for (item_index, item) in items.into_iter().enumerate() {
            let item_origin = Origin {
                item: Some(item_index),
                ..origin.clone()
            };
            match item {
                Value::Object(_) => flatten_item(item, item_origin, out)?,
                _ => {
                    return Err(DocumentError::NotAnObject {
                        origin: item_origin,
                        message: "list item is not a mapping".into(),
                    });
                }
            }
        }
        return Ok(());
    }
    out.push(Document {
        origin,
        value: Value::Object(object),
    });
    Ok(())
}

fn flatten_item(item: Value, origin: Origin, out: &mut Vec<Document>) -> Result<(), DocumentError> {
    if item.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(DocumentError::NotAnObject {
            origin,
            message: "list item has no `kind`".into(),
        });
    }
    out.push(Document { origin, value: item });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_stream_keeps_order_and_integers() {
        let docs = parse_stream("kind: Pod\nb: 1\na: 80\n---\n---\nkind: Service\n", "x.yaml").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            serde_json::to_string(&docs[0].value).unwrap(),
            r#"{"kind":"Pod","b":1,"a":80}"#
        );
        assert_eq!(docs[1].kind(), "Service");
    }

    #[test]
    fn list_kinds_are_flattened_with_item_origins() {
        let text = r#"{"kind":"List","items":[{"kind":"Pod"},{"kind":"ConfigMap"}]}"#;
        let docs = parse_stream(text, "l.json").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].origin.item, Some(1));
        assert_eq!(docs[1].origin.to_string(), "l.json (document 0, item 1)");
    }

    #[test]
    fn concatenated_json_and_flow_yaml_both_parse() {
        let docs = parse_stream("{\"kind\":\"A\"}\n{\"kind\":\"B\"}\n", "-").unwrap();
        assert_eq!(docs.len(), 2);
        let docs = parse_stream("{kind: A, x: [1, 2]}", "-").unwrap();
        assert_eq!(docs[0].value, json!({"kind": "A", "x": [1, 2]}));
    }

    #[test]
    fn errors_name_the_file_and_document() {
        let err = parse_stream("{\"kind\": ", "bad.json").unwrap_err();
        assert!(err.to_string().starts_with("bad.json: invalid JSON"), "{err}");
        let err = parse_stream("kind: Pod\n---\n- 1\n", "s.yaml").unwrap_err();
        assert_eq!(err.to_string(), "s.yaml (document 1): document is not a mapping");
        let err = parse_stream("metadata: {}\n", "k.yaml").unwrap_err();
        assert_eq!(err.to_string(), "k.yaml (document 0): object has no `kind`");
        let err = parse_stream("a: [unclosed\n", "y.yaml").unwrap_err();
        assert!(err.to_string().starts_with("y.yaml: invalid YAML"), "{err}");
    }
}
