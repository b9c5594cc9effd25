//! Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`), read the way apimachinery's
//! `resource.ParseQuantity` reads them and rounded the way `MilliValue` and `Value` round them,
//! for the per-user limits; and written back short for messages.
//!
//! The value is computed exactly on the decimal digits, never through a float: `0.1` CPU is
//! 100m, not 100.00000000000001m, and the rounding up a fraction triggers is Kubernetes' own.

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
    /// Below zero: nothing the backend limits can be negative.
    #[error("{text:?} is negative")]
    Negative {
        /// The text read.
        text: String,
    },
}

/// `text` as whole millicores, rounded up as Kubernetes rounds a CPU request (`0.0001` is 1m).
/// Beyond `u64::MAX` millicores it saturates, so no quantity ever slips under a limit by
/// wrapping.
pub fn cpu_millis(text: &str) -> Result<u64, QuantityError> {
    Ok(Parsed::read(text)?.ceil(3))
}

/// `text` as whole bytes, rounded up as Kubernetes rounds a memory request (`100m` is 1 byte).
/// Saturates at `u64::MAX` as [`cpu_millis`] does.
pub fn bytes(text: &str) -> Result<u64, QuantityError> {
    Ok(Parsed::read(text)?.ceil(0))
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

/// A quantity read: `digits × 10^exponent10 × 2^exponent2`, where `digits` is the number's
/// decimal digits without its point, most significant first.
struct Parsed {
    digits: Vec<u8>,
    exponent10: i64,
    exponent2: u32,
}

impl Parsed {
    /// Reads `text` by Kubernetes' grammar: `[+-] digits [. digits] suffix`, where the suffix is
    /// a decimal SI suffix, a binary one, or `e`/`E` and a whole, possibly signed, exponent.
    fn read(text: &str) -> Result<Self, QuantityError> {
        let syntax = || QuantityError::Syntax {
            text: text.to_owned(),
        };
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = unsigned
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        // Kubernetes reads a lone "." or "+" as zero; refusing them loses nothing a person
        // would write on purpose.
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(syntax());
        }
        let (suffix10, exponent2) = suffix_value(suffix).ok_or_else(syntax)?;
        let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0').collect();
        if negative && digits.iter().any(|d| *d != 0) {
            return Err(QuantityError::Negative {
                text: text.to_owned(),
            });
        }
        Ok(Self {
            digits,
            exponent10: suffix10.saturating_sub(fraction.len() as i64),
            exponent2,
        })
    }

    /// The value in units of `10^-scale`, rounded up to a whole unit, saturating at `u64::MAX`.
    fn ceil(&self, scale: i64) -> u64 {
        let mut digits = self.digits.clone();
        multiply(&mut digits, self.exponent2);
        let exponent = self.exponent10.saturating_add(scale);
        let (whole, rest): (&[u8], &[u8]) = if exponent >= 0 {
            (&digits, &[])
        } else {
            let cut = usize::try_from(exponent.unsigned_abs()).unwrap_or(usize::MAX);
            digits.split_at(digits.len().saturating_sub(cut))
        };
        let mut value: u64 = 0;
        let trailing_zeros = u64::try_from(exponent.max(0)).unwrap_or(u64::MAX);
        for digit in whole
            .iter()
            .copied()
            .chain(std::iter::repeat_n(0, trailing_zeros.min(64) as usize))
        {
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit)))
            {
                Some(v) => value = v,
                None => return u64::MAX,
            }
        }
        // More trailing zeros than 64 overflow any non-zero value.
        if trailing_zeros > 64 && value != 0 {
            return u64::MAX;
        }
        if rest.iter().any(|d| *d != 0) {
            value.saturating_add(1)
        } else {
            value
        }
    }
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
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // An exponent too large for i64 is far beyond any saturation point either way.
    let power = exponent.parse::<i64>().unwrap_or(if exponent.starts_with('-') {
        i64::MIN
    } else {
        i64::MAX
    });
    Some((power, 0))
}

/// Multiplies the decimal `digits` by `2^exponent2` in place.
fn multiply(digits: &mut Vec<u8>, mut exponent2: u32) {
    while exponent2 > 0 {
        let shift = exponent2.min(60);
        exponent2 -= shift;
        let factor = 1u128 << shift;
        let mut carry: u128 = 0;
        for digit in digits.iter_mut().rev() {
            let product = u128::from(*digit) * factor + carry;
            *digit = (product % 10) as u8;
            carry = product / 10;
        }
        let mut head = Vec::new();
        while carry > 0 {
            head.push((carry % 10) as u8);
            carry /= 10;
        }
        head.reverse();
        digits.splice(0..0, head);
    }
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
            // The brief's own: a leading `+`, and fractions of binary units.
            ("+1Gi", GI),
            ("1.5Gi", GI + GI / 2),
            ("0", 0),
            ("-0", 0),
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
        ];
        for (text, want) in table {
            assert_eq!(cpu_millis(text), Ok(*want), "{text}");
        }
    }

    /// apimachinery's invalid cases (`TestQuantityParseErrors`' table), plus `1K`: the decimal
    /// kilo is lower-case only.
    #[test]
    fn garbage_is_refused_naming_the_text() {
        for text in [
            "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01e-", " 1", "1 ", "", "1K", "1e",
            "1e+", "Gi", ".", "+", "1Gi ",
        ] {
            let err = bytes(text).unwrap_err();
            assert!(matches!(err, QuantityError::Syntax { .. }), "{text}: {err}");
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
            assert!(cpu_millis(text).is_err(), "{text}");
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
        assert_eq!(bytes("1e999999999999999999999"), Ok(u64::MAX));
        assert_eq!(bytes("1e-999999999999999999999"), Ok(1));
        assert_eq!(bytes("0e999999999"), Ok(0));
        assert_eq!(bytes("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(bytes("18446744073709551616"), Ok(u64::MAX));
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
