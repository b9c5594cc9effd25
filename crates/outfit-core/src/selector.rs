//! Kubernetes label selectors (`matchLabels` + `matchExpressions`), validated as apimachinery's
//! `LabelSelectorAsSelector` does and compiled once for matching against raw label maps.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::view::{Members, raw_str};

/// A set of labels a selector can be matched against: a parsed `metadata.labels` map, or one
/// read in place from a request's JSON text.
pub trait Labels {
    /// The value of `key`: `None` when absent, `Some(None)` when present but not a string.
    fn label(&self, key: &str) -> Option<Option<Cow<'_, str>>>;
    /// Every key, in order.
    fn keys(&self) -> impl Iterator<Item = &str>;
}

impl Labels for Map<String, Value> {
    fn label(&self, key: &str) -> Option<Option<Cow<'_, str>>> {
        self.get(key).map(|v| v.as_str().map(Cow::Borrowed))
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        Map::keys(self).map(String::as_str)
    }
}

impl Labels for Members<'_> {
    fn label(&self, key: &str) -> Option<Option<Cow<'_, str>>> {
        self.get(key).map(raw_str)
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        Members::keys(self)
    }
}

/// One compiled requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label is present and its value is one of these.
    In(String, Vec<String>),
    /// The label is absent, or its value is none of these.
    NotIn(String, Vec<String>),
    /// The label is present.
    Exists(String),
    /// The label is absent.
    DoesNotExist(String),
}

impl Requirement {
    fn matches<L: Labels + ?Sized>(&self, labels: Option<&L>) -> bool {
        let value_of = |key: &str| labels.and_then(|l| l.label(key));
        match self {
            Requirement::In(key, values) => value_of(key)
                .flatten()
                .is_some_and(|v| values.iter().any(|x| *x == *v)),
            Requirement::NotIn(key, values) => match value_of(key) {
                None => true,
                Some(v) => v.is_none_or(|v| !values.iter().any(|x| *x == *v)),
            },
            Requirement::Exists(key) => value_of(key).is_some(),
            Requirement::DoesNotExist(key) => value_of(key).is_none(),
        }
    }

    /// What the labels have for this requirement's key, in words, for explanations.
    pub fn found<L: Labels + ?Sized>(&self, labels: Option<&L>) -> String {
        let key = self.key();
        match labels.and_then(|l| l.label(key)) {
            None => format!("no label {key}"),
            Some(None) => format!("label {key} is not a string"),
            Some(Some(value)) => format!("{key}={value}"),
        }
    }

    /// The label key it is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(key, _)
            | Requirement::NotIn(key, _)
            | Requirement::Exists(key)
            | Requirement::DoesNotExist(key) => key,
        }
    }

    /// A label key that must be present for this requirement to match, if any.
    fn required_key(&self) -> Option<&str> {
        match self {
            Requirement::In(key, _) | Requirement::Exists(key) => Some(key),
            Requirement::NotIn(..) | Requirement::DoesNotExist(_) => None,
        }
    }
}

/// apimachinery's selector syntax: `app in (a,b)`, `app notin (a)`, `app`, `!app`.
impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Requirement::In(key, values) if values.len() == 1 => write!(f, "{key}={}", values[0]),
            Requirement::In(key, values) => write!(f, "{key} in ({})", values.join(",")),
            Requirement::NotIn(key, values) => write!(f, "{key} notin ({})", values.join(",")),
            Requirement::Exists(key) => f.write_str(key),
            Requirement::DoesNotExist(key) => write!(f, "!{key}"),
        }
    }
}

/// A compiled label selector. The empty selector matches everything (apimachinery's
/// `Everything()`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub const EMPTY: LabelSelector = LabelSelector {
        requirements: Vec::new(),
    };

    /// Compiles a `metav1.LabelSelector` given as raw JSON. `null` or absent means empty.
    ///
    /// Errors say which part is wrong: `matchLabels.team: ...` or `matchExpressions[1].operator: ...`.
    pub fn compile(value: Option<&Value>) -> Result<Self, String> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(Self::default());
        };
        let Value::Object(object) = value else {
            return Err("must be an object".into());
        };
        let mut requirements = Vec::new();
        for (field, _) in object {
            if field != "matchLabels" && field != "matchExpressions" {
                return Err(format!("unknown field `{field}`"));
            }
        }
        if let Some(labels) = object.get("matchLabels").filter(|v| !v.is_null()) {
            let Value::Object(labels) = labels else {
                return Err("matchLabels: must be a map".into());
            };
            for (key, value) in labels {
                validate_key(key).map_err(|e| format!("matchLabels: key {key:?}: {e}"))?;
                let Some(value) = value.as_str() else {
                    return Err(format!("matchLabels.{key}: value must be a string"));
                };
                validate_value(value).map_err(|e| format!("matchLabels.{key}: value {value:?}: {e}"))?;
                requirements.push(Requirement::In(key.clone(), vec![value.to_owned()]));
            }
        }
        if let Some(expressions) = object.get("matchExpressions").filter(|v| !v.is_null()) {
            let Value::Array(expressions) = expressions else {
                return Err("matchExpressions: must be a list".into());
            };
            for (index, expression) in expressions.iter().enumerate() {
                let requirement =
                    compile_expression(expression).map_err(|e| format!("matchExpressions[{index}].{e}"))?;
                requirements.push(requirement);
            }
        }
        // Pushed one by one; kept as long as the policy is loaded.
        requirements.shrink_to_fit();
        Ok(Self { requirements })
    }

    /// Whether labels (a raw `metadata.labels` map, possibly absent) satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: Option<&L>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The first requirement the labels do not meet (`None`: the selector matches).
    pub fn unmet<L: Labels + ?Sized>(&self, labels: Option<&L>) -> Option<&Requirement> {
        self.requirements.iter().find(|r| !r.matches(labels))
    }

    /// Whether this selector matches every object.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A label key every matching object must carry, used to index policies by label key. The
    /// first such key is as good as any: it only narrows the candidates.
    pub fn required_key(&self) -> Option<&str> {
        self.requirements.iter().find_map(Requirement::required_key)
    }

    /// The compiled requirements.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

fn compile_expression(expression: &Value) -> Result<Requirement, String> {
    let Value::Object(expression) = expression else {
        return Err(" must be an object".into());
    };
    let key = expression
        .get("key")
        .and_then(Value::as_str)
        .ok_or("key: required string")?;
    validate_key(key).map_err(|e| format!("key: {key:?}: {e}"))?;
    let operator = expression
        .get("operator")
        .and_then(Value::as_str)
        .ok_or("operator: required string")?;
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or("values: must be strings"))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("values: must be a list".into()),
    };
    let key = key.to_owned();
    match operator {
        "In" | "NotIn" => {
            if values.is_empty() {
                return Err(format!("values: must be non-empty for operator {operator}"));
            }
            for value in &values {
                validate_value(value).map_err(|e| format!("values: {value:?}: {e}"))?;
            }
            Ok(if operator == "In" {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            })
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return Err(format!("values: must be empty for operator {operator}"));
            }
            Ok(if operator == "Exists" {
                Requirement::Exists(key)
            } else {
                Requirement::DoesNotExist(key)
            })
        }
        other => Err(format!(
            "operator: {other:?} is not one of In, NotIn, Exists, DoesNotExist"
        )),
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return Err("prefix must be a DNS subdomain of 1 to 253 characters".into());
        }
        let valid = prefix.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
        if !valid {
            return Err("prefix must be a lowercase DNS subdomain".into());
        }
    }
    if name.is_empty() {
        return Err("name part must not be empty".into());
    }
    validate_name_part(name)
}

/// A label value: empty, or up to 63 alphanumerics, `-`, `_`, `.` starting and ending alphanumeric.
pub fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        Ok(())
    } else {
        validate_name_part(value)
    }
}

fn validate_name_part(part: &str) -> Result<(), String> {
    if part.len() > 63 {
        return Err("must be at most 63 characters".into());
    }
    let bytes = part.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_alphanumeric();
    let inner_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if !edge_ok(bytes[0]) || !edge_ok(bytes[bytes.len() - 1]) || !bytes.iter().all(|&b| inner_ok(b)) {
        return Err("must consist of alphanumerics, '-', '_' or '.', and start and end alphanumeric".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    /// Rows pin apimachinery's `labels.Selector` semantics for each operator.
    #[test]
    fn operators_match_as_apimachinery() {
        let cases = [
            (json!({"matchLabels": {"a": "1"}}), json!({"a": "1"}), true),
            (json!({"matchLabels": {"a": "1"}}), json!({"a": "2"}), false),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}),
                json!({"a": "2"}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}),
                json!({}),
                false,
            ),
            // NotIn matches objects without the label at all.
            (
                json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}),
                json!({}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}),
                json!({"a": "1"}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists"}]}),
                json!({"a": ""}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}),
                json!({"a": ""}),
                false,
            ),
            // Both forms are ANDed.
            (
                json!({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}),
                json!({"a": "1"}),
                false,
            ),
            // The empty selector matches everything.
            (json!({}), json!({}), true),
        ];
        for (selector, pod_labels, expected) in cases {
            let compiled = LabelSelector::compile(Some(&selector)).unwrap();
            assert_eq!(
                compiled.matches(Some(&labels(pod_labels.clone()))),
                expected,
                "{selector} vs {pod_labels}"
            );
        }
        assert!(
            LabelSelector::compile(None)
                .unwrap()
                .matches::<Map<String, Value>>(None)
        );
    }

    #[test]
    fn invalid_selectors_say_which_part_is_wrong() {
        let cases = [
            (
                json!({"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}),
                "matchExpressions[0].values: must be non-empty for operator In",
            ),
            (
                json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["x"]}]}),
                "matchExpressions[0].values: must be empty for operator Exists",
            ),
            (
                json!({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}),
                "matchExpressions[0].operator: \"Gt\" is not one of In, NotIn, Exists, DoesNotExist",
            ),
            (
                json!({"matchLabels": {"bad key": "x"}}),
                "matchLabels: key \"bad key\": must consist of alphanumerics, '-', '_' or '.', and start and end alphanumeric",
            ),
            (
                json!({"matchLabels": {"a": "-x"}}),
                "matchLabels.a: value \"-x\": must consist of alphanumerics, '-', '_' or '.', and start and end alphanumeric",
            ),
            (
                json!({"matchLabels": {"a": 1}}),
                "matchLabels.a: value must be a string",
            ),
            (json!({"matchLabel": {}}), "unknown field `matchLabel`"),
        ];
        for (selector, message) in cases {
            assert_eq!(LabelSelector::compile(Some(&selector)).unwrap_err(), message);
        }
    }

    #[test]
    fn keys_with_prefixes_validate() {
        assert!(validate_key("kubeflow.org/inject").is_ok());
        assert!(validate_key("Kubeflow.org/inject").is_err());
        assert!(validate_key("/inject").is_err());
        assert!(validate_key("a/").is_err());
    }

    #[test]
    fn required_key_prefers_positive_requirements() {
        let s = LabelSelector::compile(Some(&json!({"matchExpressions": [
            {"key": "x", "operator": "DoesNotExist"}, {"key": "y", "operator": "Exists"}]})))
        .unwrap();
        assert_eq!(s.required_key(), Some("y"));
        assert_eq!(LabelSelector::default().required_key(), None);
    }
}
