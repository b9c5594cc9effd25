//! Defaulting-aware equality of raw Kubernetes values.
//!
//! Kubeflow compares a PodDefault's entry with the pod's entry of the same name using Go's
//! `reflect.DeepEqual` on typed structs. Two consequences shape this module:
//! - Go's typed decoding makes an absent field equal to its zero value (`readOnly: false`, `""`,
//!   `0`, empty lists), so raw JSON must be compared the same way;
//! - the pod reaching a webhook has already been defaulted by the API server (`defaultMode: 420`,
//!   `terminationMessagePath`, ...), while a PodDefault stored through its CRD has not, so Kubeflow
//!   reports a conflict between a pod's volume and the very same volume in a PodDefault (its
//!   quirk 1) and denies the pod when the webhook is invoked again. outfit treats a field that one
//!   side omits as equal to the API server's default for it.

use serde_json::Value;

/// Fields the API server defaults on pods (by field name, wherever they appear in a pod), with the
/// values it fills in. A side that omits one of these equals a side that has the default value.
const API_DEFAULTS: &[(&str, &[&str])] = &[
    ("terminationMessagePath", &["/dev/termination-log"]),
    ("terminationMessagePolicy", &["File"]),
    // `Always` for `:latest` or untagged images, `IfNotPresent` otherwise.
    ("imagePullPolicy", &["IfNotPresent", "Always"]),
    ("protocol", &["TCP"]),
    ("apiVersion", &["v1"]),
    ("path", &["/"]),
    ("scheme", &["HTTP"]),
];

/// Numeric defaults (`defaultMode` of secret, configMap, downwardAPI and projected volumes; the
/// token expiry of projected service account tokens; probe timings).
const API_NUMERIC_DEFAULTS: &[(&str, i64)] = &[
    ("defaultMode", 420),
    ("expirationSeconds", 3600),
    ("timeoutSeconds", 1),
    ("periodSeconds", 10),
    ("successThreshold", 1),
    ("failureThreshold", 3),
];

/// Whether `a` and `b` are the same Kubernetes value once absent fields are read as their zero or
/// API-defaulted values.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.iter().all(|(key, av)| match b.get(key) {
                Some(bv) => equal(av, bv),
                None => is_default(key, av),
            }) && b
                .iter()
                .all(|(key, bv)| a.contains_key(key) || is_default(key, bv))
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y)),
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Null, other) | (other, Value::Null) => is_zero(other),
        _ => a == b,
    }
}

/// Go's zero value for a scalar field, which typed decoding cannot tell from absent. Empty lists
/// and objects are not zero: Go decodes `[]` and `{}` to non-nil values (`emptyDir: {}` is a volume
/// source, not nothing), and `reflect.DeepEqual` tells them from nil.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(_) | Value::Object(_) => false,
    }
}

fn is_default(key: &str, value: &Value) -> bool {
    if is_zero(value) {
        return true;
    }
    match value {
        Value::String(s) => API_DEFAULTS
            .iter()
            .any(|(k, defaults)| *k == key && defaults.contains(&s.as_str())),
        Value::Number(n) => API_NUMERIC_DEFAULTS
            .iter()
            .any(|(k, default)| *k == key && n.as_i64() == Some(*default)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_equals_go_zero_value() {
        assert!(equal(&json!({"name": "A"}), &json!({"name": "A", "value": ""})));
        assert!(equal(
            &json!({"name": "v", "mountPath": "/x"}),
            &json!({"name": "v", "mountPath": "/x", "readOnly": false})
        ));
        assert!(!equal(
            &json!({"name": "v", "mountPath": "/x"}),
            &json!({"name": "v", "mountPath": "/x", "readOnly": true})
        ));
    }

    #[test]
    fn api_defaults_do_not_make_a_conflict() {
        let from_policy = json!({"name": "s", "secret": {"secretName": "creds"}});
        let from_pod = json!({"name": "s", "secret": {"secretName": "creds", "defaultMode": 420}});
        assert!(equal(&from_policy, &from_pod));
        let other_mode = json!({"name": "s", "secret": {"secretName": "creds", "defaultMode": 256}});
        assert!(!equal(&from_policy, &other_mode));
    }

    #[test]
    fn different_values_and_lengths_differ() {
        assert!(!equal(
            &json!({"name": "A", "value": "1"}),
            &json!({"name": "A", "value": "2"})
        ));
        assert!(!equal(&json!([1]), &json!([1, 2])));
        assert!(equal(&json!(420), &json!(420.0)));
        assert!(!equal(
            &json!({"emptyDir": {}}),
            &json!({"persistentVolumeClaim": {"claimName": "c"}})
        ));
        assert!(!equal(
            &json!({"name": "d", "emptyDir": {}}),
            &json!({"name": "d"})
        ));
    }
}
