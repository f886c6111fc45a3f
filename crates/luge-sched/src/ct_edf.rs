//! Constant-time EDF (CT-EDF) over a quantised, circular timeline, after Edge-RT
//! (Edge-RT §IV-C "quantize time into a set of fixed-sized quanta,
//! Δ_window … track a relative timeline of quanta as an array … each quanta index holds a linked
//! list", and §V-D "a 32-bit level-1 index, that index 32, 32 bit level-2 indices (for a total of
//! 1024 tracked quanta)").
//!
//! [`CtEdfQueue`] documents the structure, the costs and exactly which orderings are approximate
//! compared with the exact [`DeadlineQueue`](crate::DeadlineQueue).
//!
//! One file on purpose (above ~600 lines): the two-level bitmap index, the circular timeline and
//! the queue share private invariants that splitting would expose; ~230 lines are unit tests.

use std::collections::HashMap;
use std::fmt;

use crate::queue::EdfQueue;
use crate::request::{Nanos, QueueKey, Request, RequestId};
use crate::slot_tree::{SlotTree, Span};

/// Number of slots of the circular timeline.
const SLOTS: usize = 1024;
/// Leaf words of the bitmap index (`SLOTS / 64`).
const WORDS: usize = SLOTS / 64;
/// Null link in the arena.
const NIL: u32 = u32::MAX;
/// List id of the overdue list (the timeline lists are `0..SLOTS`).
const OVERDUE: usize = SLOTS;

/// Configuration of a [`CtEdfQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtEdfConfig {
    /// Length Δ_window of one quantum in ns (Edge-RT §V-D: 0.5 ms). A value of 0 is treated as 1.
    pub delta_window: Nanos,
}

impl CtEdfConfig {
    /// Edge-RT's quantum: 500 µs.
    pub const DEFAULT_DELTA_WINDOW: Nanos = 500_000;
}

impl Default for CtEdfConfig {
    fn default() -> Self {
        Self { delta_window: Self::DEFAULT_DELTA_WINDOW }
    }
}

/// Head and tail of one FIFO list in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: Self = Self { head: NIL, tail: NIL };
}

/// One arena cell. Free cells are chained through `next`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    req: Request,
    prev: u32,
    next: u32,
    /// Which list holds the entry: a timeline slot `0..SLOTS` or [`OVERDUE`].
    list: u16,
}

/// Two-level bitmap over the timeline slots: bit `s % 64` of `leaves[s / 64]` is set iff slot `s`
/// is non-empty, and bit `w` of `summary` iff `leaves[w] != 0`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Bitmap {
    summary: u64,
    leaves: [u64; WORDS],
}

impl Bitmap {
    fn set(&mut self, slot: usize) {
        let w = slot / 64;
        self.leaves[w] |= 1 << (slot % 64);
        self.summary |= 1 << w;
    }

    fn clear(&mut self, slot: usize) {
        let w = slot / 64;
        self.leaves[w] &= !(1 << (slot % 64));
        if self.leaves[w] == 0 {
            self.summary &= !(1 << w);
        }
    }

    /// The first set slot in circular order starting at `start` (`start`, `start + 1`, …,
    /// `1023`, `0`, …, `start − 1`).
    fn first_from(&self, start: usize) -> Option<usize> {
        let w = start / 64;
        // 1. The rest of the start word.
        let here = self.leaves[w] & (u64::MAX << (start % 64));
        if here != 0 {
            return Some(w * 64 + here.trailing_zeros() as usize);
        }
        // 2. Any later word (no wrap); otherwise 3. wrap around: the first word overall, which is
        // ≤ w, and if it is w its set bits are all below `start` (step 1 found none above).
        let later = self.summary & (!1u64 << w);
        let words = if later != 0 { later } else { self.summary };
        if words == 0 {
            return None;
        }
        let w2 = words.trailing_zeros() as usize;
        Some(w2 * 64 + self.leaves[w2].trailing_zeros() as usize)
    }
}

/// Constant-time EDF queue over a quantised circular timeline (Edge-RT
/// §IV-C, §V-D).
///
/// # Structure
///
/// - Time is cut into quanta of `delta_window` ns (Δ, default 500 µs as in Edge-RT). The queue
///   knows one *current quantum* `C = ⌊now / Δ⌋`, moved forward only by
///   [`CtEdfQueue::advance`].
/// - A circular array of exactly 1024 slots covers the quanta `C ..= C + 1023`; quantum `q` lives
///   in slot `q mod 1024`, so advancing only moves `C` (no shifting).
/// - Each slot is a FIFO intrusive doubly-linked list of entries stored in an arena (a `Vec` with
///   `u32` links and an intrusive free list), so unlinking any entry is O(1).
/// - A two-level bitmap indexes the non-empty slots: 16 × `u64` leaf words and one `u64` summary
///   word (bit `w` set ⇔ leaf `w` ≠ 0). The first non-empty slot at or after `C`, with
///   wrap-around, costs at most three `trailing_zeros` (Edge-RT uses `clz` on 32-bit words; bit
///   `i` here is slot `i`, so the lowest set bit is the earliest slot).
/// - A separate FIFO list (same arena) holds *overdue* entries: those whose deadline quantum is
///   in the past. Edge-RT runs them "at a lower priority than EDF threads … arbitrated using
///   round-robin" (§IV-C): [`pop`](EdfQueue::pop) serves them, oldest first, only when no EDF
///   entry exists. Round-robin arises when the driver re-inserts a preempted overdue request: its
///   deadline is still in the past, so it joins the tail.
/// - `remove` by [`QueueKey`] goes through a `HashMap<RequestId, u32>` from id to arena slot (O(1)
///   expected). The map is only looked up, never iterated, so behaviour stays deterministic.
///
/// # What is approximate (versus the exact [`DeadlineQueue`](crate::DeadlineQueue))
///
/// 1. **Quantised deadlines.** An entry is filed under its *effective quantum*
///    `min(⌊d / Δ⌋, C + 1023)`. Entries of one quantum are served FIFO in *filing* order (arrival,
///    or re-filing, see 3), not by exact deadline and not by the [`QueueKey`] id tie-break. Hence
///    if `b` is served before `a` although `d_a < d_b`, both sat in the same quantum and
///    `d_b − d_a < Δ`: the deadline error is below `delta_window` ("messages inherit a deadline at
///    most Δ_window higher than its normal deadline", §IV-C).
/// 2. **Coarse clock.** The queue only knows `C`. An entry whose deadline lies in the current
///    quantum but before `now` is still an EDF entry; it becomes overdue at the first `advance`
///    into a later quantum. "Missed" therefore means `⌊d / Δ⌋ < C`.
/// 3. **Horizon.** The timeline covers 1024 quanta (512 ms at the default Δ). A deadline beyond it
///    is filed in the *last* quantum of the horizon, `C + 1023`, so it competes as if its deadline
///    were there (it may run before a later arrival whose deadline is earlier than its own but
///    beyond that quantum). When that quantum passes, the entry is *not* declared overdue unless
///    its true deadline quantum has also passed: it is re-filed (at the tail) in
///    `min(⌊d / Δ⌋, C' + 1023)` for the new current quantum `C'`. Each entry is re-filed at most
///    once per 1024 quanta of elapsed time.
/// 4. **Overdue entries lose EDF order.** They are served FIFO in the order in which they became
///    overdue: by an `advance`, in increasing effective quantum and FIFO within a quantum; by an
///    `insert` whose deadline quantum is already past, at insertion.
///
/// `len` and `total_work` are exact. `total_work` is the running Σ [`Request::remaining`] of the
/// queued requests as inserted or last updated ([`set_executed`](CtEdfQueue::set_executed),
/// [`set_expected`](CtEdfQueue::set_expected)), kept in `u128` and reported saturated at
/// `u64::MAX`.
///
/// # Costs
///
/// `insert`, `remove`, `peek`, `pop`: O(1) (one hash-map operation and at most three
/// `trailing_zeros`). `advance`: O(number of passed non-empty quanta + entries they hold), at most
/// 1024 slot visits plus the entries moved, whatever the jump in time.
///
/// Requests must have unique ids while queued ([`RequestId`] is unique within a scheduler):
/// [`insert`](EdfQueue::insert) refuses a request whose id is already queued, even with another
/// deadline, and [`remove`](EdfQueue::remove) needs both the id and the deadline of the key to
/// match.
#[derive(Clone)]
pub struct CtEdfQueue {
    /// Δ_window, ≥ 1.
    delta: Nanos,
    /// Current quantum `C` (absolute quantum number `⌊now / Δ⌋`).
    cur: u64,
    entries: Vec<Entry>,
    /// Head of the free list of `entries` (chained through `next`).
    free: u32,
    /// `SLOTS` timeline lists followed by the overdue list.
    lists: Box<[List]>,
    bitmap: Bitmap,
    /// Per timeline slot, the work filed there and its quantum's start.
    tree: SlotTree,
    index: HashMap<RequestId, u32>,
    overdue_len: usize,
    /// Σ remaining work on the overdue list.
    overdue_work: u128,
    total: u128,
}

impl fmt::Debug for CtEdfQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CtEdfQueue")
            .field("delta_window", &self.delta)
            .field("now_quantum", &self.cur)
            .field("len", &self.index.len())
            .field("overdue_len", &self.overdue_len)
            .field("total_work", &self.total_work())
            .finish_non_exhaustive()
    }
}

impl Default for CtEdfQueue {
    fn default() -> Self {
        Self::new(CtEdfConfig::default())
    }
}

impl CtEdfQueue {
    /// Number of quanta on the circular timeline (Edge-RT §V-D: 1024).
    pub const HORIZON_QUANTA: u64 = SLOTS as u64;

    /// An empty queue whose current quantum is 0 (time 0); call [`advance`](Self::advance) with
    /// the driver's clock before use.
    pub fn new(config: CtEdfConfig) -> Self {
        Self::with_capacity(config, 0)
    }

    /// An empty queue with room for `cap` requests before the arena or the id map allocate.
    pub fn with_capacity(config: CtEdfConfig, cap: usize) -> Self {
        Self {
            delta: config.delta_window.max(1),
            cur: 0,
            entries: Vec::with_capacity(cap),
            free: NIL,
            lists: vec![List::EMPTY; SLOTS + 1].into_boxed_slice(),
            bitmap: Bitmap::default(),
            tree: SlotTree::new(SLOTS),
            index: HashMap::with_capacity(cap),
            overdue_len: 0,
            overdue_work: 0,
            total: 0,
        }
    }

    /// Δ_window in ns (after the `0 → 1` fix-up).
    pub fn delta_window(&self) -> Nanos {
        self.delta
    }

    /// The current quantum `C = ⌊now / Δ⌋` of the last [`advance`](Self::advance).
    pub fn now_quantum(&self) -> u64 {
        self.cur
    }

    /// Length of the timeline in ns: `1024 × Δ` (saturating). Deadlines at or beyond
    /// `(C + 1024) × Δ` are clamped into the last quantum (type docs, approximation 3).
    pub fn horizon(&self) -> Nanos {
        self.delta.saturating_mul(Self::HORIZON_QUANTA)
    }

    /// Number of queued requests on the low-priority overdue list.
    pub fn overdue_len(&self) -> usize {
        self.overdue_len
    }

    /// Number of queued requests on the EDF timeline (`len − overdue_len`).
    pub fn edf_len(&self) -> usize {
        self.index.len() - self.overdue_len
    }

    /// The queued request with this key.
    pub fn get(&self, key: QueueKey) -> Option<&Request> {
        self.find(key).map(|i| &self.entries[i as usize].req)
    }

    /// `Some(true)` if the request `key` is on the overdue list, `Some(false)` if it is on the EDF
    /// timeline, `None` if it is not queued.
    pub fn is_overdue(&self, key: QueueKey) -> Option<bool> {
        self.find(key).map(|i| usize::from(self.entries[i as usize].list) == OVERDUE)
    }

    /// The effective quantum under which the request `key` is filed (`min(⌊d / Δ⌋, C + 1023)` at
    /// filing time); `None` if it is not queued or is overdue.
    pub fn quantum_of(&self, key: QueueKey) -> Option<u64> {
        let list = usize::from(self.entries[self.find(key)? as usize].list);
        if list == OVERDUE {
            return None;
        }
        let dist = (list + SLOTS - self.slot_of(self.cur)) % SLOTS;
        Some(self.cur + dist as u64)
    }

    /// Records that the request `key` has executed `executed` in total, updating its remaining
    /// work and `total_work`. Its position is unchanged. Returns `false` if the key is not queued.
    pub fn set_executed(&mut self, key: QueueKey, executed: Nanos) -> bool {
        self.update(key, |r| r.executed = executed)
    }

    /// Replaces the expected execution of the request `key` (a new estimate), updating
    /// `total_work`. Returns `false` if the key is not queued.
    pub fn set_expected(&mut self, key: QueueKey, expected: Nanos) -> bool {
        self.update(key, |r| r.expected = expected)
    }

    /// Moves the current quantum forward to `⌊now / Δ⌋`. Every entry filed under a quantum that is
    /// now in the past is taken off the timeline, in increasing quantum and FIFO order within a
    /// quantum, and either appended to the overdue list (its true deadline quantum is past) or,
    /// if it had been clamped at the horizon, re-filed at the tail of
    /// `min(⌊d / Δ⌋, C + 1023)` (type docs, approximation 3).
    ///
    /// Time never moves back: a `now` in or before the current quantum changes nothing. Returns
    /// the number of entries that became overdue.
    pub fn advance(&mut self, now: Nanos) -> usize {
        let new = now / self.delta;
        if new <= self.cur {
            return 0;
        }
        let span = new - self.cur;
        let cur_slot = self.slot_of(self.cur);
        // Phase 1: detach the lists of all passed quanta, in quantum order, into one chain. (The
        // re-filing targets of phase 2 may share slots with passed quanta when the jump is
        // large, so nothing is re-filed before every passed slot is empty.)
        let mut pending = List::EMPTY;
        while let Some(slot) = self.bitmap.first_from(cur_slot) {
            let dist = (slot + SLOTS - cur_slot) % SLOTS;
            if dist as u64 >= span {
                break;
            }
            let taken = std::mem::replace(&mut self.lists[slot], List::EMPTY);
            self.bitmap.clear(slot);
            self.tree.set(slot, Span::EMPTY);
            if pending.tail == NIL {
                pending = taken;
            } else {
                self.entries[pending.tail as usize].next = taken.head;
                self.entries[taken.head as usize].prev = pending.tail;
                pending.tail = taken.tail;
            }
        }
        self.cur = new;
        // Phase 2: dispatch in chain order.
        let mut moved = 0;
        let mut i = pending.head;
        while i != NIL {
            let next = self.entries[i as usize].next;
            let true_q = self.entries[i as usize].req.absolute_deadline / self.delta;
            if true_q < new {
                self.push_back(OVERDUE, i);
                self.overdue_len += 1;
                moved += 1;
            } else {
                let slot = self.slot_for(true_q);
                self.push_back(slot, i);
            }
            i = next;
        }
        moved
    }

    /// Queued requests in the order [`pop`](EdfQueue::pop) would return them: the timeline from
    /// the current quantum (FIFO within each quantum), then the overdue list. O(1024 + n).
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        let c = self.slot_of(self.cur);
        (0..SLOTS)
            .map(move |k| (c + k) % SLOTS)
            .filter(move |&s| self.lists[s].head != NIL)
            .chain(std::iter::once(OVERDUE))
            .flat_map(move |l| {
                let mut i = self.lists[l].head;
                std::iter::from_fn(move || {
                    let e = self.entries.get(i as usize)?;
                    i = e.next;
                    Some(&e.req)
                })
            })
    }

    /// Σ remaining work of the queued requests a newcomer with this deadline would run behind:
    /// every request filed in its quantum or an earlier one (it joins its quantum's tail), or,
    /// when its deadline quantum has passed (it joins the overdue list's tail), every queued
    /// request. Exact for this queue's order; `O(log 1024)` whatever the queue's length.
    pub fn work_before(&self, deadline: Nanos) -> Nanos {
        let q = deadline / self.delta;
        if q < self.cur {
            return self.total_work();
        }
        self.span_from(0, self.position(q) + 1).work
    }

    /// Whether a newcomer `req` placed in this queue, its work starting at `start` and counting
    /// `own`, would finish by its deadline in this queue's order (the counterpart of
    /// [`DeadlineQueue::fits`](crate::DeadlineQueue::fits)). `O(log 1024)`.
    pub fn fits(&self, req: &Request, own: Nanos, start: Nanos) -> bool {
        start.saturating_add(self.work_before(req.absolute_deadline)).saturating_add(own)
            <= req.absolute_deadline
    }

    /// [`fits`](Self::fits), and every request filed in a later quantum, started at
    /// `rest_start` and pushed back by `own`, would still finish by its quantum's *start* (the
    /// counterpart of [`DeadlineQueue::admits`](crate::DeadlineQueue::admits)). Conservative:
    /// a request's deadline is taken as its quantum's start and its finish as its quantum's last
    /// one, so a newcomer may be refused that an exact test would admit, by less than Δ plus
    /// the work of one quantum. Overdue requests are not protected (they missed already).
    /// `O(log 1024)`.
    pub fn admits(&self, req: &Request, own: Nanos, start: Nanos, rest_start: Nanos) -> bool {
        if !self.fits(req, own, start) {
            return false;
        }
        let q = req.absolute_deadline / self.delta;
        if q < self.cur {
            return true;
        }
        let pos = self.position(q) + 1;
        let ahead = self.span_from(0, pos).work;
        let later = self.span_from(pos, SLOTS);
        later.margin == i64::MAX
            || i128::from(later.margin) - i128::from(ahead) - i128::from(own)
                >= i128::from(rest_start)
    }

    /// The first queued request, in this queue's order, that would miss its deadline if the
    /// queue's work started at `start` (≥ the time of the last [`advance`](Self::advance)) and
    /// every request ran as expected: a request to shed (the counterpart of
    /// [`DeadlineQueue::first_doomed`](crate::DeadlineQueue::first_doomed)). Exact: the slot
    /// summaries only say which quanta may hold one, `O(log 1024)` each, and the requests of
    /// such a quantum are then checked one by one (an overdue request, past its deadline, is
    /// doomed at once).
    pub fn first_doomed(&self, start: Nanos) -> Option<QueueKey> {
        let threshold = i64::try_from(start).unwrap_or(i64::MAX);
        let mut from = 0;
        while let Some((slot, ahead)) = self.first_below_from(from, threshold) {
            if let Some(key) = self.first_late_in(slot, start.saturating_add(ahead)) {
                return Some(key);
            }
            from = (slot + SLOTS - self.slot_of(self.cur)) % SLOTS + 1;
        }
        // Overdue requests, last in this queue's order: past their deadline, so the first is.
        self.first_late_in(OVERDUE, start.saturating_add(self.span_from(0, SLOTS).work))
    }

    /// The first request of `list` that finishes after its deadline when the list's work
    /// starts at `start`.
    fn first_late_in(&self, list: usize, start: Nanos) -> Option<QueueKey> {
        let mut end = start;
        let mut i = self.lists[list].head;
        while i != NIL {
            let e = &self.entries[i as usize];
            end = end.saturating_add(e.req.remaining());
            if end > e.req.absolute_deadline {
                return Some(e.req.key());
            }
            i = e.next;
        }
        None
    }

    /// Position of quantum `q ≥ C` on the timeline, counted from the current quantum, with
    /// deadlines beyond the horizon in its last quantum.
    fn position(&self, q: u64) -> usize {
        (q - self.cur).min(Self::HORIZON_QUANTA - 1) as usize
    }

    /// The summary of timeline positions `lo..hi` (from the current quantum), in order.
    fn span_from(&self, lo: usize, hi: usize) -> Span {
        let c = self.slot_of(self.cur);
        let (a, b) = (c + lo, c + hi);
        if b <= SLOTS {
            self.tree.span(a, b)
        } else if a >= SLOTS {
            self.tree.span(a - SLOTS, b - SLOTS)
        } else {
            self.tree.span(a, SLOTS).then(self.tree.span(0, b - SLOTS))
        }
    }

    /// [`SlotTree::first_below`] over timeline positions `from..`, with the work of the
    /// positions before `from` ahead.
    fn first_below_from(&self, from: usize, threshold: i64) -> Option<(usize, Nanos)> {
        if from >= SLOTS {
            return None;
        }
        let c = self.slot_of(self.cur);
        let ahead = self.span_from(0, from).work;
        let a = (c + from) % SLOTS;
        if a >= c {
            // `a..SLOTS`, then the wrapped part `0..c`.
            let tail = self.tree.span(a, SLOTS).work;
            self.tree
                .first_below((a, SLOTS), ahead, threshold)
                .or_else(|| self.tree.first_below((0, c), ahead.saturating_add(tail), threshold))
        } else {
            self.tree.first_below((a, c), ahead, threshold)
        }
    }

    fn slot_of(&self, quantum: u64) -> usize {
        (quantum % Self::HORIZON_QUANTA) as usize
    }

    /// The timeline slot of a request whose true deadline quantum is `true_q ≥ C`.
    fn slot_for(&self, true_q: u64) -> usize {
        self.slot_of(true_q.min(self.cur.saturating_add(Self::HORIZON_QUANTA - 1)))
    }

    fn find(&self, key: QueueKey) -> Option<u32> {
        let &i = self.index.get(&key.id)?;
        (self.entries[i as usize].req.absolute_deadline == key.deadline).then_some(i)
    }

    fn update(&mut self, key: QueueKey, f: impl FnOnce(&mut Request)) -> bool {
        let Some(i) = self.find(key) else { return false };
        let e = &mut self.entries[i as usize];
        let old = e.req.remaining();
        f(&mut e.req);
        let (new, list) = (e.req.remaining(), usize::from(e.list));
        self.total = self.total - u128::from(old) + u128::from(new);
        self.work_changed(list, new, old);
        true
    }

    /// The work filed in `list` gained `add` and lost `sub`: the overdue sum or the slot's
    /// summary follows.
    fn work_changed(&mut self, list: usize, add: Nanos, sub: Nanos) {
        if list == OVERDUE {
            self.overdue_work = self.overdue_work + u128::from(add) - u128::from(sub);
            return;
        }
        if self.lists[list].head == NIL {
            self.tree.set(list, Span::EMPTY);
            return;
        }
        let work = self.tree.get(list).work.saturating_add(add).saturating_sub(sub);
        let dist = (list + SLOTS - self.slot_of(self.cur)) % SLOTS;
        let floor = (self.cur + dist as u64).saturating_mul(self.delta);
        self.tree.set(list, Span::slot(work, floor));
    }

    fn push_back(&mut self, list: usize, i: u32) {
        let tail = self.lists[list].tail;
        let work = self.entries[i as usize].req.remaining();
        let e = &mut self.entries[i as usize];
        e.prev = tail;
        e.next = NIL;
        e.list = list as u16;
        if tail == NIL {
            self.lists[list].head = i;
            if list != OVERDUE {
                self.bitmap.set(list);
            }
        } else {
            self.entries[tail as usize].next = i;
        }
        self.lists[list].tail = i;
        self.work_changed(list, work, 0);
    }

    fn unlink(&mut self, i: u32) {
        let Entry { req, prev, next, list } = self.entries[i as usize];
        let list = usize::from(list);
        if prev == NIL {
            self.lists[list].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        if list == OVERDUE {
            self.overdue_len -= 1;
        } else if self.lists[list].head == NIL {
            self.bitmap.clear(list);
        }
        self.work_changed(list, 0, req.remaining());
    }

    /// Unlinks, frees and returns entry `i`.
    fn take(&mut self, i: u32) -> Request {
        self.unlink(i);
        let e = &mut self.entries[i as usize];
        e.next = self.free;
        self.free = i;
        let req = e.req;
        self.index.remove(&req.id);
        self.total -= u128::from(req.remaining());
        req
    }

    /// Arena index of the most urgent entry, or `NIL`.
    fn first(&self) -> u32 {
        match self.bitmap.first_from(self.slot_of(self.cur)) {
            Some(slot) => self.lists[slot].head,
            None => self.lists[OVERDUE].head,
        }
    }
}

impl EdfQueue for CtEdfQueue {
    /// Files `req` at the tail of its effective quantum, or of the overdue list if its deadline
    /// quantum is already past. Returns `false` if a request with the same *id* is queued (or,
    /// in theory, if the arena already holds `u32::MAX` entries).
    fn insert(&mut self, req: Request) -> bool {
        if self.index.contains_key(&req.id) {
            return false;
        }
        let entry = Entry { req, prev: NIL, next: NIL, list: 0 };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.entries[i as usize].next;
            self.entries[i as usize] = entry;
            i
        } else {
            let Ok(i) = u32::try_from(self.entries.len()) else { return false };
            if i == NIL {
                return false;
            }
            self.entries.push(entry);
            i
        };
        let true_q = req.absolute_deadline / self.delta;
        if true_q < self.cur {
            self.push_back(OVERDUE, i);
            self.overdue_len += 1;
        } else {
            let slot = self.slot_for(true_q);
            self.push_back(slot, i);
        }
        self.index.insert(req.id, i);
        self.total += u128::from(req.remaining());
        true
    }

    fn remove(&mut self, key: QueueKey) -> Option<Request> {
        let i = self.find(key)?;
        Some(self.take(i))
    }

    /// The head of the first non-empty quantum at or after the current one (circularly), else the
    /// head of the overdue list.
    fn peek(&self) -> Option<&Request> {
        // `NIL` (u32::MAX) is never a valid arena index, so `get` maps it to `None`.
        self.entries.get(self.first() as usize).map(|e| &e.req)
    }

    fn pop(&mut self) -> Option<Request> {
        let i = self.first();
        (i != NIL).then(|| self.take(i))
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn total_work(&self) -> Nanos {
        u64::try_from(self.total).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::request::{FunctionId, MIN_REMAINING};

    const D: Nanos = 1_000;

    fn q() -> CtEdfQueue {
        CtEdfQueue::new(CtEdfConfig { delta_window: D })
    }

    fn req(id: u64, deadline: Nanos, expected: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, deadline, expected)
    }

    fn ids(q: &CtEdfQueue) -> Vec<u64> {
        q.iter().map(|r| r.id.0).collect()
    }

    fn drain(q: &mut CtEdfQueue) -> Vec<u64> {
        std::iter::from_fn(|| q.pop()).map(|r| r.id.0).collect()
    }

    #[test]
    fn bitmap_finds_first_slot_circularly_for_every_start() {
        for occupied in 0..SLOTS {
            let mut b = Bitmap::default();
            b.set(occupied);
            for start in 0..SLOTS {
                assert_eq!(b.first_from(start), Some(occupied));
            }
            // A second bit: whichever is circularly nearer to `start` wins.
            let other = (occupied * 7 + 13) % SLOTS;
            b.set(other);
            for start in 0..SLOTS {
                let d = |s: usize| (s + SLOTS - start) % SLOTS;
                let want = if d(occupied) <= d(other) { occupied } else { other };
                assert_eq!(b.first_from(start), Some(want), "start {start}");
            }
            b.clear(occupied);
            b.clear(other);
            assert_eq!(b, Bitmap::default());
            assert_eq!(b.first_from(occupied), None);
        }
    }

    #[test]
    fn fifo_within_quantum_edf_across_quanta() {
        let mut q = q();
        // Same quantum [5000, 6000): arrival order wins over exact deadline and id.
        assert!(q.insert(req(3, 5_900, 10_000)));
        assert!(q.insert(req(1, 5_100, 20_000)));
        assert!(q.insert(req(2, 4_999, 30_000))); // earlier quantum
        assert!(q.insert(req(4, 6_000, 40_000))); // later quantum
        assert_eq!(q.len(), 4);
        assert_eq!(q.total_work(), 100_000);
        assert_eq!(q.peek().map(|r| r.id.0), Some(2));
        assert_eq!(ids(&q), vec![2, 3, 1, 4]);
        assert_eq!(q.quantum_of(req(3, 5_900, 0).key()), Some(5));
        assert_eq!(drain(&mut q), vec![2, 3, 1, 4]);
        assert_eq!(q.total_work(), 0);
        assert!(q.is_empty());
    }

    #[test]
    fn insert_refuses_queued_id_and_remove_needs_matching_key() {
        let mut q = q();
        let r = req(1, 5_000, 7_000);
        assert!(q.insert(r));
        assert!(!q.insert(r));
        assert!(!q.insert(req(1, 9_000, 1)));
        assert_eq!(q.remove(req(1, 9_000, 0).key()), None);
        assert_eq!(q.remove(req(2, 5_000, 0).key()), None);
        assert_eq!(q.remove(r.key()), Some(r));
        assert_eq!(q.remove(r.key()), None);
        assert!(q.is_empty() && q.total_work() == 0);
        // The freed arena cell is reused.
        assert!(q.insert(req(5, 1_000, 1)));
        assert_eq!(q.entries.len(), 1);
    }

    #[test]
    fn advance_moves_missed_quanta_to_overdue_fifo() {
        let mut q = q();
        q.insert(req(1, 2_500, 1)); // quantum 2
        q.insert(req(2, 1_500, 1)); // quantum 1
        q.insert(req(3, 2_100, 1)); // quantum 2
        q.insert(req(4, 3_000, 1)); // quantum 3
        assert_eq!(q.advance(2_999), 1); // now quantum 2: quanta 0 and 1 are past
        assert_eq!(q.now_quantum(), 2);
        assert_eq!(q.overdue_len(), 1);
        assert_eq!(q.is_overdue(req(2, 1_500, 0).key()), Some(true));
        assert_eq!(q.is_overdue(req(1, 2_500, 0).key()), Some(false));
        assert_eq!(q.advance(3_000), 2); // quanta 2 passes: 1 then 3 join the tail
        assert_eq!(q.overdue_len(), 3);
        assert_eq!(q.edf_len(), 1);
        // EDF entries first, even though the overdue ones are "more urgent".
        assert_eq!(drain(&mut q), vec![4, 2, 1, 3]);
    }

    #[test]
    fn current_quantum_stays_edf_and_past_deadline_insert_goes_overdue() {
        let mut q = q();
        q.advance(10_700);
        assert!(q.insert(req(1, 10_100, 1))); // before now but in the current quantum: EDF
        assert!(q.insert(req(2, 9_999, 1))); // quantum 9 < 10: overdue at once
        assert!(q.insert(req(3, 50_000, 1)));
        assert_eq!(q.overdue_len(), 1);
        assert_eq!(q.advance(5_000), 0); // time never moves back
        assert_eq!(q.now_quantum(), 10);
        assert_eq!(drain(&mut q), vec![1, 3, 2]);
    }

    #[test]
    fn wrap_around_search_starts_at_current_quantum() {
        let mut q = q();
        q.advance(1_000 * D); // C = 1000, slot 1000
        q.insert(req(1, 1_030 * D, 1)); // quantum 1030 -> slot 6 (wrapped)
        q.insert(req(2, 1_010 * D, 1)); // quantum 1010 -> slot 1010
        q.insert(req(3, 1_000 * D, 1)); // quantum 1000 -> slot 1000
        assert_eq!(ids(&q), vec![3, 2, 1]);
        assert_eq!(q.quantum_of(req(1, 1_030 * D, 0).key()), Some(1030));
        assert_eq!(drain(&mut q), vec![3, 2, 1]);
    }

    #[test]
    fn beyond_horizon_clamps_then_refiles_instead_of_going_overdue() {
        let mut q = q();
        let far = req(1, 5_000 * D + 10, 1); // quantum 5000, far beyond C + 1023
        q.insert(far);
        assert_eq!(q.quantum_of(far.key()), Some(1023));
        q.insert(req(2, 1_023 * D, 1)); // same effective quantum, later arrival
        q.insert(req(3, 1_100 * D, 1)); // also clamped into 1023 at C = 0
        assert_eq!(ids(&q), vec![1, 2, 3]);
        // Quantum 1023 passes: 2 is overdue, 1 and 3 are re-filed.
        assert_eq!(q.advance(1_024 * D), 1);
        assert_eq!(q.quantum_of(req(3, 1_100 * D, 0).key()), Some(1100));
        assert_eq!(q.quantum_of(far.key()), Some(1024 + 1023));
        assert_eq!(ids(&q), vec![3, 1, 2]);
        // A jump far past everything: 3 and 1 become overdue in quantum order.
        assert_eq!(q.advance(100_000 * D), 2);
        assert_eq!(drain(&mut q), vec![2, 3, 1]);
    }

    #[test]
    fn large_jump_refiles_into_slots_that_also_passed() {
        // A is clamped into quantum 1023 at C = 0; B sits in quantum 1026 (slot 2). Advancing to
        // C = 1030 passes both; A's re-filing target 2050 is also slot 2, so A must not be
        // re-filed before slot 2 has been emptied (B must go overdue, A must stay EDF).
        let mut q = q();
        let a = req(1, 2_050 * D, 1);
        let b = req(2, 1_026 * D, 1);
        q.insert(a);
        q.advance(1_000 * D);
        q.insert(b);
        assert_eq!(q.quantum_of(a.key()), Some(1023));
        assert_eq!(q.quantum_of(b.key()), Some(1026));
        assert_eq!(q.advance(1_030 * D), 1);
        assert_eq!(q.quantum_of(a.key()), Some(2050));
        assert_eq!(q.is_overdue(b.key()), Some(true));
        assert_eq!(ids(&q), vec![1, 2]);
    }

    #[test]
    fn remove_from_middle_of_lists_and_overdue() {
        let mut q = q();
        for id in 0..6 {
            q.insert(req(id, 2_000 + id, 1_000 * (id + 1)));
        }
        q.insert(req(10, 500, 5)); // overdue after advance
        q.insert(req(11, 600, 5));
        q.insert(req(12, 700, 5));
        q.advance(1_000);
        assert_eq!(q.remove(req(11, 600, 0).key()).map(|r| r.id.0), Some(11));
        assert_eq!(q.remove(req(3, 2_003, 0).key()).map(|r| r.id.0), Some(3));
        assert_eq!(q.remove(req(0, 2_000, 0).key()).map(|r| r.id.0), Some(0));
        assert_eq!(q.remove(req(5, 2_005, 0).key()).map(|r| r.id.0), Some(5));
        assert_eq!(q.overdue_len(), 2);
        assert_eq!(q.total_work(), 2_000 + 3_000 + 5_000 + 2 * MIN_REMAINING);
        assert_eq!(drain(&mut q), vec![1, 2, 4, 10, 12]);
    }

    #[test]
    fn set_executed_and_expected_update_total_work() {
        let mut q = q();
        let r = req(1, 1_000, 10_000);
        q.insert(r);
        q.insert(req(2, 1_000, 5_000));
        assert!(q.set_executed(r.key(), 4_000));
        assert_eq!(q.total_work(), 11_000);
        assert!(q.set_executed(r.key(), 50_000));
        assert_eq!(q.total_work(), MIN_REMAINING + 5_000);
        assert!(q.set_expected(r.key(), 60_000));
        assert_eq!(q.total_work(), 15_000);
        assert_eq!(q.get(r.key()).map(|r| r.executed), Some(50_000));
        assert!(!q.set_executed(req(9, 1, 1).key(), 1));
        assert_eq!(q.pop().map(|r| r.remaining()), Some(10_000));
        assert_eq!(q.total_work(), 5_000);
    }

    #[test]
    fn total_work_is_exact_beyond_u64_and_saturates_in_report() {
        let mut q = q();
        q.insert(req(1, 1, u64::MAX));
        q.insert(req(2, 1, u64::MAX));
        assert_eq!(q.total_work(), u64::MAX);
        q.pop();
        assert_eq!(q.total_work(), u64::MAX);
        q.pop();
        assert_eq!(q.total_work(), 0);
    }

    #[test]
    fn zero_delta_window_is_one_and_extreme_times_do_not_overflow() {
        let mut q = CtEdfQueue::new(CtEdfConfig { delta_window: 0 });
        assert_eq!(q.delta_window(), 1);
        q.advance(u64::MAX - 10);
        q.insert(req(1, u64::MAX, 1));
        q.insert(req(2, u64::MAX - 10, 1));
        q.insert(req(3, u64::MAX - 11, 1));
        assert_eq!(q.overdue_len(), 1);
        assert_eq!(ids(&q), vec![2, 1, 3]);
        q.advance(u64::MAX);
        assert_eq!(drain(&mut q), vec![1, 3, 2]);
        let d = CtEdfQueue::new(CtEdfConfig { delta_window: u64::MAX });
        assert_eq!(d.horizon(), u64::MAX);
        assert_eq!(CtEdfQueue::default().horizon(), 512_000_000);
    }
}
