//! Small text helpers shared by the spec, mix-file and trace parsers: exact decimal → nanosecond
//! conversion, durations with units, and the percent-encoding that keeps paths inside a
//! comma-separated spec.

use std::path::{Path, PathBuf};

use luge_sched::Nanos;

/// Parses an unsigned decimal number (`"12"`, `"12.5"`, `".5"`) and multiplies it by `unit`
/// nanoseconds *exactly* (integer arithmetic, no floating point), rounding half up to whole
/// nanoseconds. Digits beyond the 18th decimal place are ignored.
pub(crate) fn parse_decimal_ns(s: &str, unit: u64) -> Result<Nanos, String> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(format!("`{s}` is not an unsigned decimal number"));
    }
    let overflow = || format!("`{s}` is too large");
    let mut value: u64 = 0;
    for b in int.bytes() {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(overflow)?;
    }
    value = value.checked_mul(unit).ok_or_else(overflow)?;
    let frac = &frac[..frac.len().min(18)];
    if !frac.is_empty() {
        let mut num: u128 = 0;
        let mut den: u128 = 1;
        for b in frac.bytes() {
            num = num * 10 + u128::from(b - b'0');
            den *= 10;
        }
        let part = (num * u128::from(unit) + den / 2) / den;
        let part = u64::try_from(part).map_err(|_| overflow())?;
        value = value.checked_add(part).ok_or_else(overflow)?;
    }
    Ok(value)
}

/// Parses a duration with a unit suffix: `ns`, `us` (or `µs`), `ms` or `s`, e.g. `10ms`,
/// `2.5us`, `500ns`. The number is decimal and converted exactly (see [`parse_decimal_ns`]).
pub(crate) fn parse_duration(s: &str) -> Result<Nanos, String> {
    let s = s.trim();
    let units: [(&str, u64); 5] =
        [("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];
    for (suffix, unit) in units {
        if let Some(num) = s.strip_suffix(suffix) {
            return parse_decimal_ns(num, unit).map_err(|e| format!("bad duration `{s}`: {e}"));
        }
    }
    Err(format!("bad duration `{s}`: expected a number with a unit (ns, us, ms or s), e.g. `10ms`"))
}

/// Formats a duration in the largest unit that represents it exactly (`10ms`, `26us`, `1500ns`),
/// so that [`parse_duration`] reads back the same value.
pub(crate) fn fmt_duration(ns: Nanos) -> String {
    if ns == 0 {
        "0ns".to_owned()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Parses a finite `f64`.
pub(crate) fn parse_f64(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a finite number")),
    }
}

/// Encodes a path for a comma-separated spec: `%`, `,` and whitespace become `%XX`.
/// Non-UTF-8 paths are written lossily.
pub(crate) fn encode_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if c == '%' || c == ',' || c.is_whitespace() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes what [`encode_path`] wrote (any `%XX` byte escape is accepted).
pub(crate) fn decode_path(s: &str) -> Result<PathBuf, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| format!("bad %-escape in path `{s}`"))?;
            let b =
                u8::from_str_radix(hex, 16).map_err(|_| format!("bad %-escape in path `{s}`"))?;
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).map_err(|_| format!("path `{s}` is not UTF-8"))?;
    if text.is_empty() {
        return Err("empty path".to_owned());
    }
    Ok(PathBuf::from(text))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact_and_rounded() {
        assert_eq!(parse_decimal_ns("12", 1_000).unwrap(), 12_000);
        assert_eq!(parse_decimal_ns("120.5", 1_000).unwrap(), 120_500);
        assert_eq!(parse_decimal_ns(".5", 1_000).unwrap(), 500);
        assert_eq!(parse_decimal_ns("0.0005", 1_000).unwrap(), 1); // 0.5 ns rounds up
        assert_eq!(parse_decimal_ns("0.0004", 1_000).unwrap(), 0);
        assert_eq!(parse_decimal_ns("1.1", 1_000_000_000).unwrap(), 1_100_000_000);
        assert!(parse_decimal_ns("", 1).is_err());
        assert!(parse_decimal_ns(".", 1).is_err());
        assert!(parse_decimal_ns("-1", 1).is_err());
        assert!(parse_decimal_ns("1e3", 1).is_err());
        assert!(parse_decimal_ns("99999999999999999999", 1).is_err());
    }

    #[test]
    fn durations_round_trip() {
        for ns in [0, 1, 999, 1_000, 26_000, 1_500, 10_000_000, 2_000_000_000, u64::MAX] {
            assert_eq!(parse_duration(&fmt_duration(ns)).unwrap(), ns);
        }
        assert_eq!(parse_duration("2.5us").unwrap(), 2_500);
        assert_eq!(parse_duration("3µs").unwrap(), 3_000);
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn paths_round_trip() {
        for p in ["a/b.mix", "we ird,100%/x y.csv", "/tmp/ü.csv"] {
            let enc = encode_path(Path::new(p));
            assert!(!enc.contains(',') && !enc.contains(' '));
            assert_eq!(decode_path(&enc).unwrap(), PathBuf::from(p));
        }
        assert!(decode_path("a%2").is_err());
        assert!(decode_path("").is_err());
    }
}
