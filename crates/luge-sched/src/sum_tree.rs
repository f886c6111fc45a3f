//! An ordered map whose nodes carry the sum of a per-entry weight over their subtree.
//!
//! This is the data structure behind SledgeScale's worker queue (SledgeScale §3.3):
//! "a binary search tree where the absolute deadline serves as the key … we also maintain a value
//! in each node that stores the sum of remaining execution times". It is a treap (randomised
//! balanced BST, Seidel & Aragon 1996) stored in an arena of `u32`-indexed nodes, so every
//! operation is O(log n) expected and no operation allocates once the arena has grown. Priorities
//! come from a fixed-seed xorshift generator: the structure is deterministic, as the scheduling
//! core must be.
//!
//! Sums saturate at `u64::MAX`; since weights are non-negative, a saturated sum is exactly
//! `min(true sum, u64::MAX)` whatever the tree's shape.
//!
//! Each node also carries its subtree's least *margin*: over the entries `j` of the subtree in key
//! order, `due(j) − (Σ weights of the subtree's entries up to and including j)`. For a deadline
//! queue whose weights are remaining work, an entry's margin is how late the queue may start and
//! still finish that entry by its deadline, so `min margin < start` says "someone in here is
//! doomed" in O(1), and the queries [`SumTree::min_margin_after`] and [`SumTree::first_margin_below`]
//! answer "whom would a newcomer doom" and "who is doomed" in O(log n). This is what admission on
//! the wait and shedding need (`docs/scheduling.md`, "Admission and shedding"). Margins are `i64`
//! and saturate; a key whose due time is above `i64::MAX` ns (≈ 292 years) counts as never due.

const NIL: u32 = u32::MAX;

/// A key with a due time: the instant by which the entry's weight of work should be done.
/// [`SumTree`] keeps per-subtree margins over it (see the module docs).
pub trait Due: Ord + Copy {
    /// The due time, in the same unit as the weights.
    fn due(&self) -> u64;
}

macro_rules! due_is_value {
    ($($t:ty),*) => {$(
        impl Due for $t {
            fn due(&self) -> u64 {
                u64::from(*self)
            }
        }
    )*};
}
due_is_value!(u8, u16, u32, u64);

/// `a − b` on margins, saturating.
fn sub_margin(a: i64, b: u64) -> i64 {
    let b = i64::try_from(b).unwrap_or(i64::MAX);
    a.saturating_sub(b)
}

/// The hot part of an entry: everything a descent touches. Values live in a parallel array so
/// that a node of a deadline queue is 48 bytes (one cache line) instead of ~136.
#[derive(Debug, Clone)]
struct Node<K> {
    key: K,
    weight: u64,
    sum: u64,
    /// Least margin over the subtree (module docs); `i64::MAX` for no entry.
    margin: i64,
    prio: u32,
    left: u32,
    right: u32,
}

/// Ordered map from `K` to `V` with a `u64` weight per entry and O(log n) prefix sums of weights.
#[derive(Debug, Clone)]
pub struct SumTree<K, V> {
    nodes: Vec<Node<K>>,
    values: Vec<Option<V>>,
    free: Vec<u32>,
    root: u32,
    len: usize,
    rng: u64,
}

impl<K: Due, V> Default for SumTree<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Due, V> SumTree<K, V> {
    /// An empty tree.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty tree with room for `cap` entries before the arena grows.
    pub fn with_capacity(cap: usize) -> Self {
        Self {
            nodes: Vec::with_capacity(cap),
            values: Vec::with_capacity(cap),
            free: Vec::new(),
            root: NIL,
            len: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sum of all weights.
    pub fn total(&self) -> u64 {
        self.sum(self.root)
    }

    fn sum(&self, t: u32) -> u64 {
        if t == NIL { 0 } else { self.nodes[t as usize].sum }
    }

    fn margin(&self, t: u32) -> i64 {
        if t == NIL { i64::MAX } else { self.nodes[t as usize].margin }
    }

    fn update(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let upto = self.sum(n.left).saturating_add(n.weight);
        let s = upto.saturating_add(self.sum(n.right));
        let due = i64::try_from(n.key.due()).unwrap_or(i64::MAX);
        let m = self
            .margin(n.left)
            .min(sub_margin(due, upto))
            .min(sub_margin(self.margin(n.right), upto));
        let n = &mut self.nodes[t as usize];
        n.sum = s;
        n.margin = m;
    }

    fn next_prio(&mut self) -> u32 {
        // xorshift64* (Vigna 2016): fast, fixed seed, good enough for treap priorities.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    /// Inserts `key` with `weight` and `value`. Returns `false` (and changes nothing) if the key is
    /// already present.
    pub fn insert(&mut self, key: K, weight: u64, value: V) -> bool {
        if self.find(&key).is_some() {
            return false;
        }
        let prio = self.next_prio();
        let due = i64::try_from(key.due()).unwrap_or(i64::MAX);
        let margin = sub_margin(due, weight);
        let node = Node { key, weight, sum: weight, margin, prio, left: NIL, right: NIL };
        let n = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                self.values[i as usize] = Some(value);
                i
            }
            None => {
                self.nodes.push(node);
                self.values.push(Some(value));
                (self.nodes.len() - 1) as u32
            }
        };
        self.root = self.insert_at(self.root, n);
        self.len += 1;
        true
    }

    fn insert_at(&mut self, t: u32, n: u32) -> u32 {
        if t == NIL {
            return n;
        }
        if self.nodes[n as usize].prio > self.nodes[t as usize].prio {
            let key = self.nodes[n as usize].key;
            let (l, r) = self.split(t, &key);
            let node = &mut self.nodes[n as usize];
            node.left = l;
            node.right = r;
            self.update(n);
            return n;
        }
        if self.nodes[n as usize].key < self.nodes[t as usize].key {
            let l = self.insert_at(self.nodes[t as usize].left, n);
            self.nodes[t as usize].left = l;
        } else {
            let r = self.insert_at(self.nodes[t as usize].right, n);
            self.nodes[t as usize].right = r;
        }
        self.update(t);
        t
    }

    /// Splits `t` into (keys < key, keys >= key).
    fn split(&mut self, t: u32, key: &K) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.nodes[t as usize].key < *key {
            let (l, r) = self.split(self.nodes[t as usize].right, key);
            self.nodes[t as usize].right = l;
            self.update(t);
            (t, r)
        } else {
            let (l, r) = self.split(self.nodes[t as usize].left, key);
            self.nodes[t as usize].left = r;
            self.update(t);
            (l, t)
        }
    }

    /// Merges two treaps where every key of `a` is below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.update(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.update(b);
            b
        }
    }

    fn find(&self, key: &K) -> Option<u32> {
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            match key.cmp(&n.key) {
                std::cmp::Ordering::Less => t = n.left,
                std::cmp::Ordering::Greater => t = n.right,
                std::cmp::Ordering::Equal => return Some(t),
            }
        }
        None
    }

    /// The value and weight stored under `key`.
    pub fn get(&self, key: &K) -> Option<(&V, u64)> {
        let t = self.find(key)? as usize;
        Some((self.values[t].as_ref()?, self.nodes[t].weight))
    }

    /// Mutable access to the value under `key` (the key and weight cannot change through it).
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let t = self.find(key)? as usize;
        self.values[t].as_mut()
    }

    /// Removes `key`, returning its value and weight.
    pub fn remove(&mut self, key: &K) -> Option<(V, u64)> {
        let (root, found) = self.remove_at(self.root, key);
        self.root = root;
        self.release(found?)
    }

    fn remove_at(&mut self, t: u32, key: &K) -> (u32, Option<u32>) {
        if t == NIL {
            return (NIL, None);
        }
        match key.cmp(&self.nodes[t as usize].key) {
            std::cmp::Ordering::Equal => {
                let n = &self.nodes[t as usize];
                (self.merge(n.left, n.right), Some(t))
            }
            std::cmp::Ordering::Less => {
                let (l, f) = self.remove_at(self.nodes[t as usize].left, key);
                if f.is_some() {
                    self.nodes[t as usize].left = l;
                    self.update(t);
                }
                (t, f)
            }
            std::cmp::Ordering::Greater => {
                let (r, f) = self.remove_at(self.nodes[t as usize].right, key);
                if f.is_some() {
                    self.nodes[t as usize].right = r;
                    self.update(t);
                }
                (t, f)
            }
        }
    }

    fn release(&mut self, t: u32) -> Option<(V, u64)> {
        self.free.push(t);
        self.len -= 1;
        Some((self.values[t as usize].take()?, self.nodes[t as usize].weight))
    }

    /// Changes the weight of `key`; returns `false` if the key is absent.
    pub fn set_weight(&mut self, key: &K, weight: u64) -> bool {
        self.update_entry(key, |_| weight)
    }

    /// Applies `f` to the value under `key` and makes its result the entry's new weight, in one
    /// descent; returns `false` if the key is absent.
    pub fn update_entry(&mut self, key: &K, f: impl FnOnce(&mut V) -> u64) -> bool {
        // The nodes passed on the way down, to refresh their sums on the way back. A treap of
        // u32-indexed nodes is far shallower than 128 in practice; deeper paths fall back to a
        // recursive refresh from the root.
        let mut path = [NIL; 128];
        let mut depth = 0;
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let next = match key.cmp(&n.key) {
                std::cmp::Ordering::Equal => break,
                std::cmp::Ordering::Less => n.left,
                std::cmp::Ordering::Greater => n.right,
            };
            if let Some(slot) = path.get_mut(depth) {
                *slot = t;
            }
            depth += 1;
            t = next;
        }
        if t == NIL {
            return false;
        }
        let Some(value) = self.values[t as usize].as_mut() else { return false };
        self.nodes[t as usize].weight = f(value);
        self.update(t);
        if depth <= path.len() {
            for &p in path[..depth].iter().rev() {
                self.update(p);
            }
        } else {
            self.update_path(self.root, key);
        }
        true
    }

    fn update_path(&mut self, t: u32, key: &K) {
        if t == NIL {
            return;
        }
        match key.cmp(&self.nodes[t as usize].key) {
            std::cmp::Ordering::Equal => {}
            std::cmp::Ordering::Less => self.update_path(self.nodes[t as usize].left, key),
            std::cmp::Ordering::Greater => self.update_path(self.nodes[t as usize].right, key),
        }
        self.update(t);
    }

    /// The smallest entry.
    pub fn first(&self) -> Option<(&K, &V, u64)> {
        self.outermost(|n| n.left)
    }

    /// The largest entry.
    pub fn last(&self) -> Option<(&K, &V, u64)> {
        self.outermost(|n| n.right)
    }

    /// The entry reached from the root by following `child` to its end.
    fn outermost(&self, child: impl Fn(&Node<K>) -> u32) -> Option<(&K, &V, u64)> {
        let mut t = self.root;
        if t == NIL {
            return None;
        }
        while child(&self.nodes[t as usize]) != NIL {
            t = child(&self.nodes[t as usize]);
        }
        let n = &self.nodes[t as usize];
        Some((&n.key, self.values[t as usize].as_ref()?, n.weight))
    }

    /// Removes and returns the smallest entry.
    pub fn pop_first(&mut self) -> Option<(K, V, u64)> {
        let key = *self.first()?.0;
        self.remove(&key).map(|(v, w)| (key, v, w))
    }

    /// Sum of the weights of the entries whose key satisfies `pred`. `pred` must be
    /// downward-closed (if it holds for a key it holds for every smaller key), e.g. `|k| k < x`
    /// or `|k| k.deadline <= d`; O(depth).
    pub fn prefix_sum(&self, pred: impl Fn(&K) -> bool) -> u64 {
        let mut acc = 0u64;
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if pred(&n.key) {
                acc = acc.saturating_add(self.sum(n.left)).saturating_add(n.weight);
                t = n.right;
            } else {
                t = n.left;
            }
        }
        acc
    }

    /// Least margin over the whole tree: `min_j due(j) − Σ_{i ≤ j} weight(i)`; `i64::MAX` when
    /// empty. O(1).
    pub fn min_margin(&self) -> i64 {
        self.margin(self.root)
    }

    /// Least margin over the entries whose key is strictly greater than `key`, each entry's
    /// margin counting the weights of *every* entry up to it (not only those after `key`);
    /// `i64::MAX` if there is none. O(depth).
    pub fn min_margin_after(&self, key: &K) -> i64 {
        let mut best = i64::MAX;
        let mut acc = 0u64;
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let upto = acc.saturating_add(self.sum(n.left)).saturating_add(n.weight);
            if n.key > *key {
                // `n` and its right subtree all lie after `key`; part of the left may too.
                let due = i64::try_from(n.key.due()).unwrap_or(i64::MAX);
                best = best.min(sub_margin(due, upto)).min(sub_margin(self.margin(n.right), upto));
                t = n.left;
            } else {
                acc = upto;
                t = n.right;
            }
        }
        best
    }

    /// The first entry in key order whose margin is below `threshold`, if any. O(depth).
    pub fn first_margin_below(&self, threshold: i64) -> Option<&K> {
        if self.min_margin() >= threshold {
            return None;
        }
        let mut acc = 0u64;
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if sub_margin(self.margin(n.left), acc) < threshold {
                t = n.left;
                continue;
            }
            let upto = acc.saturating_add(self.sum(n.left)).saturating_add(n.weight);
            let due = i64::try_from(n.key.due()).unwrap_or(i64::MAX);
            if sub_margin(due, upto) < threshold {
                return Some(&n.key);
            }
            acc = upto;
            t = n.right;
        }
        None
    }

    /// In-order iterator over (key, value, weight).
    pub fn iter(&self) -> Iter<'_, K, V> {
        let mut it = Iter { tree: self, stack: Vec::new() };
        it.push_left(self.root);
        it
    }

    /// Height of the tree (for tests of balance).
    pub fn height(&self) -> usize {
        fn h<K>(nodes: &[Node<K>], t: u32) -> usize {
            if t == NIL {
                0
            } else {
                let n = &nodes[t as usize];
                1 + h(nodes, n.left).max(h(nodes, n.right))
            }
        }
        h(&self.nodes, self.root)
    }
}

/// In-order iterator of a [`SumTree`].
pub struct Iter<'a, K, V> {
    tree: &'a SumTree<K, V>,
    stack: Vec<u32>,
}

impl<K, V> Iter<'_, K, V> {
    fn push_left(&mut self, mut t: u32) {
        while t != NIL {
            self.stack.push(t);
            t = self.tree.nodes[t as usize].left;
        }
    }
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V, u64);

    fn next(&mut self) -> Option<Self::Item> {
        let t = self.stack.pop()?;
        let n = &self.tree.nodes[t as usize];
        self.push_left(n.right);
        Some((&n.key, self.tree.values[t as usize].as_ref()?, n.weight))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_ops_and_sums() {
        let mut t: SumTree<u32, ()> = SumTree::new();
        for k in [5u32, 1, 9, 3, 7] {
            assert!(t.insert(k, k as u64 * 10, ()));
        }
        assert!(!t.insert(5, 1, ()));
        assert_eq!(t.len(), 5);
        assert_eq!(t.total(), 250);
        assert_eq!(t.prefix_sum(|k| *k < 7), 10 + 30 + 50);
        assert_eq!(t.prefix_sum(|k| *k <= 7), 10 + 30 + 50 + 70);
        assert!(t.set_weight(&3, 0));
        assert_eq!(t.prefix_sum(|k| *k < 7), 60);
        assert_eq!(t.remove(&5).map(|(_, w)| w), Some(50));
        assert_eq!(t.total(), 10 + 70 + 90);
        assert_eq!(t.pop_first().map(|(k, _, _)| k), Some(1));
        let keys: Vec<u32> = t.iter().map(|(k, _, _)| *k).collect();
        assert_eq!(keys, vec![3, 7, 9]);
    }

    #[test]
    fn stays_balanced_on_sorted_input() {
        let mut t: SumTree<u64, ()> = SumTree::new();
        for k in 0..100_000u64 {
            t.insert(k, 1, ());
        }
        // A treap's expected height is ~2.99 log2 n ≈ 50 for 10^5; a degenerate tree would be 10^5.
        assert!(t.height() < 80, "height {}", t.height());
        assert_eq!(t.total(), 100_000);
    }

    #[test]
    fn sums_saturate() {
        let mut t: SumTree<u8, ()> = SumTree::new();
        t.insert(1, u64::MAX - 1, ());
        t.insert(2, 5, ());
        assert_eq!(t.total(), u64::MAX);
    }
}
