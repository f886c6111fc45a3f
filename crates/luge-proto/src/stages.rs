//! A chain's per-stage times in a UDP-RPC Response (`docs/protocol.md` §1.5), UDP-RPC's
//! counterpart of HTTP's `Luge-Stages`: a client asks with the Request flag [`Flags::STAGES`];
//! a server that knows the flag answers a chain's request with the same flag on the Response and
//! a stage table at the front of the payload — one byte n, then n entries of queueing and
//! execution (u64 little-endian ns each), in stage order, the last being the stage that
//! answered — followed by what the payload would otherwise carry. The fixed header stays as it
//! is, so no version changes: a client that did not ask never gets a table, and a server that
//! does not know the flag answers as before, without it.
//!
//! [`Flags::STAGES`]: crate::Flags::STAGES

/// The most stages a table holds (a chain has at most 16).
pub const MAX_TABLE_STAGES: usize = 16;

/// Bytes of one entry: queueing then execution, u64 little-endian ns each.
pub const STAGE_ENTRY_LEN: usize = 16;

/// One stage's times, as the Response header reports a whole request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StageTimes {
    /// Time at the server not executing this stage: from its hand-off (the first stage: from
    /// receipt) to its answer, minus its execution.
    pub queueing_ns: u64,
    /// The stage's guest execution on a worker, summed across preemptions.
    pub execution_ns: u64,
}

/// A stage table that cannot be written or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StageTableError {
    /// More entries than [`MAX_TABLE_STAGES`].
    #[error("a stage table holds at most {MAX_TABLE_STAGES} stages, not {0}")]
    TooMany(usize),
    /// The payload is shorter than the table it announces.
    #[error("the stage table announces {stages} stages but the payload holds {len} bytes")]
    Truncated {
        /// Stages announced.
        stages: usize,
        /// Payload length.
        len: usize,
    },
}

/// The table's length in bytes for `stages` entries.
pub fn stage_table_len(stages: usize) -> usize {
    1 + stages * STAGE_ENTRY_LEN
}

/// Appends the table of `stages` to `out`.
pub fn encode_stage_table(stages: &[StageTimes], out: &mut Vec<u8>) -> Result<(), StageTableError> {
    let n = u8::try_from(stages.len())
        .ok()
        .filter(|&n| usize::from(n) <= MAX_TABLE_STAGES)
        .ok_or(StageTableError::TooMany(stages.len()))?;
    out.push(n);
    for s in stages {
        out.extend_from_slice(&s.queueing_ns.to_le_bytes());
        out.extend_from_slice(&s.execution_ns.to_le_bytes());
    }
    Ok(())
}

/// A decoded stage table, borrowing the payload it came from (decoding does not allocate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageTable<'a> {
    entries: &'a [u8],
}

impl<'a> StageTable<'a> {
    /// Number of stages.
    pub fn len(&self) -> usize {
        self.entries.len() / STAGE_ENTRY_LEN
    }

    /// Whether it holds no stage.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The stages, in order.
    pub fn iter(&self) -> impl Iterator<Item = StageTimes> + 'a {
        self.entries.chunks_exact(STAGE_ENTRY_LEN).map(|e| {
            let u64_at = |i: usize| {
                let mut b = [0; 8];
                b.copy_from_slice(&e[i..i + 8]);
                u64::from_le_bytes(b)
            };
            StageTimes { queueing_ns: u64_at(0), execution_ns: u64_at(8) }
        })
    }
}

/// Splits the payload of a Response flagged [`Flags::STAGES`](crate::Flags::STAGES) into its
/// stage table and the rest (stdout, or the server's message).
pub fn split_stage_table(payload: &[u8]) -> Result<(StageTable<'_>, &[u8]), StageTableError> {
    let Some((&n, rest)) = payload.split_first() else {
        return Err(StageTableError::Truncated { stages: 0, len: 0 });
    };
    let stages = usize::from(n);
    if stages > MAX_TABLE_STAGES {
        return Err(StageTableError::TooMany(stages));
    }
    let len = stages * STAGE_ENTRY_LEN;
    if rest.len() < len {
        return Err(StageTableError::Truncated { stages, len: payload.len() });
    }
    let (entries, rest) = rest.split_at(len);
    Ok((StageTable { entries }, rest))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    fn times(n: u64) -> Vec<StageTimes> {
        (0..n)
            .map(|i| StageTimes { queueing_ns: 1000 * i + 7, execution_ns: u64::MAX - i })
            .collect()
    }

    #[test]
    fn a_table_round_trips_before_the_rest_of_the_payload() {
        for n in [0, 1, 3, MAX_TABLE_STAGES as u64] {
            let stages = times(n);
            let mut payload = Vec::new();
            encode_stage_table(&stages, &mut payload).unwrap();
            assert_eq!(payload.len(), stage_table_len(stages.len()));
            payload.extend_from_slice(b"stdout");
            let (table, rest) = split_stage_table(&payload).unwrap();
            assert_eq!(table.len(), stages.len());
            assert_eq!(table.is_empty(), n == 0);
            assert_eq!(table.iter().collect::<Vec<_>>(), stages);
            assert_eq!(rest, b"stdout");
        }
    }

    #[test]
    fn the_fuzz_target_checks_a_flagged_responses_table() {
        use crate::{Flags, Message, Response, ResponseHeader, Status};
        let mut payload = Vec::new();
        encode_stage_table(&times(2), &mut payload).unwrap();
        payload.extend_from_slice(b"out");
        let header = ResponseHeader { flags: Flags::STAGES, ..ResponseHeader::new(9, Status::Ok) };
        let mut datagram = Vec::new();
        Message::Response(Response { header, payload: &payload }).encode(&mut datagram).unwrap();
        crate::fuzz_decode(&datagram);
    }

    #[test]
    fn bad_tables_are_errors_not_panics() {
        assert!(matches!(
            encode_stage_table(&times(17), &mut Vec::new()),
            Err(StageTableError::TooMany(17))
        ));
        assert!(matches!(split_stage_table(&[]), Err(StageTableError::Truncated { .. })));
        assert!(matches!(split_stage_table(&[17]), Err(StageTableError::TooMany(17))));
        assert!(matches!(split_stage_table(&[255; 40]), Err(StageTableError::TooMany(255))));
        // Two stages announced, one and a half present.
        let mut short = vec![2];
        short.extend_from_slice(&[0; STAGE_ENTRY_LEN + 8]);
        assert!(matches!(
            split_stage_table(&short),
            Err(StageTableError::Truncated { stages: 2, .. })
        ));
        // Every prefix of a valid table either splits or errs.
        let mut ok = Vec::new();
        encode_stage_table(&times(3), &mut ok).unwrap();
        for end in 0..ok.len() {
            assert!(split_stage_table(&ok[..end]).is_err(), "{end}");
        }
    }
}
