//! A fixed-capacity bit set of node ids: flows are cloned per branch, so sets must copy cheaply.

/// Dense index of a node occurrence in the graph's pre-order (see `index`).
pub(crate) type NodeId = u32;

/// A set of node ids stored as sorted `(word, bits)` pairs without empty words: node ids are
/// pre-order positions, so the sets a subtree produces are clustered and stay small, while
/// whole-graph sets degrade gracefully to a dense bit vector. Copies are proportional to the
/// population, not to the graph size (a fixed-size bit set made the walk quadratic).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct NodeSet {
    words: Vec<(u32, u64)>,
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

    /// The common union of a growing set: every word of `other` is already present or lies
    /// past this set's last word (pre-order ids mostly grow), so no merged copy is needed.
    /// Returns false, changing nothing, when a word would have to go in between.
    fn union_in_place(&mut self, other: &NodeSet) -> bool {
        let last = self.words.last().map_or(0, |(w, _)| *w);
        let mut at = 0;
        let mut tail = other.words.len();
        for (j, (word, _)) in other.words.iter().enumerate() {
            if *word > last {
                tail = j;
                break;
            }
            while self.words[at].0 < *word {
                at += 1;
            }
            if self.words[at].0 != *word {
                return false;
            }
        }
        let mut at = 0;
        for (word, bits) in &other.words[..tail] {
            while self.words[at].0 < *word {
                at += 1;
            }
            self.words[at].1 |= bits;
        }
        self.words.extend_from_slice(&other.words[tail..]);
        true
    }

    pub(crate) fn union_with(&mut self, other: &NodeSet) {
        if other.words.is_empty() {
            return;
        }
        if self.words.is_empty() {
            self.words = other.words.clone();
            return;
        }
        if self.union_in_place(other) {
            return;
        }
        let mut merged = Vec::with_capacity(self.words.len() + other.words.len());
        let (mut i, mut j) = (0, 0);
        while i < self.words.len() && j < other.words.len() {
            let (a, b) = (self.words[i], other.words[j]);
            match a.0.cmp(&b.0) {
                std::cmp::Ordering::Less => {
                    merged.push(a);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    merged.push(b);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    merged.push((a.0, a.1 | b.1));
                    i += 1;
                    j += 1;
                }
            }
        }
        merged.extend_from_slice(&self.words[i..]);
        merged.extend_from_slice(&other.words[j..]);
        self.words = merged;
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
