//! Dimensions of a check (scalar per-node outcomes and per-scope map aggregates) and their
//! enumeration with conflict skipping and the correlation filter (§6.4 steps 2–7).

use std::collections::{BTreeMap, BTreeSet};

use trellis_graph::GraphNode;

use super::ceiling::{ASSIGNMENT_LIMIT, Ceiling};
use super::dim::{Dim, Partial, entries, merge_into, push_entry};
use super::enumerate::Filter;
use super::expansion::Expansion;
use super::facts::FactsRef;
use super::options::{OptionBuffers, capped_product, node_options, node_options_owned};
use super::program::{Layout, Program};
use crate::domain::is_correlation_key;
use crate::index::Index;
use crate::nodeset::NodeId;
use crate::predicate::PredNode;

/// The dimensions of the check being prepared; dimensions are emptied and refilled rather
/// than dropped, so their buffers serve the next check.
#[derive(Debug, Default)]
pub(crate) struct DimList {
    dims: Vec<Dim>,
    len: usize,
}

impl DimList {
    fn clear(&mut self) {
        self.len = 0;
    }

    /// A new, empty dimension at the end of the list.
    fn next(&mut self) -> &mut Dim {
        if self.len == self.dims.len() {
            self.dims.push(Dim::default());
        }
        let dim = &mut self.dims[self.len];
        dim.clear();
        self.len += 1;
        dim
    }

    fn push(&mut self, dim: Dim) {
        *self.next() = dim;
    }

    pub(crate) fn as_slice(&self) -> &[Dim] {
        &self.dims[..self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [Dim] {
        &mut self.dims[..self.len]
    }
}

/// Buffers the scalar dimensions are built in, kept between checks.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// `(node, position)` of every scalar key.
    scalar: Vec<(NodeId, usize)>,
    keys: Vec<usize>,
    options: OptionBuffers,
}

/// Merges two partials over disjoint keys, keeping keys ascending.
fn merge(layout: &Layout, a: &[u32], b: &[u32]) -> Partial {
    let mut out = Vec::with_capacity(a.len() + b.len());
    merge_into(layout, a, b, &mut out);
    out
}

/// The product of several option lists, merged into single partials.
fn product(layout: &Layout, lists: &[Dim]) -> Result<Dim, Ceiling> {
    let mut out = Dim::default();
    out.push(&[]);
    for list in lists {
        capped_product(out.len(), list.len())?;
        let mut next = Dim::default();
        for base in out.iter() {
            for option in list.iter() {
                next.push_merged(layout, base, option);
            }
        }
        out = next;
    }
    Ok(out)
}

fn write(layout: &Layout, assignment: &mut [u32], partial: &[u32]) {
    for (k, counts) in entries(layout, partial) {
        let offset = layout.keys[k].offset;
        assignment[offset] = 1;
        assignment[offset + 1..offset + 1 + counts.len()].copy_from_slice(counts);
    }
}

/// `C(m + n, n)`, saturating.
fn multiset_count(m: u64, n: u64) -> u64 {
    let mut result: u64 = 1;
    for i in 1..=n {
        result = result.saturating_mul(m + i) / i;
        if result > ASSIGNMENT_LIMIT as u64 * 64 {
            return u64::MAX;
        }
    }
    result
}

pub(crate) struct DimBuilder<'a, 'g> {
    pub(crate) index: &'a Index<'g>,
    pub(crate) facts: FactsRef<'a, 'g>,
    pub(crate) expansion: &'a Expansion<'g>,
    pub(crate) program: &'a Program,
    pub(crate) filters: &'a [Filter],
    pub(crate) presence_ops: &'a BTreeMap<NodeId, usize>,
}

impl DimBuilder<'_, '_> {
    fn layout(&self) -> &Layout<'_> {
        &self.expansion.layout
    }

    fn owner(&self, pos: usize) -> Option<NodeId> {
        self.index
            .entry(self.expansion.layout.keys[pos].key.node)
            .map_owner
    }

    /// All dimensions of the check: scalar per node, then aggregate per scope component.
    pub(crate) fn build(&self, out: &mut DimList, scratch: &mut Scratch) -> Result<(), Ceiling> {
        let layout = self.layout();
        out.clear();
        scratch.scalar.clear();
        let mut scopes: BTreeMap<NodeId, BTreeMap<NodeId, Vec<usize>>> = BTreeMap::new();
        for (pos, slot) in layout.keys.iter().enumerate() {
            if self.expansion.aggregate[pos] {
                if let Some(scope) = self.owner(pos) {
                    scopes
                        .entry(scope)
                        .or_default()
                        .entry(slot.key.node)
                        .or_default()
                        .push(pos);
                }
            } else {
                scratch.scalar.push((slot.key.node, pos));
            }
        }
        // Nodes ascending, each node's positions ascending.
        scratch.scalar.sort_unstable();
        for run in scratch.scalar.chunk_by(|a, b| a.0 == b.0) {
            scratch.keys.clear();
            scratch.keys.extend(run.iter().map(|(_, pos)| *pos));
            node_options(layout, &scratch.keys, &mut scratch.options, out.next())?;
        }
        for (scope, nodes) in &scopes {
            for dim in self.scope_dims(*scope, nodes)? {
                out.push(dim);
            }
        }
        Ok(())
    }

    /// The correlation key position of each remembered par.
    fn correlation_key(&self, par: NodeId) -> Option<usize> {
        self.layout()
            .keys
            .iter()
            .position(|s| s.key.node == par && is_correlation_key(self.index, &s.key))
    }

    fn scope_dims(
        &self,
        scope: NodeId,
        nodes: &BTreeMap<NodeId, Vec<usize>>,
    ) -> Result<Vec<Dim>, Ceiling> {
        let layout = self.layout();
        let max_items = match self.index.node(scope) {
            GraphNode::Map(m) => m.max_items.get(),
            _ => 1,
        };
        let mut linked: Vec<Vec<usize>> = Vec::new();
        let mut scope_pars = BTreeSet::new();
        for par in &self.expansion.remembered {
            let aggregated = self
                .correlation_key(*par)
                .is_some_and(|k| self.expansion.aggregate[k] && self.owner(k) == Some(scope));
            if let (true, Some(c)) = (aggregated, self.facts.correlations.get(par)) {
                scope_pars.insert(*par);
                let mut keys = Vec::new();
                for part in &c.parts {
                    keys.extend(self.expansion.keys_of(part));
                }
                if let Some(k) = self.correlation_key(*par) {
                    keys.push(k);
                }
                linked.push(keys);
            }
        }
        let mut always = Vec::new();
        for node in &self.expansion.present {
            if let Some(p) = self.facts.presence.get(node).filter(|p| p.owner == scope) {
                let mut keys: Vec<usize> = self.expansion.keys_of(&p.pred).collect();
                keys.extend(nodes.get(node).into_iter().flatten().copied());
                linked.push(keys);
                if matches!(*p.pred, PredNode::Always) {
                    always.push(*node);
                }
            }
        }
        let shared: BTreeSet<usize> = linked
            .iter()
            .flatten()
            .copied()
            .filter(|k| !self.expansion.aggregate[*k])
            .collect();
        let mut shared_by_node: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
        for k in &shared {
            shared_by_node
                .entry(layout.keys[*k].key.node)
                .or_default()
                .push(*k);
        }
        let shared_lists = shared_by_node
            .values()
            .map(|keys| node_options_owned(layout, keys))
            .collect::<Result<Vec<_>, _>>()?;
        let shared_assignments = product(layout, &shared_lists)?;

        // Components: union-find over the scope's nodes.
        let members: Vec<NodeId> = nodes.keys().copied().collect();
        let position: crate::index::FastMap<NodeId, usize> =
            members.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut parent: Vec<usize> = (0..members.len()).collect();
        fn find(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        let mut groups: Vec<Vec<usize>> = linked
            .iter()
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| position.get(&layout.keys[*k].key.node).copied())
                    .collect()
            })
            .collect();
        groups.push(
            always
                .iter()
                .filter_map(|n| position.get(n).copied())
                .collect(),
        );
        for group in groups {
            for pair in group.windows(2) {
                let (a, b) = (find(&mut parent, pair[0]), find(&mut parent, pair[1]));
                parent[a.max(b)] = a.min(b);
            }
        }
        let mut components: BTreeMap<usize, Vec<NodeId>> = BTreeMap::new();
        for (i, node) in members.iter().enumerate() {
            let root = find(&mut parent, i);
            components.entry(root).or_default().push(*node);
        }
        let mut dims = Vec::new();
        for component in components.values() {
            let mut candidates = Dim::default();
            for shared in shared_assignments.iter() {
                let items = self.item_outcomes(component, nodes, &scope_pars, shared)?;
                self.aggregate(component, nodes, &items, max_items, shared, &mut candidates)?;
            }
            dims.push(candidates);
        }
        Ok(dims)
    }

    /// The distinct per-item outcomes of a component under one shared assignment.
    fn item_outcomes(
        &self,
        component: &[NodeId],
        nodes: &BTreeMap<NodeId, Vec<usize>>,
        scope_pars: &BTreeSet<NodeId>,
        shared: &[u32],
    ) -> Result<Vec<Partial>, Ceiling> {
        let layout = self.layout();
        let mut per_node: Vec<Vec<Option<Partial>>> = Vec::new();
        for node in component {
            let keys = nodes.get(node).map(Vec::as_slice).unwrap_or(&[]);
            let mut options: Vec<Option<Partial>> = node_options_owned(layout, keys)?
                .iter()
                .map(|option| Some(option.to_vec()))
                .collect();
            options.push(None);
            per_node.push(options);
        }
        let mut outcomes = BTreeSet::new();
        let mut choice = vec![0usize; per_node.len()];
        let mut visited = 0usize;
        let mut scratch = vec![0u32; layout.stride];
        let mut values = Vec::new();
        loop {
            visited += 1;
            if visited > ASSIGNMENT_LIMIT {
                return Err(Ceiling);
            }
            let picked: Vec<&Option<Partial>> = choice
                .iter()
                .enumerate()
                .map(|(i, c)| &per_node[i][*c])
                .collect();
            if picked.iter().any(|o| o.is_some()) {
                scratch.iter_mut().for_each(|v| *v = 0);
                write(layout, &mut scratch, shared);
                let mut item: Partial = Vec::new();
                for option in picked.iter().copied().flatten() {
                    write(layout, &mut scratch, option);
                    item = merge(layout, &item, option);
                }
                self.program.evaluate(&scratch, &mut values);
                let ran = |n: &NodeId| {
                    component
                        .iter()
                        .position(|c| c == n)
                        .is_some_and(|i| picked[i].is_some())
                };
                let presence_ok = component.iter().all(|n| match self.presence_ops.get(n) {
                    Some(op) => values[*op] == ran(n),
                    None => true,
                });
                let correlation_ok = self
                    .filters
                    .iter()
                    .filter(|f| scope_pars.contains(&f.par) && component.contains(&f.par))
                    .all(|f| self.correlation_holds(f, &scratch, &values));
                // An item that counted nothing (every node silent or successful without a
                // counted label) adds nothing to the aggregate and is dropped.
                let counted =
                    entries(layout, &item).any(|(_, counts)| counts.iter().any(|c| *c > 0));
                if presence_ok && correlation_ok && counted {
                    outcomes.insert(item);
                }
            }
            // Advance the odometer.
            let mut level = 0;
            loop {
                if level == choice.len() {
                    return Ok(outcomes.into_iter().collect());
                }
                choice[level] += 1;
                if choice[level] < per_node[level].len() {
                    break;
                }
                choice[level] = 0;
                level += 1;
            }
        }
    }

    /// Whether a par's correlation holds on `assignment` (only non-zero labels constrain).
    fn correlation_holds(&self, filter: &Filter, assignment: &[u32], values: &[bool]) -> bool {
        filter.holds(assignment, values)
    }

    /// Adds every multiset of 0..=max_items per-item outcomes, summed, as candidates. Distinct
    /// multisets count separately even when their sums coincide (the space is measured in
    /// multisets, as upstream).
    fn aggregate(
        &self,
        component: &[NodeId],
        nodes: &BTreeMap<NodeId, Vec<usize>>,
        items: &[Partial],
        max_items: u64,
        shared: &[u32],
        candidates: &mut Dim,
    ) -> Result<(), Ceiling> {
        let layout = self.layout();
        if multiset_count(max_items, items.len() as u64) > ASSIGNMENT_LIMIT as u64 {
            return Err(Ceiling);
        }
        let keys: BTreeSet<usize> = component
            .iter()
            .filter_map(|n| nodes.get(n))
            .flatten()
            .copied()
            .collect();
        let zero: BTreeMap<usize, Vec<u32>> = keys
            .iter()
            .map(|k| (*k, vec![0; layout.keys[*k].width()]))
            .collect();
        // Depth-first over (outcome index, remaining capacity), accumulating sums.
        let mut stack = vec![(0usize, max_items, zero)];
        while let Some((next, capacity, sums)) = stack.pop() {
            let mut summed: Partial = Vec::new();
            for (k, counts) in &sums {
                push_entry(&mut summed, *k, counts);
            }
            candidates.push_merged(layout, &summed, shared);
            if candidates.len() > ASSIGNMENT_LIMIT {
                return Err(Ceiling);
            }
            if capacity == 0 {
                continue;
            }
            for (i, item) in items.iter().enumerate().skip(next) {
                let mut more = sums.clone();
                for (k, counts) in entries(layout, item) {
                    if let Some(total) = more.get_mut(&k) {
                        for (t, c) in total.iter_mut().zip(counts) {
                            *t = t.saturating_add(*c);
                        }
                    }
                }
                stack.push((i, capacity - 1, more));
            }
        }
        Ok(())
    }
}
