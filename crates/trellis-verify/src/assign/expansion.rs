//! Step 1 of §6.4: the keys a check reads, closed under the correlations of the pars and the
//! presence predicates of the map bodies those keys lead to.

use std::rc::Rc;

use crate::addrmap::AddrMap;
use crate::domain::is_correlation_key;
use crate::index::Index;
use crate::nodeset::NodeId;
use crate::predicate::{Pred, guards_of};

use super::facts::FactsRef;
use super::program::Layout;
use super::resolved::GuardTable;

/// Everything the expansion step learned about a check's keys. Kept between checks and
/// refilled, so a check allocates nothing here once the buffers have grown.
#[derive(Debug, Default)]
pub(crate) struct Expansion<'g> {
    pub(crate) layout: Layout<'g>,
    /// Per key position: whether it is aggregated over its map scope.
    pub(crate) aggregate: Vec<bool>,
    /// Pars whose correlation the check reads, in discovery order.
    pub(crate) remembered: Vec<NodeId>,
    /// Nodes whose presence predicate was appended.
    pub(crate) present: Vec<NodeId>,
    /// Key positions read by each predicate, by address: a range of `uses`.
    pred_keys: AddrMap<(usize, usize)>,
    /// `(position, in k_of_map)` per selector occurrence, grouped per predicate.
    uses: Vec<(usize, bool)>,
    /// Guards of the predicate being added (reused buffer).
    guards: Vec<&'g trellis_graph::Guard>,
}

impl<'g> Expansion<'g> {
    fn owner(&self, index: &Index, pos: usize) -> Option<NodeId> {
        index.entry(self.layout.keys[pos].key.node).map_owner
    }

    /// Adds the keys of a predicate (`k_of_map` keys with a map owner become aggregate);
    /// returns the range of `uses` holding its keys and whether anything changed.
    fn add_pred(
        &mut self,
        index: &Index<'g>,
        table: &GuardTable<'g>,
        pred: &Pred<'g>,
    ) -> ((usize, usize), bool) {
        let ptr = Rc::as_ptr(pred) as *const ();
        if let Some(range) = self.pred_keys.get(ptr) {
            return (*range, false);
        }
        self.guards.clear();
        guards_of(pred, &mut self.guards);
        let start = self.uses.len();
        let mut changed = false;
        for at in 0..self.guards.len() {
            let resolved = table.get(index, self.guards[at]);
            for &(key, domain, in_k_of_map) in &resolved.uses {
                let before = self.layout.keys.len();
                let pos = self.layout.add(key, domain);
                if pos == before {
                    self.aggregate.push(false);
                    changed = true;
                }
                if in_k_of_map && index.entry(key.node).map_owner.is_some() && !self.aggregate[pos]
                {
                    self.aggregate[pos] = true;
                    changed = true;
                }
                self.uses.push((pos, in_k_of_map));
            }
        }
        let range = (start, self.uses.len());
        self.pred_keys.insert_new(ptr, range);
        (range, changed)
    }

    /// Marks the keys of `pred` owned by map `scope` as aggregate; reports a change.
    fn aggregate_within(
        &mut self,
        index: &Index<'g>,
        table: &GuardTable<'g>,
        pred: &Pred<'g>,
        scope: NodeId,
    ) -> bool {
        let ((start, end), mut changed) = self.add_pred(index, table, pred);
        for at in start..end {
            let pos = self.uses[at].0;
            if !self.aggregate[pos] && self.owner(index, pos) == Some(scope) {
                self.aggregate[pos] = true;
                changed = true;
            }
        }
        changed
    }

    /// Refills the expansion with the keys of `roots`, closed under correlations and
    /// presence predicates.
    pub(crate) fn expand(
        &mut self,
        index: &Index<'g>,
        facts: FactsRef<'_, 'g>,
        roots: &[Pred<'g>],
    ) {
        self.layout.clear();
        self.aggregate.clear();
        self.remembered.clear();
        self.present.clear();
        self.pred_keys.clear();
        self.uses.clear();
        let table = facts.guards;
        for root in roots {
            self.add_pred(index, table, root);
        }
        let mut changed = true;
        while changed {
            changed = false;
            let mut pos = 0;
            while pos < self.layout.keys.len() {
                let key = self.layout.keys[pos].key;
                let scope = self.aggregate[pos]
                    .then(|| self.owner(index, pos))
                    .flatten();
                if is_correlation_key(index, &key)
                    && let Some(correlation) = facts.correlations.get(&key.node)
                {
                    if !self.remembered.contains(&key.node) {
                        self.remembered.push(key.node);
                        changed = true;
                    }
                    for part in &correlation.parts {
                        changed |= match scope {
                            Some(s) => self.aggregate_within(index, table, part, s),
                            None => self.add_pred(index, table, part).1,
                        };
                    }
                }
                if let Some(s) = scope
                    && let Some(presence) = facts.presence.get(&key.node)
                    && presence.owner == s
                {
                    if !self.present.contains(&key.node) {
                        self.present.push(key.node);
                        changed = true;
                    }
                    changed |= self.aggregate_within(index, table, &presence.pred, s);
                }
                pos += 1;
            }
        }
    }

    /// Key positions read by a predicate already added.
    pub(crate) fn keys_of(&self, pred: &Pred<'g>) -> impl Iterator<Item = usize> + '_ {
        let range = self
            .pred_keys
            .get(Rc::as_ptr(pred) as *const ())
            .copied()
            .unwrap_or((0, 0));
        self.uses[range.0..range.1].iter().map(|k| k.0)
    }
}
