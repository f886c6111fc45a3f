//! Ready sandboxes (after HORSE §1–2's warm sandboxes): for ultra-low-latency functions, each
//! worker keeps a few sandboxes instantiated ahead of their requests, so that such a request
//! starts at its first guest instruction instead of at a store and an instantiation.
//!
//! Isolation is unchanged: a ready sandbox is a fresh store and instance that no request has
//! touched, and it serves exactly one request, which drops it as any sandbox is dropped. What
//! moves is only *when* it is built: by the worker's own thread when it has nothing to run
//! ([`ReadyPool::refill_one`], called before the worker sleeps), never while a request waits.
//!
//! How many a worker keeps per function adapts to its arrivals: a request that finds none ready
//! less than [`SHRINK_AFTER`] after the function's previous request on this worker asks for one
//! more, up to `per_function` — so a function called less than about once a second (one of
//! thousands in rotation) never has one built for nothing, and a burst that used them up before
//! the worker was idle again raises the count; a function whose ready sandboxes sit unused for
//! [`SHRINK_AFTER`] keeps one fewer, and one unused for [`FORGET_AFTER`] none. All of a worker's
//! ready sandboxes together are at most `max` (each holds a slot of the pooling allocator);
//! their number and linear memory are counted in `WorkerShared` for `/metrics`. The functions
//! short of what they want wait in a queue, so an idle worker finds the next one to build
//! without looking at every function it knows, and the idleness check runs at most every
//! [`EXPIRE_EVERY`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use luge_sched::{FunctionId, Nanos};

use crate::registry::Function;
use crate::sandbox::{self, Ready, Unprepared};
use crate::signals::Signals;
use crate::task::WorkerShared;

/// Unused for this long, a function's ready sandboxes shrink by one.
pub(crate) const SHRINK_AFTER: Nanos = 1_000_000_000;
/// Unused for this long, a function keeps none.
pub(crate) const FORGET_AFTER: Nanos = 10_000_000_000;
/// How often an idle worker looks for ready sandboxes gone unused.
pub(crate) const EXPIRE_EVERY: Nanos = 100_000_000;

/// One function's ready sandboxes on one worker.
struct Entry {
    function: Arc<Function>,
    ready: Vec<Ready>,
    /// How many it should have.
    want: usize,
    /// When one was last taken, or the entry last shrank.
    used: Nanos,
    /// Its module's Wasm `start` ran past what a build ahead may take
    /// (`sandbox::PREPARE_LIMIT`): not built ahead again on this worker while the entry lives
    /// (until [`FORGET_AFTER`] uncalled), however often it is called, so that it stalls the
    /// idle worker once, not at every refill.
    slow_start: bool,
}

/// A worker's ready sandboxes, by function (module doc).
pub(crate) struct ReadyPool {
    entries: HashMap<FunctionId, Entry>,
    per_function: usize,
    max: usize,
    /// Functions that may have fewer ready than they want, first come first built (an id may
    /// be queued more than once, or for an entry gone since: checked when popped).
    wanting: VecDeque<FunctionId>,
    /// When the idleness check runs next.
    next_expiry: Nanos,
    /// Ready sandboxes held, and their linear memory in bytes.
    held: usize,
    bytes: usize,
}

impl ReadyPool {
    /// A pool keeping up to `per_function` sandboxes per function and `max` in all (either 0:
    /// none).
    pub(crate) fn new(per_function: usize, max: usize) -> Self {
        Self {
            entries: HashMap::new(),
            per_function,
            max,
            wanting: VecDeque::new(),
            next_expiry: 0,
            held: 0,
            bytes: 0,
        }
    }
    /// Whether the pool keeps any.
    pub(crate) fn enabled(&self) -> bool {
        self.per_function > 0 && self.max > 0
    }

    /// A ready sandbox for a uLL request of `function` at `now`, if one is; either way the
    /// function is remembered so that the worker builds it more when idle.
    pub(crate) fn take(
        &mut self,
        function: &Arc<Function>,
        now: Nanos,
        me: &WorkerShared,
    ) -> Option<Ready> {
        if !self.enabled() {
            return None;
        }
        let per_function = self.per_function;
        let mut first = false;
        let entry = self.entries.entry(function.id).or_insert_with(|| {
            first = true;
            Entry {
                function: Arc::clone(function),
                ready: Vec::new(),
                want: 0,
                used: now,
                slow_start: false,
            }
        });
        let again_soon = !first && now.saturating_sub(entry.used) < SHRINK_AFTER;
        entry.used = now;
        let ready = entry.ready.pop();
        match &ready {
            Some(r) => {
                self.held -= 1;
                self.bytes -= r.memory_bytes();
                self.wanting.push_back(function.id);
                self.publish(me);
            }
            // None ready and called again soon: the arrivals outran the refills, keep one more.
            None if again_soon && entry.want < per_function && !entry.slow_start => {
                entry.want += 1;
                self.wanting.push_back(function.id);
            }
            None => {}
        }
        ready
    }

    /// Builds one sandbox for a function that has fewer ready than it wants, if any and if the
    /// pool has room; first drops what went unused ([`ReadyPool::expire`]). Returns whether it
    /// did work (the worker then looks at its inbox again before building another).
    pub(crate) fn refill_one(&mut self, signals: &Arc<Signals>, me: &WorkerShared) -> bool {
        let now = signals.clock.now();
        if now >= self.next_expiry {
            self.expire(now);
            self.next_expiry = now.saturating_add(EXPIRE_EVERY);
        }
        let mut worked = false;
        while self.held < self.max
            && let Some(id) = self.wanting.pop_front()
        {
            let Some(entry) = self.entries.get_mut(&id).filter(|e| e.ready.len() < e.want) else {
                continue;
            };
            // Counted before it exists, so that `Runtime::live_sandboxes` (the pool's instances
            // less the ready ones) never counts a sandbox being built as running.
            me.ready.fetch_add(1, Ordering::Relaxed);
            match sandbox::prepare(&entry.function, signals) {
                Ok(ready) => {
                    self.held += 1;
                    self.bytes += ready.memory_bytes();
                    entry.ready.push(ready);
                }
                // It cannot be built ahead (a pool slot short, a `start` that fails): stop
                // trying until its requests ask again; they build their own and report why.
                Err(Unprepared::Failed) => entry.want = entry.ready.len(),
                // A `start` that runs long: never again (`Entry::slow_start`).
                Err(Unprepared::Slow) => {
                    entry.want = entry.ready.len();
                    entry.slow_start = true;
                }
            }
            if entry.ready.len() < entry.want {
                self.wanting.push_back(id);
            }
            worked = true;
            break;
        }
        self.publish(me);
        worked
    }

    /// How long a worker with nothing to run may sleep before its ready sandboxes need a look
    /// (the next shrink), or `None` if it holds none: an idle worker wakes at most once per
    /// [`EXPIRE_EVERY`] for them, and never for an empty pool.
    pub(crate) fn next_look(&self, now: Nanos) -> Option<std::time::Duration> {
        let due =
            self.entries.values().filter(|e| !e.ready.is_empty()).map(|e| e.used + SHRINK_AFTER);
        let at = due.min()?.max(self.next_expiry).max(now);
        Some(std::time::Duration::from_nanos(at - now))
    }

    /// Drops the ready sandboxes nobody used for a while (module doc), and those of functions
    /// no longer registered (the pool holds the last reference to them).
    fn expire(&mut self, now: Nanos) {
        let mut dropped = Vec::new();
        self.entries.retain(|_, e| {
            let idle = now.saturating_sub(e.used);
            if idle >= FORGET_AFTER || Arc::strong_count(&e.function) == 1 {
                dropped.append(&mut e.ready);
                return false;
            }
            if idle >= SHRINK_AFTER && e.want > 0 {
                e.want -= 1;
                e.used = now;
                let keep = e.ready.len().min(e.want);
                dropped.extend(e.ready.drain(keep..));
            }
            true
        });
        for r in dropped {
            self.held -= 1;
            self.bytes -= r.memory_bytes();
        }
    }

    /// Publishes the count and linear memory held to `me` (`Runtime::worker_stats`).
    fn publish(&self, me: &WorkerShared) {
        me.ready.store(self.held as u64, Ordering::Relaxed);
        me.ready_bytes.store(self.bytes as u64, Ordering::Relaxed);
    }

    /// Drops every ready sandbox (the worker is stopping).
    pub(crate) fn clear(&mut self, me: &WorkerShared) {
        self.entries.clear();
        self.wanting.clear();
        (self.held, self.bytes) = (0, 0);
        self.publish(me);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::config::{FunctionConfig, RuntimeConfig};
    use crate::registry::Registry;

    const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");
    const MS: Nanos = 1_000_000;

    #[test]
    fn how_many_are_kept_follows_the_misses_and_idleness() {
        let config = RuntimeConfig { max_sandboxes: 8, ..RuntimeConfig::default() };
        let engine = crate::engine::build(&config).unwrap();
        let registry = Registry::new(engine, None, config.max_memory_bytes).unwrap();
        let f = registry.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
        let (signals, me) = (Arc::new(Signals::manual()), WorkerShared::new(0, 0));
        let held = || me.ready.load(Ordering::Relaxed);
        let mut pool = ReadyPool::new(2, 16);
        // Unknown function: nothing to build. Its first request misses and asks for none (one of
        // thousands in rotation would never be called again here); a second within a second
        // asks for one.
        assert!(!pool.refill_one(&signals, &me));
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        assert!(!pool.refill_one(&signals, &me));
        signals.clock.advance(300 * MS);
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        assert!(pool.refill_one(&signals, &me));
        assert!(!pool.refill_one(&signals, &me), "one is all it wants");
        assert_eq!(held(), 1);
        assert!(me.ready_bytes.load(Ordering::Relaxed) >= 65_536, "one page at least");
        // Taken and rebuilt; a burst that finds none asks for one more, up to two.
        assert!(pool.take(&f, signals.clock.now(), &me).is_some());
        assert_eq!(held(), 0);
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        while pool.refill_one(&signals, &me) {}
        assert_eq!(held(), 2);
        assert!(
            pool.take(&f, signals.clock.now(), &me).is_some()
                && pool.take(&f, signals.clock.now(), &me).is_some()
        );
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        while pool.refill_one(&signals, &me) {}
        assert_eq!(held(), 2, "never more than `per_function`");
        // Unused for a second: one fewer. For ten: none, and the function is forgotten.
        signals.clock.advance(1_100 * MS);
        assert!(!pool.refill_one(&signals, &me));
        assert_eq!(held(), 1);
        signals.clock.advance(10_000 * MS);
        assert!(!pool.refill_one(&signals, &me));
        assert_eq!((held(), me.ready_bytes.load(Ordering::Relaxed)), (0, 0));
        assert!(pool.entries.is_empty());
        // Called every two seconds (one of many in rotation): never one built for nothing.
        let mut rare = ReadyPool::new(2, 16);
        for _ in 0..3 {
            assert!(rare.take(&f, signals.clock.now(), &me).is_none());
            assert!(!rare.refill_one(&signals, &me));
            signals.clock.advance(2_000 * MS);
        }
        // The total bound holds across functions; `clear` drops everything.
        let mut small = ReadyPool::new(2, 1);
        assert!(small.take(&f, signals.clock.now(), &me).is_none());
        assert!(small.take(&f, signals.clock.now(), &me).is_none());
        while small.refill_one(&signals, &me) {}
        assert_eq!(held(), 1);
        small.clear(&me);
        assert_eq!(held(), 0);
        // A function no longer registered (the pool holds its last reference) loses its ready
        // sandboxes at the next look, long before they would go unused.
        drop((pool, rare));
        let mut pool = ReadyPool::new(2, 16);
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        assert!(pool.take(&f, signals.clock.now(), &me).is_none());
        while pool.refill_one(&signals, &me) {}
        assert_eq!(held(), 1);
        registry.unregister_with("echo", || ()).unwrap();
        drop(f);
        signals.clock.advance(EXPIRE_EVERY);
        assert!(!pool.refill_one(&signals, &me));
        assert_eq!((held(), pool.entries.len()), (0, 0));
        assert!(pool.next_look(signals.clock.now()).is_none(), "nothing to look at: no wake-up");
        let f = registry.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
        assert!(
            !ReadyPool::new(0, 16).enabled()
                && ReadyPool::new(0, 16).take(&f, signals.clock.now(), &me).is_none()
        );
    }

    /// A module whose Wasm `start` runs long is given up after `sandbox::PREPARE_LIMIT`, and never
    /// built ahead again on this worker however often it is called: an idle worker cannot be
    /// preempted while it builds, so each try would stall everything behind it.
    #[test]
    fn a_function_whose_start_runs_long_is_not_built_ahead_again() {
        const SLOW_START: &str = r#"(module
            (memory (export "memory") 1)
            (func $spin (loop $again (br $again)))
            (start $spin)
            (func (export "_start")))"#;
        let config = RuntimeConfig { max_sandboxes: 8, ..RuntimeConfig::default() };
        let engine = crate::engine::build(&config).unwrap();
        let registry = Registry::new(engine.clone(), None, config.max_memory_bytes).unwrap();
        let f = registry.register(FunctionConfig::new("slow"), SLOW_START.as_bytes()).unwrap();
        let (signals, me) = (Arc::new(Signals::manual()), WorkerShared::new(0, 0));
        // A ticker: the epoch advances, and the clock with it, a millisecond at a time.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = {
            let (signals, stop) = (Arc::clone(&signals), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    signals.clock.advance(MS);
                    engine.increment_epoch();
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            })
        };
        let mut pool = ReadyPool::new(2, 16);
        let now = || signals.clock.now();
        assert!(pool.take(&f, now(), &me).is_none());
        assert!(pool.take(&f, now(), &me).is_none(), "called again soon: it asks for one");
        let start = now();
        assert!(pool.refill_one(&signals, &me), "it tried to build one");
        let took = now() - start;
        assert!((2 * MS..1_000 * MS).contains(&took), "the build ran {took} ns");
        assert_eq!(me.ready.load(Ordering::Relaxed), 0);
        // Called again and again, soon: it asks for none, and nothing is built.
        for _ in 0..3 {
            assert!(pool.take(&f, now(), &me).is_none());
            assert!(!pool.refill_one(&signals, &me), "tried again");
        }
        stop.store(true, Ordering::Relaxed);
        ticker.join().unwrap();
    }
}
