//! W3C Trace Context (`traceparent`, version 00): the one parser and formatter of the header the
//! HTTP front end accepts and answers with, and of the `TRACEPARENT` variable a guest sees (the
//! OpenTelemetry convention for carrying a context in the environment).
//!
//! A node continues the caller's trace: its own span for the request is a child of the caller's
//! span, and each stage of a chain is a child of the node's span, with a span id derived from the
//! node's ([`TraceContext::stage`]) so that no randomness is needed below the front end.

use std::fmt;

/// The header's name (lower case, as HTTP/2 and hyper spell it).
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Length of a version-00 `traceparent` value: `00-<32 hex>-<16 hex>-<2 hex>`.
pub const TRACEPARENT_LEN: usize = 55;

/// A position in a trace: the trace, the span that is the parent of whatever runs under it, and
/// whether the trace is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    /// The trace id (never 0).
    pub trace_id: u128,
    /// The span id (never 0).
    pub span_id: u64,
    /// The `sampled` flag (bit 0 of the trace flags).
    pub sampled: bool,
}

impl TraceContext {
    /// Parses a `traceparent` value. `None` for anything the W3C specification says to ignore
    /// (a receiver then starts a new trace): wrong length or separators, upper-case or non-hex
    /// digits, version `ff`, an all-zero trace or span id. A version above 00 is read as 00
    /// when it is at least as long and its next character, if any, is `-` (the specification's
    /// forward compatibility).
    pub fn parse(value: &str) -> Option<Self> {
        let b = value.as_bytes();
        if b.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = hex(&b[0..2])?;
        let exact = b.len() == TRACEPARENT_LEN;
        if version == 0xff || (version == 0 && !exact) || (!exact && b[TRACEPARENT_LEN] != b'-') {
            return None;
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let trace_id = hex(&b[3..35])?;
        let span_id = u64::try_from(hex(&b[36..52])?).ok()?;
        let flags = hex(&b[53..55])?;
        (trace_id != 0 && span_id != 0).then_some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The same trace and sampling, under span `span_id` (0 is replaced by 1: a span id is
    /// never 0).
    pub fn with_span(self, span_id: u64) -> Self {
        Self { span_id: span_id.max(1), ..self }
    }

    /// The span id of chain stage `k` under this span: a fixed mix of the two, distinct for
    /// every stage of one request, never 0.
    pub fn stage(self, k: usize) -> Self {
        self.with_span(splitmix64(self.span_id.wrapping_add(k as u64 + 1)))
    }
}

impl fmt::Display for TraceContext {
    /// The version-00 `traceparent` value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "00-{:032x}-{:016x}-{:02x}", self.trace_id, self.span_id, u8::from(self.sampled))
    }
}

/// Lower-case hex digits only (the specification forbids upper case).
fn hex(digits: &[u8]) -> Option<u128> {
    digits.iter().try_fold(0u128, |n, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        Some(n << 4 | u128::from(v))
    })
}

/// SplitMix64's output function: a bijection on u64 that scatters neighbouring inputs.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specifications_example_round_trips() {
        let t = TraceContext::parse(EXAMPLE).unwrap();
        assert_eq!(t.trace_id, 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736);
        assert_eq!(t.span_id, 0x00f0_67aa_0ba9_02b7);
        assert!(t.sampled);
        assert_eq!(t.to_string(), EXAMPLE);
        let unsampled = TraceContext::parse(&EXAMPLE.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled);
        assert_eq!(unsampled.to_string().len(), TRACEPARENT_LEN);
    }

    #[test]
    fn what_the_specification_ignores_is_refused() {
        let bad = [
            "",
            &EXAMPLE[..54],
            &EXAMPLE.to_uppercase(),
            &EXAMPLE.replace("00-4bf", "ff-4bf"),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736+00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            &format!("{EXAMPLE}-extra"),
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        ];
        for value in bad {
            assert_eq!(TraceContext::parse(value), None, "{value:?} accepted");
        }
        // A later version is read as 00, with what follows a `-` ignored.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert_eq!(TraceContext::parse(later), TraceContext::parse(EXAMPLE));
    }

    #[test]
    fn stages_get_distinct_nonzero_span_ids() {
        let t = TraceContext::parse(EXAMPLE).unwrap();
        let ids: std::collections::HashSet<u64> = (0..64).map(|k| t.stage(k).span_id).collect();
        assert_eq!(ids.len(), 64);
        assert!(!ids.contains(&0) && !ids.contains(&t.span_id));
        assert_eq!(t.stage(3), t.stage(3));
        assert_eq!(t.stage(3).trace_id, t.trace_id);
        assert_eq!(t.with_span(0).span_id, 1);
    }
}
