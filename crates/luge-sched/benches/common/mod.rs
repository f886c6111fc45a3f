//! What the scheduling benchmarks share: a fixed-seed xorshift generator, so every run measures
//! the same inputs, and a policy loaded as the dispatch benchmark loads it (which
//! `luge-runtime`'s `examples/calibrate.rs` includes by path, to time the same decisions).

#![allow(dead_code)] // each benchmark uses a part

use luge_sched::{Action, Event, FunctionId, Policy, Request, RequestId};

/// Requests queued per worker behind the running one.
pub const DEPTH: usize = 32;

/// `p` after `DEPTH + 1` arrivals per worker, every worker running one request.
pub fn loaded<P: Policy>(mut p: P) -> P {
    let workers = p.workers();
    let mut out = Vec::new();
    let mut x = 42u64;
    for id in 0..(workers * (DEPTH + 1)) as u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let r = Request::new(RequestId(id), FunctionId(0), 0, 1_000_000 + (x >> 40), 10_000);
        p.on_event(0, Event::Arrival(r), &mut out);
    }
    for a in std::mem::take(&mut out) {
        if let Action::Run { worker, req } = a {
            p.on_event(0, Event::Started { worker, id: req.id }, &mut out);
        }
    }
    p
}

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
