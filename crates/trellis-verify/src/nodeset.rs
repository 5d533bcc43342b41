//! A fixed-capacity bit set of node ids: flows are cloned per branch, so sets must copy cheaply.

/// Dense index of a node occurrence in the graph's pre-order (see `index`).
pub(crate) type NodeId = u32;

/// A set of node ids backed by a bit vector sized for the whole graph.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct NodeSet {
    words: Vec<u64>,
}

impl NodeSet {
    /// An empty set able to hold ids below `capacity` (it grows if needed).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            words: vec![0; capacity.div_ceil(64)],
        }
    }

    pub(crate) fn insert(&mut self, id: NodeId) {
        let (word, bit) = (id as usize / 64, id % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    pub(crate) fn remove(&mut self, id: NodeId) {
        let (word, bit) = (id as usize / 64, id % 64);
        if let Some(w) = self.words.get_mut(word) {
            *w &= !(1 << bit);
        }
    }

    pub(crate) fn contains(&self, id: NodeId) -> bool {
        let (word, bit) = (id as usize / 64, id % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    pub(crate) fn union_with(&mut self, other: &NodeSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (mine, theirs) in self.words.iter_mut().zip(&other.words) {
            *mine |= theirs;
        }
    }

    pub(crate) fn intersect_with(&mut self, other: &NodeSet) {
        for (i, mine) in self.words.iter_mut().enumerate() {
            *mine &= other.words.get(i).copied().unwrap_or(0);
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Members in ascending order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, word)| {
            let mut rest = *word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(i as NodeId * 64 + bit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        u.remove(3);
        u.remove(7);
        assert_eq!(u.iter().collect::<Vec<_>>(), vec![130]);
        u.remove(130);
        assert!(u.is_empty());
    }
}
