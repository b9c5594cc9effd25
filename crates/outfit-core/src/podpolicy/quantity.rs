//! Resource quantities compared by value: the API server stores a pod's quantities in their
//! canonical form (`0.5` becomes `500m`, `1024Mi` becomes `1Gi`), so a pod admitted again, or a
//! pod that already asks for the same amount in another spelling, must compare equal to what a
//! PodPolicy sets. One reading of apimachinery's syntax serves both the check when a policy loads
//! and the comparison.

use serde_json::Value;

/// Whether two quantities (strings, or numbers as a request may send them) are the same amount;
/// a quantity too small or too large to compare in nano-units is compared as text.
pub(super) fn same_amount(found: &Value, wanted: &Value) -> bool {
    let text = |value: &Value| match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(found), text(wanted)) {
        (Some(a), Some(b)) => match (nanos(&a), nanos(&b)) {
            (Some(a), Some(b)) => a == b,
            _ => a == b,
        },
        _ => found == wanted,
    }
}

/// apimachinery's quantity syntax: a signed decimal number, then a binary suffix (`Ki`..`Ei`), a
/// decimal one (`n`, `u`, `m`, `k`, `M`..`E`) or an exponent (`e3`, `E-2`).
pub(super) fn is_quantity(text: &str) -> bool {
    parse(text).is_some()
}

/// A quantity read: `negative`, the digits as written (`whole` and `fraction`), and the powers of
/// ten and of two its suffix multiplies them by.
struct Parsed<'t> {
    negative: bool,
    whole: &'t str,
    fraction: &'t str,
    exponent10: i32,
    exponent2: u32,
}

fn parse(text: &str) -> Option<Parsed<'_>> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let number_end = unsigned
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let (exponent10, exponent2) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // An exponent beyond i32 is still the syntax; its value then does not fit (`nanos`).
            let saturated = if digits.starts_with('-') {
                i32::MIN
            } else {
                i32::MAX
            };
            (digits.parse::<i32>().unwrap_or(saturated), 0)
        }
    };
    Some(Parsed {
        negative,
        whole,
        fraction,
        exponent10,
        exponent2,
    })
}

/// A quantity in nano-units (`1` is 10^9), exactly; `None` when it is not a quantity, has digits
/// below a nano-unit, or does not fit.
fn nanos(text: &str) -> Option<i128> {
    let parsed = parse(text)?;
    // The digits as one integer, and the power of ten that places its point.
    let mut mantissa: i128 = 0;
    for digit in parsed.whole.bytes().chain(parsed.fraction.bytes()) {
        mantissa = mantissa.checked_mul(10)?.checked_add(i128::from(digit - b'0'))?;
    }
    let exponent10 = parsed
        .exponent10
        .checked_add(9)?
        .checked_sub(i32::try_from(parsed.fraction.len()).ok()?)?;
    let mut value = mantissa.checked_mul(1i128.checked_shl(parsed.exponent2)?)?;
    if exponent10 >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(exponent10).ok()?)?)?;
    } else {
        let divisor = 10i128.checked_pow(exponent10.unsigned_abs())?;
        if value % divisor != 0 {
            return None;
        }
        value /= divisor;
    }
    Some(if parsed.negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn spellings_of_one_amount_are_the_same_as_the_api_server_stores_them() {
        for (a, b) in [
            ("0.5", "500m"),
            ("1", "1000m"),
            ("1.5Gi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("1e3", "1k"),
            ("2", "2"),
            ("100M", "0.1G"),
            ("1E-3", "1m"),
        ] {
            assert!(same_amount(&json!(a), &json!(b)), "{a} = {b}");
        }
        assert!(
            same_amount(&json!(1), &json!("1")),
            "a number as a request sends it"
        );
        for (a, b) in [("1", "2"), ("1Gi", "1G"), ("500m", "0.6"), ("1", "-1")] {
            assert!(!same_amount(&json!(a), &json!(b)), "{a} != {b}");
        }
        // Below a nano-unit, or not a quantity: compared as text.
        assert!(same_amount(&json!("0.1n"), &json!("0.1n")));
        assert!(!same_amount(&json!("0.1n"), &json!("100p")));
        assert_eq!(nanos("1"), Some(1_000_000_000));
        assert_eq!(nanos("1Ki"), Some(1024 * 1_000_000_000));
        assert_eq!(nanos("x"), None);
    }
}
