//! Semantic JSON comparison of the two engines' results: object keys in any order, numbers by
//! value (`80` and `80.0` are one number, as both are once stored), lists in order.

use serde_json::Value;

/// At most this many differences are listed per object.
const MAX_LISTED: usize = 8;

/// The differences between `a` (outfit) and `b` (Gatekeeper), each as `path: outfit … ≠
/// gatekeeper …`; empty when they are the same.
pub(crate) fn differences(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(a, b, &mut String::new(), &mut out);
    out
}

fn walk(a: &Value, b: &Value, path: &mut String, out: &mut Vec<String>) {
    if out.len() >= MAX_LISTED {
        return;
    }
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, av) in a {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match b.get(key) {
                    Some(bv) => walk(av, bv, path, out),
                    None => out.push(format!("{path}: only in outfit: {}", short(av))),
                }
                path.truncate(len);
            }
            for (key, bv) in b {
                if !a.contains_key(key) && out.len() < MAX_LISTED {
                    out.push(format!("{path}/{key}: only in Gatekeeper: {}", short(bv)));
                }
            }
        }
        (Value::Array(xs), Value::Array(ys)) => {
            for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                let len = path.len();
                path.push_str(&format!("/{i}"));
                walk(x, y, path, out);
                path.truncate(len);
            }
            if xs.len() != ys.len() {
                out.push(format!(
                    "{path}: {} elements in outfit, {} in Gatekeeper",
                    xs.len(),
                    ys.len()
                ));
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            let same = match (x.as_i64(), y.as_i64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            };
            if !same {
                out.push(format!("{path}: outfit {x} ≠ Gatekeeper {y}"));
            }
        }
        _ if a == b => {}
        _ => out.push(format!("{path}: outfit {} ≠ Gatekeeper {}", short(a), short(b))),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::differences;

    #[test]
    fn key_order_and_integral_floats_are_not_differences() {
        let a = json!({"a": 1, "b": [1, {"x": "y"}]});
        let b = json!({"b": [1.0, {"x": "y"}], "a": 1});
        assert!(differences(&a, &b).is_empty());
    }

    #[test]
    fn each_difference_is_named_by_its_path() {
        let a = json!({"spec": {"containers": [{"name": "c0", "image": "a"}], "only": 1}});
        let b = json!({"spec": {"containers": [{"name": "c0", "image": "b"}, {"name": "c1"}]}});
        assert_eq!(
            differences(&a, &b),
            [
                "/spec/containers/0/image: outfit \"a\" ≠ Gatekeeper \"b\"",
                "/spec/containers: 1 elements in outfit, 2 in Gatekeeper",
                "/spec/only: only in outfit: 1",
            ]
        );
    }
}
