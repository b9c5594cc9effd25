//! Go's `time.Duration` text form ("90s", "1h2m3s", "1.5m", "300ms"), which deic-dk's
//! configuration uses.

use std::time::Duration;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason} (expected Go's form, such as \"90s\" or \"1h2m3s\")")]
pub struct InvalidDuration {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses a Go duration. Negative durations are refused: no setting here means anything by one.
pub fn parse(text: &str) -> Result<Duration, InvalidDuration> {
    let fail = |reason| InvalidDuration {
        text: text.to_owned(),
        reason,
    };
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        return Err(fail("negative"));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(fail("empty"));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| fail("a number without a unit"))?;
        let (number, tail) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(fail("a unit without a number"));
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(fail("unknown unit (use ns, us, ms, s, m or h)")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| fail("number too large"))?
        };
        let mut nanos = whole.checked_mul(unit_nanos).ok_or_else(|| fail("too large"))?;
        let mut scale = unit_nanos;
        for digit in fraction.bytes().take(20) {
            scale /= 10;
            // Checked: a whole part just below the limit plus its fraction can still overflow.
            nanos = nanos
                .checked_add(u128::from(digit - b'0') * scale)
                .ok_or_else(|| fail("too large"))?;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(|| fail("too large"))?;
        rest = tail;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| fail("too large"))?;
    // The remainder of a division by 10^9 always fits in u32.
    let subsec = (total_nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, subsec))
}

/// A serde field of a Go duration above 0 (`#[serde(deserialize_with = ...)]` in a setting's
/// own struct).
pub fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    use serde::{Deserialize, de::Error};
    let text = String::deserialize(d)?;
    match parse(&text) {
        Ok(d) if d.is_zero() => Err(D::Error::custom("must be above 0")),
        Ok(d) => Ok(d),
        Err(e) => Err(D::Error::custom(e)),
    }
}

/// Formats a duration as Go prints it, for messages and docs ("1m30s").
pub fn format(duration: Duration) -> String {
    let secs = duration.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let nanos = duration.subsec_nanos();
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if nanos == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let fraction = format!("{nanos:09}");
        out.push_str(&format!("{s}.{}s", fraction.trim_end_matches('0')));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_go_reads() {
        let cases = [
            ("90s", Duration::from_secs(90)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m3s", Duration::from_secs(3723)),
            ("1.5m", Duration::from_secs(90)),
            ("300ms", Duration::from_millis(300)),
            ("2us", Duration::from_micros(2)),
            ("0", Duration::ZERO),
            ("+5s", Duration::from_secs(5)),
            (".5s", Duration::from_millis(500)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_go_refuses_and_negatives() {
        for text in ["", "90", "s", "1x", "-5s", "1..5s", "1h2", "."] {
            assert!(parse(text).is_err(), "{text} should be refused");
        }
    }

    #[test]
    fn refuses_a_fraction_that_overflows_the_whole_part() {
        // Found by the workspace_request fuzz target: the whole part passes checked_mul, its
        // fraction then overflowed (a panic in debug, about 30 minutes once wrapped in release).
        let err = parse("94522879700260684295381835.9h").unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }

    #[test]
    fn formats_as_go_prints() {
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::ZERO), "0s");
    }
}
