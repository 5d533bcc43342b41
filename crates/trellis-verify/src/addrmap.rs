//! A map keyed by addresses that scans a short list while it is small: the per-check memos of
//! the assignment engine hold a handful of predicates, for which a hash table's allocation,
//! hashing and growth cost more than the lookups they save.

use crate::index::FastMap;

/// Entries kept in the scanned list before the map switches to a hash table.
const SCANNED_ENTRIES: usize = 16;

/// Values by address; lookups are linear up to [`SCANNED_ENTRIES`] entries, hashed beyond.
#[derive(Debug)]
pub(crate) struct AddrMap<V> {
    small: Vec<(*const (), V)>,
    large: FastMap<*const (), V>,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        Self {
            small: Vec::new(),
            large: FastMap::default(),
        }
    }
}

impl<V> AddrMap<V> {
    pub(crate) fn get(&self, addr: *const ()) -> Option<&V> {
        if self.large.is_empty() {
            self.small.iter().find(|(a, _)| *a == addr).map(|(_, v)| v)
        } else {
            self.large.get(&addr)
        }
    }

    /// Adds a value for an address not in the map yet.
    pub(crate) fn insert_new(&mut self, addr: *const (), value: V) {
        if self.large.is_empty() && self.small.len() < SCANNED_ENTRIES {
            self.small.push((addr, value));
            return;
        }
        if self.large.is_empty() {
            self.large.extend(self.small.drain(..));
        }
        self.large.insert(addr, value);
    }

    /// Empties the map, keeping its allocations for reuse.
    pub(crate) fn clear(&mut self) {
        self.small.clear();
        self.large.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_agree_before_and_after_the_switch() {
        let items: Vec<u64> = (0..40).collect();
        let mut map = AddrMap::default();
        for (i, item) in items.iter().enumerate() {
            map.insert_new(item as *const u64 as *const (), i);
            for (j, seen) in items.iter().enumerate() {
                let got = map.get(seen as *const u64 as *const ()).copied();
                assert_eq!(got, (j <= i).then_some(j));
            }
        }
    }
}
