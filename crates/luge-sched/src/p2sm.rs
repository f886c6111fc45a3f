//! P²SM, the parallel precomputed sorted merge of HORSE §4.1 (Alg. 1): a batch of requests,
//! sorted by the front end, is merged into a worker's sorted run list by splicing, with every
//! position computed beforehand, so the worker's side of the merge costs one splice per distinct
//! insertion point instead of one sorted insert per request.
//!
//! [`RunList`] is a singly linked list in an arena, ordered by key (ties: first in, first out).
//! It keeps HORSE's `arrayB` ([`RunList::plan`] rebuilds it when the list changed): the node at
//! each position. A [`MergePlan`] is HORSE's `posA`: the batch, sorted and linked into one
//! sub-list per insertion point of the run list, with that point. [`RunList::merge`] then does
//! Alg. 1's two pointer writes per sub-list (lines 3–5) — in a loop here; HORSE runs one thread
//! per sub-list, which this single-threaded structure does not need. A plan is valid for the
//! version of the list it was computed against; a list changed since refuses it
//! ([`StalePlan`]), as HORSE recomputes `posA` whenever the run queue changes.
//!
//! Costs: `plan` O(m log m + m log n) (plus O(n) when `arrayB` must be rebuilt), `merge`
//! O(k) splices for k distinct insertion points plus one bulk copy of the batch's m nodes into
//! the arena; a single sorted insert is O(n).

/// One element of the list: a key, its value and the arena index of the next element.
#[derive(Debug, Clone)]
struct Node<K, V> {
    key: K,
    value: V,
    next: Option<usize>,
}

/// A sorted run list (see the module docs).
#[derive(Debug, Clone)]
pub struct RunList<K, V> {
    nodes: Vec<Option<Node<K, V>>>,
    free: Vec<usize>,
    head: Option<usize>,
    len: usize,
    /// HORSE's `arrayB`: the arena index of the element at each position (valid when `!dirty`).
    positions: Vec<usize>,
    dirty: bool,
    /// Bumped by every change; a plan names the version it was computed against.
    version: u64,
}

/// A batch prepared for [`RunList::merge`]: HORSE's `posA`.
#[derive(Debug, Clone)]
pub struct MergePlan<K, V> {
    version: u64,
    /// The batch's nodes, sorted, linked within each sub-list; `next` indices are relative to
    /// the start of this vector until the merge places them.
    nodes: Vec<Node<K, V>>,
    /// Per sub-list: the position of the run list's element it goes after (`None`: before the
    /// head), and the sub-list's first and last node (indices into `nodes`).
    splices: Vec<(Option<usize>, usize, usize)>,
}

impl<K, V> MergePlan<K, V> {
    /// Requests in the batch.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Distinct insertion points (the splices a merge performs).
    pub fn splices(&self) -> usize {
        self.splices.len()
    }
}

/// The list changed after the plan was computed: plan again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run list changed since the merge plan was computed")]
pub struct StalePlan;

impl<K: Ord + Copy, V> Default for RunList<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Copy, V> RunList<K, V> {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            nodes: Vec::new(),
            free: Vec::new(),
            head: None,
            len: 0,
            positions: Vec::new(),
            dirty: false,
            version: 0,
        }
    }

    /// Elements in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element.
    pub fn first(&self) -> Option<(K, &V)> {
        self.head.and_then(|h| self.node(h)).map(|n| (n.key, &n.value))
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        let mut at = self.head;
        std::iter::from_fn(move || {
            let node = self.node(at?)?;
            at = node.next;
            Some((node.key, &node.value))
        })
    }

    fn node(&self, i: usize) -> Option<&Node<K, V>> {
        self.nodes.get(i).and_then(Option::as_ref)
    }

    fn node_mut(&mut self, i: usize) -> Option<&mut Node<K, V>> {
        self.nodes.get_mut(i).and_then(Option::as_mut)
    }

    fn changed(&mut self) {
        self.version += 1;
        self.dirty = true;
    }

    fn alloc(&mut self, node: Node<K, V>) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        }
    }

    /// Inserts one element after every element with a key ≤ `key`: the O(n) sorted insert a
    /// merge replaces.
    pub fn insert(&mut self, key: K, value: V) {
        let mut prev = None;
        let mut at = self.head;
        while let Some(i) = at {
            let Some(node) = self.node(i) else { break };
            if node.key > key {
                break;
            }
            prev = Some(i);
            at = node.next;
        }
        let new = self.alloc(Node { key, value, next: at });
        match prev.and_then(|p| self.node_mut(p)) {
            Some(p) => p.next = Some(new),
            None => self.head = Some(new),
        }
        self.len += 1;
        self.changed();
    }

    /// Removes and returns the first element.
    pub fn pop_first(&mut self) -> Option<(K, V)> {
        let h = self.head?;
        let node = self.nodes.get_mut(h)?.take()?;
        self.free.push(h);
        self.head = node.next;
        self.len -= 1;
        self.changed();
        Some((node.key, node.value))
    }

    /// Prepares `batch` (in any order) for a merge into the list as it is now: sorts it by key
    /// (stably), finds each element's insertion point by binary search over `arrayB`, and links
    /// the elements that share a point into one sub-list.
    pub fn plan(&mut self, batch: impl IntoIterator<Item = (K, V)>) -> MergePlan<K, V> {
        if self.dirty {
            self.positions.clear();
            let mut at = self.head;
            while let Some(i) = at {
                self.positions.push(i);
                at = self.node(i).and_then(|n| n.next);
            }
            self.dirty = false;
        }
        let mut items: Vec<(K, V)> = batch.into_iter().collect();
        items.sort_by_key(|x| x.0);
        // Room for the batch now, so that the merge never moves the arena.
        self.nodes.reserve(items.len());
        let mut nodes = Vec::with_capacity(items.len());
        let mut splices: Vec<(Option<usize>, usize, usize)> = Vec::new();
        for (key, value) in items {
            // Elements of the list with a key ≤ `key` stay ahead (first in, first out).
            let after =
                self.positions.partition_point(|&i| self.node(i).is_some_and(|n| n.key <= key));
            let point = after.checked_sub(1);
            let me = nodes.len();
            nodes.push(Node { key, value, next: None });
            match splices.last_mut() {
                Some((p, _, tail)) if *p == point => {
                    nodes[*tail].next = Some(me);
                    *tail = me;
                }
                _ => splices.push((point, me, me)),
            }
        }
        MergePlan { version: self.version, nodes, splices }
    }

    /// Merges a plan computed against the list as it is (HORSE §4.1, Alg. 1): the batch's nodes
    /// join the arena (in slots popped nodes left free, else at its end: O(m)), then each
    /// sub-list is spliced in with two pointer writes.
    pub fn merge(&mut self, plan: MergePlan<K, V>) -> Result<(), StalePlan> {
        if plan.version != self.version {
            return Err(StalePlan);
        }
        let added = plan.nodes.len();
        let slots: Vec<usize> = (0..added)
            .map(|_| {
                self.free.pop().unwrap_or_else(|| {
                    self.nodes.push(None);
                    self.nodes.len() - 1
                })
            })
            .collect();
        for (mut n, &slot) in plan.nodes.into_iter().zip(&slots) {
            n.next = n.next.and_then(|i| slots.get(i).copied());
            self.nodes[slot] = Some(n);
        }
        for (point, head, tail) in plan.splices {
            let (Some(&head), Some(&tail)) = (slots.get(head), slots.get(tail)) else { continue };
            // Alg. 1, lines 3–5: tmp ← arrayB[key].next; arrayB[key].next ← head; tail.next ← tmp.
            let after = match point {
                Some(p) => {
                    let at = self.positions[p];
                    let Some(node) = self.node_mut(at) else { continue };
                    node.next.replace(head)
                }
                None => self.head.replace(head),
            };
            if let Some(t) = self.node_mut(tail) {
                t.next = after;
            }
        }
        self.len += added;
        self.changed();
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_batch_lands_in_key_order_behind_equal_keys() {
        let mut list = RunList::new();
        for (k, v) in [(10, "b10"), (20, "b20"), (30, "b30")] {
            list.insert(k, v);
        }
        let plan = list.plan([(25, "a25"), (5, "a5"), (20, "a20"), (40, "a40"), (26, "a26")]);
        assert_eq!(plan.splices(), 3, "before 10; after 20 (keys 20, 25, 26); after 30");
        list.merge(plan).unwrap();
        let order: Vec<_> = list.iter().map(|(_, v)| *v).collect();
        assert_eq!(order, ["a5", "b10", "b20", "a20", "a25", "a26", "b30", "a40"]);
        assert_eq!(list.len(), 8);
    }

    /// Merged nodes take the slots popped ones left: a list that takes batches and pops as many
    /// keeps its arena at its largest length.
    #[test]
    fn merges_reuse_the_slots_of_popped_nodes() {
        let mut list = RunList::new();
        for round in 0..100u32 {
            let plan = list.plan((0..8).map(|i| (round * 8 + i, ())));
            list.merge(plan).unwrap();
            while list.pop_first().is_some() {}
        }
        assert!(list.nodes.len() <= 8, "the arena grew to {}", list.nodes.len());
    }

    #[test]
    fn a_plan_for_an_older_list_is_refused() {
        let mut list = RunList::new();
        list.insert(1, ());
        let plan = list.plan([(2, ())]);
        list.insert(3, ());
        assert_eq!(list.merge(plan), Err(StalePlan));
        let plan = list.plan([(2, ())]);
        list.merge(plan).unwrap();
        assert_eq!(list.iter().map(|(k, _)| k).collect::<Vec<_>>(), [1, 2, 3]);
    }

    proptest::proptest! {
        /// Against the naive merge: the list as a sorted `Vec`, each batch element inserted after
        /// every element with a key ≤ its own, in the batch's stably sorted order.
        #[test]
        fn merging_matches_inserting_one_by_one(
            ops in proptest::collection::vec(
                proptest::prop_oneof![
                    (0u32..50).prop_map(Op::Insert),
                    proptest::strategy::Just(Op::Pop),
                    proptest::collection::vec(0u32..50, 0..12).prop_map(Op::Merge),
                ],
                0..40,
            ),
        ) {
            let mut list = RunList::new();
            let mut naive: Vec<(u32, u32)> = Vec::new();
            let mut tag = 0u32;
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        tag += 1;
                        list.insert(k, tag);
                        let at = naive.partition_point(|e| e.0 <= k);
                        naive.insert(at, (k, tag));
                    }
                    Op::Pop => {
                        let got = list.pop_first();
                        let want = (!naive.is_empty()).then(|| naive.remove(0));
                        proptest::prop_assert_eq!(got, want);
                    }
                    Op::Merge(keys) => {
                        let batch: Vec<(u32, u32)> =
                            keys.iter().map(|&k| { tag += 1; (k, tag) }).collect();
                        let mut sorted = batch.clone();
                        sorted.sort_by_key(|e| e.0);
                        for e in sorted {
                            let at = naive.partition_point(|x| x.0 <= e.0);
                            naive.insert(at, e);
                        }
                        let plan = list.plan(batch);
                        list.merge(plan).unwrap();
                    }
                }
                let got: Vec<(u32, u32)> = list.iter().map(|(k, v)| (k, *v)).collect();
                proptest::prop_assert_eq!(&got, &naive);
                proptest::prop_assert_eq!(list.len(), naive.len());
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Pop,
        Merge(Vec<u32>),
    }
}
