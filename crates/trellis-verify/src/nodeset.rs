//! A fixed-capacity bit set of node ids: flows are cloned per branch, so sets must copy cheaply.

/// Dense index of a node occurrence in the graph's pre-order (see `index`).
pub(crate) type NodeId = u32;

/// A set of node ids stored as sorted `(word, bits)` pairs without empty words: node ids are
/// pre-order positions, so the sets a subtree produces are clustered and stay small, while
/// whole-graph sets degrade gracefully to a dense bit vector. Copies are proportional to the
/// population, not to the graph size (a fixed-size bit set made the walk quadratic).
#[derive(Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct NodeSet {
    words: Vec<(u32, u64)>,
}

impl Clone for NodeSet {
    fn clone(&self) -> Self {
        NodeSet {
            words: self.words.clone(),
        }
    }

    /// Reuses the buffer: a flow's failed set is replaced by each successor's.
    fn clone_from(&mut self, source: &Self) {
        self.words.clone_from(&source.words);
    }
}

impl NodeSet {
    /// An empty set; `capacity` is a hint only.
    pub(crate) fn with_capacity(_capacity: usize) -> Self {
        Self::default()
    }

    fn locate(&self, word: u32) -> Result<usize, usize> {
        self.words.binary_search_by_key(&word, |(w, _)| *w)
    }

    pub(crate) fn insert(&mut self, id: NodeId) {
        let (word, bit) = (id / 64, 1u64 << (id % 64));
        match self.locate(word) {
            Ok(at) => self.words[at].1 |= bit,
            Err(at) => self.words.insert(at, (word, bit)),
        }
    }

    pub(crate) fn remove(&mut self, id: NodeId) {
        let (word, bit) = (id / 64, 1u64 << (id % 64));
        if let Ok(at) = self.locate(word) {
            self.words[at].1 &= !bit;
            if self.words[at].1 == 0 {
                self.words.remove(at);
            }
        }
    }

    pub(crate) fn contains(&self, id: NodeId) -> bool {
        let (word, bit) = (id / 64, 1u64 << (id % 64));
        self.locate(word)
            .is_ok_and(|at| self.words[at].1 & bit != 0)
    }

    /// Unions in place. Words of `other` below this set's first shared position are found by
    /// binary search (sets are clustered, so a union touches only the tail of a large set),
    /// matching words are or-ed in one pass, and missing words are merged in from the back
    /// after growing the vector once, so no merged copy is built.
    pub(crate) fn union_with(&mut self, other: &NodeSet) {
        let Some(&(first, _)) = other.words.first() else {
            return;
        };
        if self.words.is_empty() {
            self.words.clone_from(&other.words);
            return;
        }
        let start = self.words.partition_point(|(w, _)| *w < first);
        let mut missing = 0;
        let mut i = start;
        for &(word, bits) in &other.words {
            while i < self.words.len() && self.words[i].0 < word {
                i += 1;
            }
            match self.words.get_mut(i) {
                Some(own) if own.0 == word => own.1 |= bits,
                _ => missing += 1,
            }
        }
        if missing == 0 {
            return;
        }
        // Backward merge into the grown vector: `k` is the next slot to fill from the end,
        // `i` and `j` the unmerged ends of the old words and of `other`.
        let old = self.words.len();
        self.words.resize(old + missing, (0, 0));
        let (mut i, mut j, mut k) = (old, other.words.len(), old + missing);
        while j > 0 {
            k -= 1;
            let theirs = other.words[j - 1];
            if i > start && self.words[i - 1].0 >= theirs.0 {
                // Equal words were or-ed already; the old entry moves as it is.
                if self.words[i - 1].0 == theirs.0 {
                    j -= 1;
                }
                self.words[k] = self.words[i - 1];
                i -= 1;
            } else {
                self.words[k] = theirs;
                j -= 1;
            }
        }
    }

    pub(crate) fn intersect_with(&mut self, other: &NodeSet) {
        let mut j = 0;
        self.words.retain_mut(|(word, bits)| {
            while j < other.words.len() && other.words[j].0 < *word {
                j += 1;
            }
            if j < other.words.len() && other.words[j].0 == *word {
                *bits &= other.words[j].1;
                *bits != 0
            } else {
                false
            }
        });
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Members in ascending order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.words.iter().flat_map(|(word, bits)| {
            let mut rest = *bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(word * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_match_ordered_sets() {
        use std::collections::BTreeSet;
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        for _ in 0..2_000 {
            let (mut a, mut b) = (NodeSet::default(), NodeSet::default());
            let (mut sa, mut sb) = (BTreeSet::new(), BTreeSet::new());
            let spread = 1 + next(1_000);
            for _ in 0..next(20) {
                let id = next(spread);
                a.insert(id);
                sa.insert(id);
            }
            for _ in 0..next(20) {
                let id = next(spread * 2);
                b.insert(id);
                sb.insert(id);
            }
            a.union_with(&b);
            sa.extend(sb);
            assert_eq!(
                a.iter().collect::<Vec<_>>(),
                sa.into_iter().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn clones_change_independently() {
        use std::collections::BTreeSet;
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        for _ in 0..500 {
            let (mut a, mut sa) = (NodeSet::default(), BTreeSet::new());
            for _ in 0..next(40) {
                let id = next(2_000);
                a.insert(id);
                sa.insert(id);
            }
            let (mut b, mut sb) = (a.clone(), sa.clone());
            for _ in 0..next(30) {
                let id = next(2_000);
                match next(4) {
                    0 => {
                        b.remove(id);
                        sb.remove(&id);
                    }
                    1 => {
                        let mut c = NodeSet::default();
                        c.insert(id);
                        c.insert(id + 64);
                        b.union_with(&c);
                        sb.extend([id, id + 64]);
                    }
                    2 => {
                        b.union_with(&a);
                        sb.extend(sa.iter().copied());
                    }
                    _ => {
                        b.insert(id);
                        sb.insert(id);
                    }
                }
            }
            if next(3) == 0 {
                b.intersect_with(&a);
                sb.retain(|id| sa.contains(id));
            }
            assert_eq!(
                a.iter().collect::<Vec<_>>(),
                sa.into_iter().collect::<Vec<_>>()
            );
            assert_eq!(
                b.iter().collect::<Vec<_>>(),
                sb.iter().copied().collect::<Vec<_>>()
            );
            assert!(sb.iter().all(|id| b.contains(*id)));
        }
    }

    #[test]
    fn set_operations_behave_like_sets() {
        let mut a = NodeSet::with_capacity(10);
        a.insert(3);
        a.insert(130);
        let mut b = NodeSet::with_capacity(200);
        b.insert(3);
        b.insert(7);
        assert!(a.contains(130) && !a.contains(7));
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.iter().collect::<Vec<_>>(), vec![3, 7, 130]);
        let mut i = a.clone();
        i.intersect_with(&b);
        assert_eq!(i.iter().collect::<Vec<_>>(), vec![3]);
        let mut i2 = b.clone();
        i2.intersect_with(&a);
        assert_eq!(i2.iter().collect::<Vec<_>>(), vec![3]);
        u.remove(3);
        u.remove(7);
        assert_eq!(u.iter().collect::<Vec<_>>(), vec![130]);
        u.remove(130);
        assert!(u.is_empty());
    }
}
