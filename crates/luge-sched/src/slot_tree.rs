//! A fixed segment tree over the slots of CT-EDF's circular timeline
//! ([`CtEdfQueue`](crate::CtEdfQueue)): per slot the work filed there and a lower bound on its
//! deadlines (the quantum's start), so that the queue answers the prefix-sum and margin queries
//! of admission on the wait (SledgeScale §3.3, Alg. 1) and of shedding in `O(log slots)` — ten
//! steps for Edge-RT's 1024 quanta — whatever the number of queued requests.

/// Summary of a run of consecutive slots, in timeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// Σ work filed in the run's slots (saturating).
    pub work: u64,
    /// Min over the run's non-empty slots `s` of `floor(s) − Σ work of the run's slots up to and
    /// including s`: how much earlier than its quantum's start the last request of `s` would
    /// finish if the run's work started at 0. `i64::MAX` when every slot is empty.
    pub margin: i64,
}

impl Span {
    pub const EMPTY: Self = Self { work: 0, margin: i64::MAX };

    /// One slot holding `work` (> 0 or not, it is non-empty) under a quantum starting at
    /// `floor`.
    pub fn slot(work: u64, floor: u64) -> Self {
        let floor = i64::try_from(floor).unwrap_or(i64::MAX);
        Self { work, margin: floor.saturating_sub(i64::try_from(work).unwrap_or(i64::MAX)) }
    }

    /// `self` followed by `next`.
    pub fn then(self, next: Self) -> Self {
        let shift = i64::try_from(self.work).unwrap_or(i64::MAX);
        let later =
            if next.margin == i64::MAX { i64::MAX } else { next.margin.saturating_sub(shift) };
        Self { work: self.work.saturating_add(next.work), margin: self.margin.min(later) }
    }
}

/// A perfect binary tree of [`Span`]s over `leaves` slots (a power of two): node 1 is the root,
/// node `i` has children `2i` and `2i + 1`, slot `s` is node `leaves + s`.
#[derive(Debug, Clone)]
pub(crate) struct SlotTree {
    leaves: usize,
    nodes: Box<[Span]>,
}

impl SlotTree {
    /// A tree of empty slots; `leaves` must be a power of two.
    pub fn new(leaves: usize) -> Self {
        debug_assert!(leaves.is_power_of_two());
        Self { leaves, nodes: vec![Span::EMPTY; 2 * leaves].into_boxed_slice() }
    }

    /// The summary of slot `s`.
    pub fn get(&self, s: usize) -> Span {
        self.nodes[self.leaves + s]
    }

    /// Sets the summary of slot `s`. `O(log leaves)`.
    pub fn set(&mut self, s: usize, span: Span) {
        let mut i = self.leaves + s;
        self.nodes[i] = span;
        while i > 1 {
            i /= 2;
            self.nodes[i] = self.nodes[2 * i].then(self.nodes[2 * i + 1]);
        }
    }

    /// The summary of slots `lo..hi` in order. `O(log leaves)`.
    pub fn span(&self, lo: usize, hi: usize) -> Span {
        let (mut l, mut r) = (lo + self.leaves, hi + self.leaves);
        let (mut left, mut right) = (Span::EMPTY, Span::EMPTY);
        while l < r {
            if l % 2 == 1 {
                left = left.then(self.nodes[l]);
                l += 1;
            }
            if r % 2 == 1 {
                r -= 1;
                right = self.nodes[r].then(right);
            }
            l /= 2;
            r /= 2;
        }
        left.then(right)
    }

    /// The first non-empty slot `s` of `lo..hi` with `floor(s) − (before + Σ work of lo..=s) <
    /// threshold` — with `before` work ahead of the range, a slot whose last request could finish
    /// later than `threshold` before its quantum starts — and the work ahead of it
    /// (`before + Σ work of lo..s`). `O(log leaves)`.
    pub fn first_below(
        &self,
        (lo, hi): (usize, usize),
        before: u64,
        threshold: i64,
    ) -> Option<(usize, u64)> {
        let mut before = before;
        self.descend(1, (0, self.leaves), (lo, hi), &mut before, threshold).map(|s| (s, before))
    }

    fn descend(
        &self,
        node: usize,
        (nlo, nhi): (usize, usize),
        (lo, hi): (usize, usize),
        before: &mut u64,
        threshold: i64,
    ) -> Option<usize> {
        if nhi <= lo || hi <= nlo {
            return None;
        }
        if lo <= nlo && nhi <= hi {
            let span = self.nodes[node];
            let margin = i128::from(span.margin) - i128::from(*before);
            if span.margin == i64::MAX || margin >= i128::from(threshold) {
                *before = before.saturating_add(span.work);
                return None;
            }
            if nhi - nlo == 1 {
                return Some(nlo);
            }
        }
        let mid = (nlo + nhi) / 2;
        self.descend(2 * node, (nlo, mid), (lo, hi), before, threshold)
            .or_else(|| self.descend(2 * node + 1, (mid, nhi), (lo, hi), before, threshold))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive answer for `first_below`: walk the slots.
    fn naive_first_below(
        slots: &[Option<(u64, u64)>],
        (lo, hi): (usize, usize),
        before: u64,
        threshold: i64,
    ) -> Option<(usize, u64)> {
        let mut done = before;
        for (s, slot) in slots.iter().enumerate().take(hi).skip(lo) {
            let Some((work, floor)) = *slot else { continue };
            let ahead = done;
            done += work;
            if (floor as i128) - (done as i128) < threshold as i128 {
                return Some((s, ahead));
            }
        }
        None
    }

    #[test]
    fn span_and_first_below_match_a_walk() {
        let n = 64;
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..200 {
            let mut t = SlotTree::new(n);
            let mut slots = vec![None; n];
            for (s, slot) in slots.iter_mut().enumerate() {
                if next() % 3 == 0 {
                    let (work, floor) = (next() % 1_000, (s as u64) * 500 + next() % 100);
                    *slot = Some((work, floor));
                    t.set(s, Span::slot(work, floor));
                }
            }
            let lo = (next() % n as u64) as usize;
            let hi = lo + (next() % (n - lo + 1) as u64) as usize;
            let mut want = Span::EMPTY;
            for slot in slots.iter().take(hi).skip(lo).flatten() {
                want = want.then(Span::slot(slot.0, slot.1));
            }
            assert_eq!(t.span(lo, hi), want);
            let before = next() % 2_000;
            let threshold = (next() % 40_000) as i64 - 5_000;
            assert_eq!(
                t.first_below((lo, hi), before, threshold),
                naive_first_below(&slots, (lo, hi), before, threshold),
                "lo {lo} hi {hi} before {before} threshold {threshold}"
            );
        }
    }
}
