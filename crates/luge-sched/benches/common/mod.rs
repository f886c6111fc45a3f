//! What the scheduling benchmarks share: a fixed-seed xorshift generator, so every run measures
//! the same inputs.

#![allow(dead_code)] // each benchmark uses a part

use luge_sched::{FunctionId, Request, RequestId};

/// Xorshift64: deterministic and cheap beside what is measured.
pub struct Gen(pub u64);
impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn req(&mut self, id: u64) -> Request {
        let d = self.next() % 1_000_000_000;
        Request::new(RequestId(id), FunctionId(0), 0, d, 1_000 + self.next() % 100_000)
    }
}
