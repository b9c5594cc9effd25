//! Reading YAML and JSON streams into Kubernetes objects.
//!
//! A stream may hold several documents (`---` in YAML; concatenated or line-delimited JSON), and a
//! `kind: List` (or any `*List` with `items`) is flattened into its items, as kubectl does. Every
//! object keeps its [`Origin`] so errors can point back at it.
//!
//! YAML is read the way kubectl reads it, so that a policy means the same to `outfit mutate` as
//! once applied with kubectl. kubectl converts YAML to JSON with `sigs.k8s.io/yaml`, which
//! resolves plain scalars as go-yaml v2 does (YAML 1.1): `yes`, `on`, `y` are `true` and `no`,
//! `off`, `n` are `false` (quoted, they stay strings); `0644` is octal (420, as a file mode in
//! `defaultMode` means); and the JSON it writes has no fraction on an integral float, so `1.0` or
//! `1e3` arrive as the integers `1` and `1000`. See [`parse_yaml`].

use std::sync::Arc;

use serde_json::Value;

use crate::{error::DocumentError, vocab::Origin};

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
            document: Some(index),
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
                return parse_yaml(text).map_err(|_| DocumentError::Syntax {
                    file: source.to_owned(),
                    format: "JSON",
                    message: json_error.to_string(),
                });
            }
        }
    }
    parse_yaml(text).map_err(|error| DocumentError::Syntax {
        file: source.to_owned(),
        format: "YAML",
        message: error.to_string(),
    })
}

/// Parses a YAML stream as kubectl does (`sigs.k8s.io/yaml`'s `YAMLToJSON`: go-yaml v2, then Go's
/// JSON encoding).
///
/// serde-saphyr already resolves go-yaml v2's YAML 1.1 booleans (`y`, `yes`, `on`, `n`, `no`,
/// `off` in lower, capitalised or upper case) and nulls (`~`, `null`); two options and one pass
/// bring the rest in line:
/// - legacy octal: go-yaml v2 reads `0644` as octal (Go's `ParseInt` with base 0); without it,
///   serde-saphyr reads the float `644.0`;
/// - an integral float (`1.0`, `1e3`, `08`) becomes an integer when it fits `i64`: Go writes such a
///   `float64` without a fraction (`1`, `1000`, `8`), and the API server reads that back as an
///   integer, so an integer field receives an integer and not a `1.0` it would refuse.
///
/// Where serde-saphyr and go-yaml v2 still differ: mixed-case spellings (`yEs`, `oN`, `nUll`) are
/// booleans and null here but strings to kubectl, and a YAML 1.1 boolean as a mapping key (`on:`)
/// stays the string `on` where kubectl writes `"true"`. Neither appears in real manifests; quote
/// such a value to mean the same to both.
fn parse_yaml(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    // The streaming reader bounds each document (depth, nodes, scalar bytes) rather than the
    // stream: a directory of 10,000 mutators in one file is as valid as in 10,000 files, and
    // kubectl reads both, where the whole-input budget stopped at 1,024 documents.
    let mut bytes = text.as_bytes();
    let mut values: Vec<Value> =
        serde_saphyr::read_with_options(&mut bytes, options).collect::<Result<_, _>>()?;
    values.iter_mut().for_each(integral_floats_to_integers);
    Ok(values)
}

/// Turns every float that Kubernetes would hold as an integer into that integer (see
/// [`crate::semantic::number`]).
fn integral_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let crate::semantic::KubeNumber::Int(i) = crate::semantic::number(n) {
                *n = i.into();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(object) => object.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
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

    /// kubectl and Gatekeeper read a stream of any length; outfit did not past 1,024 documents.
    #[test]
    fn a_long_yaml_stream_is_read_whole_and_each_document_stays_bounded() {
        let stream: String = (0..5_000)
            .map(|i| format!("kind: ConfigMap\nindex: {i}\n---\n"))
            .collect();
        let docs = parse_stream(&stream, "long.yaml").unwrap();
        assert_eq!(docs.len(), 5_000);
        assert_eq!(docs[4_999].value["index"], 4_999);
        let deep = format!("kind: X\nv: {}{}\n", "[".repeat(200), "]".repeat(200));
        let err = parse_stream(&format!("kind: A\n---\n{deep}"), "deep.yaml").unwrap_err();
        assert!(err.to_string().starts_with("deep.yaml: invalid YAML"), "{err}");
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

    /// Rows: (YAML value, the JSON kubectl sends for it). kubectl reads YAML with
    /// `sigs.k8s.io/yaml` (go-yaml v2, YAML 1.1 resolution, then Go's `json.Marshal`).
    const AS_KUBECTL_READS_IT: &[(&str, &str)] = &[
        // YAML 1.1 booleans, unquoted, in go-yaml v2's spellings.
        ("yes", "true"),
        ("Yes", "true"),
        ("YES", "true"),
        ("y", "true"),
        ("Y", "true"),
        ("on", "true"),
        ("On", "true"),
        ("ON", "true"),
        ("true", "true"),
        ("True", "true"),
        ("no", "false"),
        ("No", "false"),
        ("n", "false"),
        ("N", "false"),
        ("off", "false"),
        ("OFF", "false"),
        ("false", "false"),
        // Quoted or tagged, they are strings.
        ("'yes'", r#""yes""#),
        (r#""on""#, r#""on""#),
        ("!!str off", r#""off""#),
        // Words that only look alike are strings.
        ("yess", r#""yess""#),
        ("onn", r#""onn""#),
        // Nulls.
        ("~", "null"),
        ("null", "null"),
        ("Null", "null"),
        ("", "null"),
        // Integers: YAML 1.1 octal (go-yaml's ParseInt with base 0), hex, underscores, a sign.
        ("0644", "420"),
        ("0777", "511"),
        ("-0644", "-420"),
        ("0o17", "15"),
        ("0x1F", "31"),
        ("1_000", "1000"),
        ("+1", "1"),
        ("80", "80"),
        // Integral floats come out of json.Marshal as integers; fractions stay floats.
        ("1.0", "1"),
        ("1e3", "1000"),
        ("08", "8"),
        ("0.5", "0.5"),
        // Not numbers to go-yaml either.
        ("1:20", r#""1:20""#),
        ("2001-12-14", r#""2001-12-14""#),
    ];

    #[test]
    fn yaml_scalars_read_as_kubectl_reads_them() {
        for (yaml, kubectl) in AS_KUBECTL_READS_IT {
            let docs = parse_stream(&format!("kind: ConfigMap\nv: {yaml}\n"), "k.yaml")
                .unwrap_or_else(|e| panic!("{yaml}: {e}"));
            let expected: Value = serde_json::from_str(kubectl).unwrap();
            assert_eq!(docs[0].value["v"], expected, "YAML `{yaml}`");
            assert_eq!(
                serde_json::to_string(&docs[0].value["v"]).unwrap(),
                *kubectl,
                "YAML `{yaml}` as JSON text"
            );
        }
    }

    /// A PodDefault written the way people write them for kubectl: `readOnly: yes`, an octal
    /// `defaultMode`, `"on"` quoted where a string is meant.
    #[test]
    fn a_policy_means_what_it_means_to_kubectl() {
        let text = "kind: PodDefault\nspec:\n  volumeMounts: [{name: s, mountPath: /s, readOnly: yes}]\n  \
                    volumes: [{name: s, secret: {secretName: s, defaultMode: 0400}}]\n  \
                    env: [{name: FEATURE, value: \"on\"}]\n";
        let docs = parse_stream(text, "p.yaml").unwrap();
        let spec = &docs[0].value["spec"];
        assert_eq!(spec["volumeMounts"][0]["readOnly"], json!(true));
        assert_eq!(spec["volumes"][0]["secret"]["defaultMode"], json!(256));
        assert_eq!(spec["env"][0]["value"], json!("on"));
    }

    /// JSON is read exactly as written: only YAML goes through kubectl's YAML-to-JSON conversion.
    #[test]
    fn json_numbers_are_kept_as_written() {
        let docs = parse_stream(r#"{"kind": "A", "f": 1.0, "o": 644}"#, "j.json").unwrap();
        assert_eq!(
            serde_json::to_string(&docs[0].value).unwrap(),
            r#"{"kind":"A","f":1.0,"o":644}"#
        );
    }

    #[test]
    fn objects_not_read_from_a_stream_have_no_document_index() {
        assert_eq!(Origin::named("cluster").to_string(), "cluster");
    }
}
