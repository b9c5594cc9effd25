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
//!
//! Numbers compare as the API server holds them once stored ([`number`]): `1` and `1.0` are one
//! value, as they are to Kubeflow (a CRD object's `1.0` is stored as `1` and read back into an
//! integer field), but two integers are never compared through a float, so `2^53 + 1` is not
//! `2^53`.

use serde_json::{Number, Value};

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
        (Value::Number(x), Value::Number(y)) => number(x) == number(y),
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
        Value::Number(n) => number(n) == KubeNumber::Int(0),
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
            .any(|(k, default)| *k == key && number(n) == KubeNumber::Int(*default)),
        _ => false,
    }
}

/// A JSON number as Kubernetes holds it once the API server has stored it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KubeNumber {
    /// An `int64`: what integer text that fits one decodes to, and what any integral value in its
    /// range reads back as after storage.
    Int(i64),
    /// A `float64`: a fraction, or a value beyond `int64`'s range. Never integral within it, so
    /// an `Int` and a `Float` are never the same value.
    Float(f64),
}

/// `n` as the API server holds it once stored. apimachinery decodes a JSON number into an
/// unstructured object as `int64` when its text parses as one and as `float64` otherwise
/// (`sigs.k8s.io/json`); Go writes an integral `float64` without a fraction (`1.0` is stored as
/// `1`, `1e20` as `100000000000000000000`), and that text is read back as `int64` if it fits. So
/// `1` equals `1.0`, `1e20` equals `100000000000000000000` (both the float `1e20`), and integers
/// are compared exactly, never through a float: `9007199254740993` (2^53 + 1) is not
/// `9007199254740992.0`. An integer beyond `int64` (`18446744073709551615`) is a `float64` there
/// too, with the rounding that brings.
pub fn number(n: &Number) -> KubeNumber {
    if let Some(i) = n.as_i64() {
        return KubeNumber::Int(i);
    }
    // Without serde_json's `arbitrary_precision` every number has an f64 value; a u64 beyond
    // i64 rounds to the nearest one, as Go's ParseFloat rounds it.
    let f = n.as_f64().unwrap_or(f64::NAN);
    // -2^63 <= f < 2^63, both bounds exact in f64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f) {
        // In range and integral, so the cast is exact (and -0.0 becomes 0, as Go's "-0" reads).
        #[expect(clippy::cast_possible_truncation, reason = "integral and within i64's range")]
        KubeNumber::Int(f as i64)
    } else {
        KubeNumber::Float(f)
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
        assert!(!equal(
            &json!({"emptyDir": {}}),
            &json!({"persistentVolumeClaim": {"claimName": "c"}})
        ));
        assert!(!equal(
            &json!({"name": "d", "emptyDir": {}}),
            &json!({"name": "d"})
        ));
    }

    /// Kubernetes (apimachinery's JSON decoding, then storage) holds `1.0` as the integer `1`:
    /// Kubeflow reads a CRD PodDefault's `defaultMode: 420.0` back as the int32 420.
    #[test]
    fn integral_floats_equal_their_integers_as_after_the_api_server_stores_them() {
        assert!(equal(&json!(420), &json!(420.0)));
        assert!(equal(&json!(0), &json!(-0.0)));
        assert!(
            equal(&json!({"defaultMode": 420.0}), &json!({})),
            "420.0 is the API default too"
        );
        assert!(
            equal(&json!({"readOnly": false, "n": 0.0}), &json!({})),
            "0.0 is Go's zero value"
        );
        assert!(!equal(&json!(1), &json!(1.5)));
        assert!(equal(&json!(0.5), &json!(0.5)));
    }

    /// Integers are compared exactly, never through f64: apimachinery decodes both to int64.
    #[test]
    fn integers_beyond_2_pow_53_are_compared_exactly() {
        let above: Value = serde_json::from_str("9007199254740993").unwrap();
        let below: Value = serde_json::from_str("9007199254740992").unwrap();
        let below_as_float: Value = serde_json::from_str("9007199254740992.0").unwrap();
        assert!(!equal(&above, &below));
        assert!(!equal(&above, &below_as_float), "2^53 + 1 is not the float 2^53");
        assert!(equal(&below, &below_as_float));
        let max: Value = serde_json::from_str("9223372036854775807").unwrap();
        let max_minus_one: Value = serde_json::from_str("9223372036854775806").unwrap();
        assert!(!equal(&max, &max_minus_one));
    }

    /// Beyond int64 apimachinery has only float64: `1e20` and `100000000000000000000` are the
    /// same stored value, and so are two integers beyond u64 that round to one float.
    #[test]
    fn numbers_beyond_int64_compare_as_the_float64_kubernetes_holds() {
        let exponent: Value = serde_json::from_str("1e20").unwrap();
        let digits: Value = serde_json::from_str("100000000000000000000").unwrap();
        assert!(equal(&exponent, &digits));
        let other: Value = serde_json::from_str("100000000000000000001").unwrap();
        assert!(equal(&digits, &other), "both are the float64 1e20 in Kubernetes");
        let not: Value = serde_json::from_str("200000000000000000000").unwrap();
        assert!(!equal(&digits, &not));
        assert_eq!(
            number(&serde_json::Number::from(u64::MAX)),
            KubeNumber::Float(18_446_744_073_709_551_616.0)
        );
    }
}
