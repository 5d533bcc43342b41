//! The legal-control-assignment engine (§6.4): expands a check's guards with join correlations
//! and map presence, builds scalar and aggregate dimensions, enumerates and filters them.

mod dims;
mod enumerate;
pub(crate) mod program;

use std::collections::{BTreeMap, BTreeSet};

use crate::addrmap::AddrMap;
use crate::index::FastMap;
use std::rc::Rc;

use trellis_graph::ControlSource;

use crate::domain::{is_correlation_key, key_of};
use crate::guards::selector_occurrences;
use crate::index::Index;
use crate::nodeset::NodeId;
use crate::predicate::{Pred, guards_of, never_holds};
use program::{Layout, Program};

/// Most assignments (and dimension candidates) one finite check may produce.
pub(crate) const ASSIGNMENT_LIMIT: usize = 65_536;

/// The check's space exceeded the ceiling; callers treat the outcome as unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ceiling;

/// A par's join correlation: when its `joined`/`raced` fact takes the positive label
/// (`reached`/`satisfied`) the `positive` predicate holds, for the negative label `negative`.
#[derive(Debug)]
pub(crate) struct Correlation<'g> {
    pub(crate) positive: Pred<'g>,
    pub(crate) negative: Pred<'g>,
    /// The predicates whose guards the correlation reads (branch completions and the like).
    pub(crate) parts: Vec<Pred<'g>>,
}

/// When a node inside a map body executes for one item.
#[derive(Debug)]
pub(crate) struct Presence<'g> {
    pub(crate) owner: NodeId,
    pub(crate) pred: Pred<'g>,
}

/// Control facts the dataflow walk records for later checks.
#[derive(Debug, Default)]
pub(crate) struct ControlFacts<'g> {
    pub(crate) correlations: FastMap<NodeId, Correlation<'g>>,
    pub(crate) presence: FastMap<NodeId, Presence<'g>>,
}

/// Everything the expansion step learned about a check's keys.
pub(crate) struct Expansion<'g> {
    pub(crate) layout: Layout<'g>,
    /// Per key position: whether it is aggregated over its map scope.
    pub(crate) aggregate: Vec<bool>,
    /// Pars whose correlation the check reads, in discovery order.
    pub(crate) remembered: Vec<NodeId>,
    /// Nodes whose presence predicate was appended.
    pub(crate) present: Vec<NodeId>,
    /// Keys read by each predicate (by address), with the `k_of_map` flag.
    pred_keys: AddrMap<Vec<(usize, bool)>>,
}

impl<'g> Expansion<'g> {
    fn owner(&self, index: &Index, pos: usize) -> Option<NodeId> {
        index.entry(self.layout.keys[pos].key.node).map_owner
    }

    /// Adds the keys of a predicate; `k_of_map` keys with a map owner become aggregate.
    fn add_pred(&mut self, index: &Index<'g>, pred: &Pred<'g>) -> (Vec<usize>, bool) {
        let ptr = Rc::as_ptr(pred) as *const ();
        if let Some(keys) = self.pred_keys.get(ptr) {
            return (keys.iter().map(|k| k.0).collect(), false);
        }
        let mut guards = Vec::new();
        guards_of(pred, &mut guards);
        let mut keys = Vec::new();
        let mut changed = false;
        let mut uses = Vec::new();
        for guard in guards {
            uses.clear();
            selector_occurrences(guard, &mut uses);
            for &(sel, in_k_of_map) in &uses {
                let Some(key) = key_of(index, sel) else {
                    continue;
                };
                let before = self.layout.keys.len();
                let Some(pos) = self.layout.add(index, key) else {
                    continue;
                };
                if pos == before {
                    self.aggregate.push(false);
                    changed = true;
                }
                if in_k_of_map && index.entry(key.node).map_owner.is_some() && !self.aggregate[pos]
                {
                    self.aggregate[pos] = true;
                    changed = true;
                }
                keys.push((pos, in_k_of_map));
            }
        }
        let positions = keys.iter().map(|k| k.0).collect();
        self.pred_keys.insert_new(ptr, keys);
        (positions, changed)
    }

    /// Marks the keys of `pred` owned by map `scope` as aggregate; reports a change.
    fn aggregate_within(&mut self, index: &Index<'g>, pred: &Pred<'g>, scope: NodeId) -> bool {
        let (keys, mut changed) = self.add_pred(index, pred);
        for pos in keys {
            if !self.aggregate[pos] && self.owner(index, pos) == Some(scope) {
                self.aggregate[pos] = true;
                changed = true;
            }
        }
        changed
    }

    /// Step 1: the check's keys, closed under correlations and presence predicates.
    pub(crate) fn expand(index: &Index<'g>, facts: &ControlFacts<'g>, roots: &[Pred<'g>]) -> Self {
        let mut this = Expansion {
            layout: Layout::default(),
            aggregate: Vec::new(),
            remembered: Vec::new(),
            present: Vec::new(),
            pred_keys: AddrMap::default(),
        };
        for root in roots {
            this.add_pred(index, root);
        }
        let mut remembered = BTreeSet::new();
        let mut present = BTreeSet::new();
        let mut changed = true;
        while changed {
            changed = false;
            let mut pos = 0;
            while pos < this.layout.keys.len() {
                let key = this.layout.keys[pos].key;
                let scope = this.aggregate[pos]
                    .then(|| this.owner(index, pos))
                    .flatten();
                if is_correlation_key(index, &key)
                    && let Some(correlation) = facts.correlations.get(&key.node)
                {
                    if remembered.insert(key.node) {
                        this.remembered.push(key.node);
                        changed = true;
                    }
                    for part in &correlation.parts {
                        changed |= match scope {
                            Some(s) => this.aggregate_within(index, part, s),
                            None => this.add_pred(index, part).1,
                        };
                    }
                }
                if let Some(s) = scope
                    && let Some(presence) = facts.presence.get(&key.node)
                    && presence.owner == s
                {
                    if present.insert(key.node) {
                        this.present.push(key.node);
                        changed = true;
                    }
                    changed |= this.aggregate_within(index, &presence.pred, s);
                }
                pos += 1;
            }
        }
        this
    }

    /// Key positions read by a predicate already added.
    pub(crate) fn keys_of(&self, pred: &Pred<'g>) -> Vec<usize> {
        self.pred_keys
            .get(Rc::as_ptr(pred) as *const ())
            .map(|keys| keys.iter().map(|k| k.0).collect())
            .unwrap_or_default()
    }
}

/// The legal assignments of one check and the value of each root predicate on them.
pub(crate) struct Assignments<'g> {
    layout: Layout<'g>,
    roots: usize,
    data: Vec<u32>,
    root_bits: Vec<bool>,
    count: usize,
    /// Key positions per node, for failure classification.
    node_keys: NodeKeys,
}

/// Key positions grouped by node, nodes ascending and positions ascending within a node (what
/// a `BTreeMap<NodeId, Vec<usize>>` would hold, in two flat vectors).
#[derive(Debug, Default)]
pub(crate) struct NodeKeys {
    positions: Vec<usize>,
    /// Per node: the node and the end of its run in `positions`.
    runs: Vec<(NodeId, usize)>,
}

impl NodeKeys {
    /// Groups the positions `(node, position)` pairs name, in any order.
    pub(crate) fn group(mut pairs: Vec<(NodeId, usize)>) -> Self {
        pairs.sort_unstable();
        let mut runs: Vec<(NodeId, usize)> = Vec::new();
        for (i, (node, _)) in pairs.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if run.0 == *node => run.1 = i + 1,
                _ => runs.push((*node, i + 1)),
            }
        }
        Self {
            positions: pairs.into_iter().map(|(_, pos)| pos).collect(),
            runs,
        }
    }

    /// Each node with its key positions.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (NodeId, &[usize])> + '_ {
        let starts = std::iter::once(0).chain(self.runs.iter().map(|run| run.1));
        self.runs
            .iter()
            .zip(starts)
            .map(|(&(node, end), start)| (node, &self.positions[start..end]))
    }
}

/// A check ready to enumerate: its keys, compiled predicates, filters and dimensions.
struct Prepared<'g> {
    expansion: Expansion<'g>,
    program: Program,
    root_ops: Vec<usize>,
    filters: Vec<dims::Filter>,
    dims: Vec<dims::Dim>,
}

impl<'g> Prepared<'g> {
    /// Steps 1–5 of §6.4: expansion, compilation and dimensions.
    fn new(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
    ) -> Result<Self, Ceiling> {
        let expansion = Expansion::expand(index, facts, roots);
        let mut program = Program::with_capacity(2 * expansion.layout.keys.len() + 8);
        let root_ops = roots
            .iter()
            .map(|r| program.compile(r, &expansion.layout, index))
            .collect();
        let mut filters = Vec::new();
        for par in &expansion.remembered {
            if let Some(c) = facts.correlations.get(par) {
                let positive = program.compile(&c.positive, &expansion.layout, index);
                let negative = program.compile(&c.negative, &expansion.layout, index);
                filters.push((*par, positive, negative));
            }
        }
        let mut presence_ops = BTreeMap::new();
        for node in &expansion.present {
            if let Some(p) = facts.presence.get(node) {
                presence_ops.insert(*node, program.compile(&p.pred, &expansion.layout, index));
            }
        }
        let dims = dims::DimBuilder {
            index,
            facts,
            expansion: &expansion,
            program: &program,
            filters: &filters,
            presence_ops: &presence_ops,
        }
        .build()?;
        Ok(Prepared {
            expansion,
            program,
            root_ops,
            filters,
            dims,
        })
    }

    fn enumerate(
        &self,
        index: &Index<'g>,
        visit: &mut dyn FnMut(&[u32], &[bool]) -> enumerate::Next,
    ) -> Result<(), Ceiling> {
        enumerate::enumerate(
            index,
            &self.expansion,
            &self.program,
            &self.filters,
            &self.dims,
            visit,
        )
    }
}

impl<'g> Assignments<'g> {
    /// Builds the legal assignments for `roots` (steps 1–7 of §6.4).
    pub(crate) fn build(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
    ) -> Result<Self, Ceiling> {
        if let Some(values) = roots
            .iter()
            .map(crate::predicate::constant)
            .collect::<Option<Vec<bool>>>()
        {
            // Constant roots: the single empty assignment.
            return Ok(Self {
                layout: Layout::default(),
                roots: roots.len(),
                data: Vec::new(),
                root_bits: values,
                count: 1,
                node_keys: NodeKeys::default(),
            });
        }
        let prepared = Prepared::new(index, facts, roots)?;
        let mut data = Vec::new();
        let mut root_bits = Vec::new();
        let mut count = 0;
        prepared.enumerate(index, &mut |assignment, values| {
            data.extend_from_slice(assignment);
            root_bits.extend(prepared.root_ops.iter().map(|op| values[*op]));
            count += 1;
            enumerate::Next::Continue
        })?;
        let node_keys = NodeKeys::group(
            (prepared.expansion.layout.keys.iter().enumerate())
                .map(|(pos, slot)| (slot.key.node, pos))
                .collect(),
        );
        Ok(Self {
            layout: prepared.expansion.layout,
            roots: roots.len(),
            data,
            root_bits,
            count,
            node_keys,
        })
    }

    /// Whether some legal assignment satisfies `test` on the root values. Stops at the first
    /// witness when the space's size is known without enumerating it (no dimensions share a
    /// key); the ceiling is still reported exactly. `test` must be monotone (turning a root
    /// value from false to true never turns the answer from true to false), which lets roots
    /// that can never hold decide the answer without enumerating.
    pub(crate) fn satisfiable(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
        test: &dyn Fn(&[bool]) -> bool,
    ) -> Result<bool, Ceiling> {
        let prepared = Prepared::new(index, facts, roots)?;
        let exact = !enumerate::may_conflict(&prepared.expansion.layout, &prepared.dims);
        if exact {
            let size = prepared
                .dims
                .iter()
                .try_fold(1usize, |acc, d| acc.checked_mul(d.len()))
                .filter(|n| *n <= ASSIGNMENT_LIMIT);
            if size.is_none() {
                return Err(Ceiling);
            }
        }
        if exact {
            let optimistic: Vec<bool> = roots.iter().map(|r| !never_holds(r)).collect();
            if !test(&optimistic) {
                return Ok(false);
            }
        }
        let mut found = false;
        let mut roots_now = Vec::with_capacity(roots.len());
        prepared.enumerate(index, &mut |_, values| {
            roots_now.clear();
            roots_now.extend(prepared.root_ops.iter().map(|op| values[*op]));
            found |= test(&roots_now);
            if found && exact {
                enumerate::Next::Stop
            } else {
                enumerate::Next::Continue
            }
        })?;
        Ok(found)
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn assignment(&self, i: usize) -> &[u32] {
        let stride = self.layout.stride;
        &self.data[i * stride..(i + 1) * stride]
    }

    /// The value of every root predicate on assignment `i`.
    pub(crate) fn root_values(&self, i: usize) -> &[bool] {
        &self.root_bits[i * self.roots..(i + 1) * self.roots]
    }

    /// For every executable or par the assignment mentions through a signal, error or
    /// correlation key: whether assignment `i` shows it failing (§6.8 refinement).
    /// The result replaces the contents of `out` (a buffer reused across assignments).
    pub(crate) fn failures(&self, index: &Index<'g>, i: usize, out: &mut Vec<(NodeId, bool)>) {
        let assignment = self.assignment(i);
        out.clear();
        for (node, keys) in self.node_keys.iter() {
            let mut mentioned = false;
            let mut failed = false;
            let mut signals_present = false;
            let mut signal_total = 0u64;
            for pos in keys {
                let slot = &self.layout.keys[*pos];
                let present = assignment[slot.offset] != 0;
                let counts = &assignment[slot.offset + 1..slot.offset + 1 + slot.width()];
                match slot.key.source {
                    ControlSource::Error => {
                        mentioned = true;
                        failed |= present && counts.iter().any(|c| *c > 0);
                    }
                    ControlSource::Signal => {
                        mentioned = true;
                        if present {
                            signals_present = true;
                            signal_total += counts.iter().map(|c| u64::from(*c)).sum::<u64>();
                        }
                    }
                    ControlSource::Group if is_correlation_key(index, &slot.key) => {
                        mentioned = true;
                        let negative = ["quorum_unreachable", "no_satisfier"]
                            .iter()
                            .filter_map(|l| slot.label_index(l))
                            .any(|l| present && counts[l] > 0);
                        failed |= negative;
                    }
                    ControlSource::Group => {}
                }
            }
            failed |= signals_present && signal_total == 0;
            if mentioned {
                out.push((node, failed));
            }
        }
    }
}
