//! Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`), read by apimachinery's grammar
//! (`resource.ParseQuantity`) and valued exactly on their decimal digits, never through a float:
//! `0.1` CPU is 100m, not 100.00000000000001m. One reading serves the PodPolicy checks (is it a
//! quantity; is the pod's quantity the policy's amount in another spelling) and the workspace
//! backend's per-user limits (whole millicores and bytes, rounded up as `MilliValue` and `Value`
//! round), and the limits are written back short for messages.
//!
//! Where outfit parts from apimachinery, on purpose: a lone sign or `.` (Kubernetes reads zero) is
//! refused, as nobody writes one meaning zero; and the limits keep values exact up to `u64::MAX`
//! where Kubernetes caps a binary quantity at 2^63-1, so a huge request never counts as small.

use std::fmt;

/// A quantity that could not be read, naming the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity at all.
    #[error("{text:?} is not a quantity (such as 500m, 2, 1.5Gi or 1e3)")]
    Syntax {
        /// The text read.
        text: String,
    },
    /// Below zero, where only an amount of something makes sense.
    #[error("{text:?} is negative")]
    Negative {
        /// The text read.
        text: String,
    },
}

/// Whether `text` is a quantity by apimachinery's grammar: a signed decimal number, then a binary
/// suffix (`Ki`..`Ei`), a decimal one (`n`, `u`, `m`, `k`, `M`..`E`) or an exponent (`e3`, `E-2`).
pub fn is_quantity(text: &str) -> bool {
    Quantity::read(text).is_ok()
}

/// `text` as whole millicores, rounded up as Kubernetes rounds a CPU request (`0.0001` is 1m).
/// Negative amounts are refused; beyond `u64::MAX` millicores it saturates, so no quantity ever
/// slips under a limit by wrapping.
pub fn cpu_millis(text: &str) -> Result<u64, QuantityError> {
    Quantity::read(text)?.non_negative_ceil(3)
}

/// `text` as whole bytes, rounded up as Kubernetes rounds a memory request (`100m` is 1 byte).
/// Refuses and saturates as [`cpu_millis`] does.
pub fn bytes(text: &str) -> Result<u64, QuantityError> {
    Quantity::read(text)?.non_negative_ceil(0)
}

/// Whether two quantities are the same amount as the API server stores them: it keeps a pod's
/// quantities in canonical form (`0.5` becomes `500m`, `1024Mi` becomes `1Gi`, `0.1n` is rounded
/// up to `1n`, a binary quantity is capped at 2^63-1), so a pod admitted again, or one asking for
/// the same amount in another spelling, compares equal. A text that is not a quantity, or one
/// too large to value in nano-units, is compared as text.
pub fn same_amount(a: &str, b: &str) -> bool {
    let nanos = |text| Quantity::read(text).ok().and_then(|q| q.stored_nanos());
    match (nanos(a), nanos(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// CPU as Kubernetes writes it: whole cores (`2`) when they are whole, else millicores (`1500m`).
pub fn format_cpu(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Memory in the largest binary unit that holds it whole (`512Mi`, `1Gi`), else plain bytes.
pub fn format_bytes(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    for (suffix, shift) in BINARY_SUFFIXES.iter().rev() {
        let unit = 1u64 << shift;
        if bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A quantity to show: CPU or memory, with the unit Kubernetes would use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// Millicores.
    Cpu(u64),
    /// Bytes.
    Memory(u64),
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu(millis) => f.write_str(&format_cpu(*millis)),
            Self::Memory(bytes) => f.write_str(&format_bytes(*bytes)),
        }
    }
}

/// The binary suffixes and the power of two each stands for.
const BINARY_SUFFIXES: &[(&str, u32)] = &[
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// The decimal SI suffixes and the power of ten each stands for. `K` is not among them, as in
/// Kubernetes: `1K` is an error, `1k` is 1000.
const DECIMAL_SUFFIXES: &[(&str, i64)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// apimachinery's `maxAllowed`: the most a binary quantity holds, in whole units.
const MAX_BINARY_UNITS: u128 = i64::MAX as u128;

/// A quantity read, borrowing its text: `± whole.fraction × 10^exponent10 × 2^exponent2`.
struct Quantity<'t> {
    text: &'t str,
    negative: bool,
    whole: &'t str,
    fraction: &'t str,
    exponent10: i64,
    exponent2: u32,
}

impl<'t> Quantity<'t> {
    /// Reads `text` by apimachinery's grammar: `[+-] digits [. digits] suffix`, where the suffix
    /// is a decimal SI suffix, a binary one, or `e`/`E` and a whole exponent that fits 64 bits.
    fn read(text: &'t str) -> Result<Self, QuantityError> {
        let syntax = || QuantityError::Syntax {
            text: text.to_owned(),
        };
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
            return Err(syntax());
        }
        let (exponent10, exponent2) = suffix_value(suffix).ok_or_else(syntax)?;
        Ok(Self {
            text,
            negative,
            whole,
            fraction,
            exponent10,
            exponent2,
        })
    }

    fn digits(&self) -> impl DoubleEndedIterator<Item = u128> + '_ {
        self.whole
            .bytes()
            .chain(self.fraction.bytes())
            .map(|b| u128::from(b - b'0'))
    }

    fn is_zero(&self) -> bool {
        self.digits().all(|d| d == 0)
    }

    /// The magnitude in units of `10^-scale`, rounded up to a whole unit; `None` past `u128`.
    fn ceil(&self, scale: i64) -> Option<u128> {
        if self.is_zero() {
            return Some(0);
        }
        let factor = 1u128 << self.exponent2;
        let fraction_len = i64::try_from(self.fraction.len()).unwrap_or(i64::MAX);
        let exponent = self.exponent10.saturating_sub(fraction_len).saturating_add(scale);
        if let Ok(exponent) = u32::try_from(exponent) {
            let digits = decimal(self.digits())?;
            return digits
                .checked_mul(factor)?
                .checked_mul(10u128.checked_pow(exponent)?);
        }
        if exponent >= 0 {
            return None; // 10^exponent alone is past u128.
        }
        // `below` digits (some of them implied leading zeros) fall under the unit.
        let below = exponent.unsigned_abs();
        let len = self.whole.len() + self.fraction.len();
        let above = usize::try_from(below).map_or(0, |below| len.saturating_sub(below));
        let mut value = decimal(self.digits().take(above))?.checked_mul(factor)?;
        // The part below the unit times 2^exponent2, by long multiplication from its last digit:
        // what carries out of it is whole units, and any digit left over rounds up.
        let (mut carry, mut inexact) = (0u128, false);
        let mut positions = below;
        for digit in self.digits().rev().take(len - above) {
            let product = digit * factor + carry;
            inexact |= !product.is_multiple_of(10);
            carry = product / 10;
            positions -= 1;
        }
        while carry > 0 && positions > 0 {
            inexact |= !carry.is_multiple_of(10);
            carry /= 10;
            positions -= 1;
        }
        value = value.checked_add(carry)?;
        value.checked_add(u128::from(inexact))
    }

    /// The amount in units of `10^-scale`, rounded up, saturating at `u64::MAX`; refused when
    /// below zero.
    fn non_negative_ceil(&self, scale: i64) -> Result<u64, QuantityError> {
        if self.negative && !self.is_zero() {
            return Err(QuantityError::Negative {
                text: self.text.to_owned(),
            });
        }
        Ok(self
            .ceil(scale)
            .map_or(u64::MAX, |n| u64::try_from(n).unwrap_or(u64::MAX)))
    }

    /// The amount in nano-units as `ParseQuantity` keeps it: the magnitude rounded up to a whole
    /// nano-unit, a binary quantity capped at `maxAllowed`, then the sign. `None` past `i128`.
    fn stored_nanos(&self) -> Option<i128> {
        let mut nanos = self.ceil(9)?;
        if self.exponent2 > 0 {
            nanos = nanos.min(MAX_BINARY_UNITS * 1_000_000_000);
        }
        let nanos = i128::try_from(nanos).ok()?;
        Some(if self.negative { -nanos } else { nanos })
    }
}

/// Decimal `digits`, most significant first, as one number; `None` past `u128`.
fn decimal(mut digits: impl Iterator<Item = u128>) -> Option<u128> {
    digits.try_fold(0u128, |n, d| n.checked_mul(10)?.checked_add(d))
}

/// The powers of ten and of two a suffix stands for.
fn suffix_value(suffix: &str) -> Option<(i64, u32)> {
    if let Some((_, shift)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((0, *shift));
    }
    if let Some((_, power)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((*power, 0));
    }
    // `E` alone is exa (above); followed by a number it is an exponent, as `e` always is.
    // apimachinery reads the exponent with `strconv.ParseInt(_, 10, 64)`: signs, digits, 64 bits.
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((exponent.parse::<i64>().ok()?, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KI: u64 = 1 << 10;
    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

    /// Rows of apimachinery's `TestQuantityParse` (pkg/api/resource/quantity_test.go), as whole
    /// bytes: Kubernetes' `Value()` rounds up, so a fraction of a byte is one byte.
    #[test]
    fn bytes_match_kubernetes_quantity_parse_table() {
        let table: &[(&str, u64)] = &[
            // "Binary suffixes"
            ("1Ki", KI),
            ("8Ki", 8 * KI),
            ("7Mi", 7 * MI),
            ("6Gi", 6 * GI),
            ("5Ti", 5 << 40),
            ("4Pi", 4 << 50),
            ("3Ei", 3 << 60),
            ("10Ti", 10 << 40),
            // "Decimal suffixes"
            ("5n", 1),
            ("4u", 1),
            ("3m", 1),
            ("9", 9),
            ("8k", 8_000),
            ("50k", 50_000),
            ("7M", 7_000_000),
            ("6G", 6_000_000_000),
            ("5T", 5_000_000_000_000),
            ("2P", 2_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("12E", 12_000_000_000_000_000_000),
            // "Decimal exponents"
            ("1E-3", 1),
            ("1e3", 1_000),
            ("1E6", 1_000_000),
            ("1e9", 1_000_000_000),
            ("1E18", 1_000_000_000_000_000_000),
            // "Nonstandard but still parsable"
            ("100.035k", 100_035),
            // "Things that look like floating point"
            ("0.0005k", 1),
            ("0.5e0", 1),
            ("10.035M", 10_035_000),
            ("1.2e3", 1_200),
            ("1.3E+6", 1_300_000),
            ("1.40e9", 1_400_000_000),
            ("1.53E12", 1_530_000_000_000),
            ("1.7E18", 1_700_000_000_000_000_000),
            ("9.01", 10),
            ("8.1k", 8_100),
            ("7.123456M", 7_123_456),
            ("6.987654321G", 6_987_654_321),
            ("5.444T", 5_444_000_000_000),
            ("2.5P", 2_500_000_000_000_000),
            ("1.01E", 1_010_000_000_000_000_000),
            // "We'll accept fractional binary stuff, too."
            ("100.035Ki", 102_436), // 102435.84
            ("0.5Mi", MI / 2),
            ("0.05Gi", 53_687_092),      // 53687091.2
            ("0.025Ti", 27_487_790_695), // 27487790694.4
            // "Things written by trolls"
            ("0.000000000001Ki", 1),
            (".001", 1),
            (".0001k", 1),
            ("1.", 1),
            ("1.G", 1_000_000_000),
            // A leading `+`, zeros, and fractions of binary units.
            ("+1Gi", GI),
            ("1.5Gi", GI + GI / 2),
            ("0", 0),
            ("-0", 0),
            ("007", 7),
            ("0.000", 0),
        ];
        for (text, want) in table {
            assert_eq!(bytes(text), Ok(*want), "{text}");
        }
    }

    /// Kubernetes' CPU request is `MilliValue()`, which rounds up: 0.0001 cores asks for 1m.
    #[test]
    fn cpu_rounds_up_to_the_next_millicore_as_kubernetes_milli_value_does() {
        let table: &[(&str, u64)] = &[
            ("0.0001", 1),
            ("100m", 100),
            ("1500m", 1_500),
            ("1.5", 1_500),
            ("0.5", 500),
            (".5", 500),
            ("2", 2_000),
            ("+2", 2_000),
            ("1e3", 1_000_000),
            ("1E-3", 1),
            ("0.5e-2", 5),
            ("3.001n", 1),
            ("0.9n", 1),
            ("250000u", 250),
            ("0.1", 100),
            ("1k", 1_000_000),
            ("0", 0),
            // A millicore is not a power of two: 1Ki cores is 1024000m exactly, 0.5Ki 512000m.
            ("1Ki", 1_024_000),
            ("0.5Ki", 512_000),
            ("0.001Ki", 1_024), // 1.024 cores
        ];
        for (text, want) in table {
            assert_eq!(cpu_millis(text), Ok(*want), "{text}");
        }
    }

    /// apimachinery's invalid cases (`TestQuantityParseErrors`' table), plus `1K` (the decimal
    /// kilo is lower-case only) and an exponent past 64 bits (`strconv.ParseInt` refuses it).
    #[test]
    fn garbage_is_refused_naming_the_text() {
        for text in [
            "1.1.M",
            "1+1.0M",
            "0.1mi",
            "0.1am",
            "aoeu",
            ".5i",
            "1i",
            "-3.01e-",
            " 1",
            "1 ",
            "",
            "1K",
            "1e",
            "1e+",
            "Gi",
            ".",
            "+",
            "-",
            "1Gi ",
            "1e5.5",
            "1Mi5",
            "1e99999999999999999999",
            "1e-99999999999999999999",
            "lots",
            "1GB",
            "1..2",
        ] {
            let err = bytes(text).unwrap_err();
            assert!(matches!(err, QuantityError::Syntax { .. }), "{text}: {err}");
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
            assert!(cpu_millis(text).is_err(), "{text}");
            assert!(!is_quantity(text), "{text}");
        }
        for text in [
            "1", "500m", "2Gi", "1.5", ".5", "1e3", "+1", "10E-2", "-1", "1E", "1.G",
        ] {
            assert!(is_quantity(text), "{text}");
        }
    }

    #[test]
    fn negative_values_are_refused() {
        for text in ["-1", "-100m", "-1.5Gi", "-0.0001"] {
            let err = cpu_millis(text).unwrap_err();
            assert_eq!(
                err,
                QuantityError::Negative {
                    text: text.to_owned()
                }
            );
            assert!(err.to_string().contains(text));
        }
        // Kubernetes' "-3.01i" is wrong twice; its syntax is what we report.
        assert!(matches!(bytes("-3.01i"), Err(QuantityError::Syntax { .. })));
    }

    /// Kubernetes saturates at 2^63-1 (its `maxAllowed`, the "9Ei" row); outfit keeps values exact
    /// up to `u64::MAX` and saturates there, so a huge request can never count as small.
    #[test]
    fn huge_values_saturate_rather_than_wrap() {
        assert_eq!(bytes("9Ei"), Ok(9 << 60));
        assert_eq!(bytes("9223372036854775807Ki"), Ok(u64::MAX));
        assert_eq!(cpu_millis("9223372036854775807"), Ok(u64::MAX));
        assert_eq!(bytes("1e9223372036854775807"), Ok(u64::MAX));
        assert_eq!(bytes("1e-9223372036854775808"), Ok(1));
        assert_eq!(bytes("0.1e-9223372036854775808"), Ok(1));
        assert_eq!(bytes("0e999999999"), Ok(0));
        assert_eq!(bytes("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(bytes("18446744073709551616"), Ok(u64::MAX));
        assert_eq!(bytes("18446744073709551614.5"), Ok(u64::MAX));
        assert_eq!(bytes("18446744073709551613.5"), Ok(u64::MAX - 1));
        assert_eq!(bytes(&format!("1{}", "0".repeat(400))), Ok(u64::MAX));
        assert_eq!(bytes(&format!("0.{}1", "0".repeat(400))), Ok(1));
    }

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
            ("-0", "0"),
            ("+1", "1"),
            // ParseQuantity rounds a magnitude below a nano-unit up to one, keeping the sign.
            ("0.1n", "1n"),
            ("1.000000001n", "2n"),
            ("-0.1n", "-1n"),
            // ...and caps a binary quantity at 2^63-1 units; a decimal one it leaves alone.
            ("8Ei", "9223372036854775807"),
            ("16Ei", "9223372036854775807"),
        ] {
            assert!(same_amount(a, b), "{a} = {b}");
            assert!(same_amount(b, a), "{b} = {a}");
        }
        for (a, b) in [
            ("1", "2"),
            ("1Gi", "1G"),
            ("500m", "0.6"),
            ("1", "-1"),
            ("10E", "9223372036854775807"),
            ("1.1n", "1n"),
        ] {
            assert!(!same_amount(a, b), "{a} != {b}");
        }
        // Not quantities, or past what nano-units hold: compared as text.
        assert!(same_amount("x", "x"));
        assert!(!same_amount("x", "y"));
        assert!(!same_amount("0.1n", "100p"));
        assert!(same_amount("1e40", "1e40"));
        assert!(!same_amount("1e40", "10e39"));
    }

    #[test]
    fn formats_as_kubernetes_writes_quantities() {
        assert_eq!(format_cpu(1_500), "1500m");
        assert_eq!(format_cpu(2_000), "2");
        assert_eq!(format_cpu(0), "0");
        assert_eq!(format_cpu(1), "1m");
        assert_eq!(format_bytes(512 * MI), "512Mi");
        assert_eq!(format_bytes(GI), "1Gi");
        assert_eq!(format_bytes(GI + GI / 2), "1536Mi");
        assert_eq!(format_bytes(1_000), "1000");
        assert_eq!(format_bytes(0), "0");
        assert_eq!(format_bytes(3 << 60), "3Ei");
        assert_eq!(Amount::Cpu(2_500).to_string(), "2500m");
        assert_eq!(Amount::Memory(2 * GI).to_string(), "2Gi");
        // What is formatted reads back the same.
        for millis in [1, 999, 1_000, 1_500, 64_000] {
            assert_eq!(cpu_millis(&format_cpu(millis)), Ok(millis));
        }
        for n in [1, 1_000, KI, 512 * MI, 3 * GI] {
            assert_eq!(bytes(&format_bytes(n)), Ok(n));
        }
    }
}
