//! Dimensions of a check (scalar per-node outcomes and per-scope map aggregates) and their
//! enumeration with conflict skipping and the correlation filter (§6.4 steps 2–7).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use trellis_graph::{ControlSource, GraphNode};

use super::program::{Layout, Program};
use super::{ASSIGNMENT_LIMIT, Ceiling, ControlFacts, Expansion};
use crate::domain::{ERROR_LABELS, is_correlation_key};
use crate::index::Index;
use crate::nodeset::NodeId;
use crate::predicate::PredNode;

/// A partial assignment: present keys (by layout position, ascending) with their counts.
pub(crate) type Partial = Vec<(usize, Vec<u32>)>;

/// A correlation filter: the par, the ops of its positive and negative predicates.
pub(crate) type Filter = (NodeId, usize, usize);

/// Enumeration steps allowed before a check is declared too large (guards against hangs
/// when shared keys make most combinations conflict).
const STEP_BUDGET: usize = ASSIGNMENT_LIMIT * 256;

fn capped_product(a: usize, b: usize) -> Result<usize, Ceiling> {
    a.checked_mul(b)
        .filter(|n| *n <= ASSIGNMENT_LIMIT)
        .ok_or(Ceiling)
}

/// Per-execution outcomes of one node over `keys` (§6.4 step 4): the joint signal/error
/// outcomes times one candidate per label of each group key.
fn node_options(layout: &Layout, keys: &[usize]) -> Result<Vec<Partial>, Ceiling> {
    let of = |source: ControlSource| -> Vec<usize> {
        keys.iter()
            .copied()
            .filter(|k| layout.keys[*k].key.source == source)
            .collect()
    };
    let (signals, errors, groups) = (
        of(ControlSource::Signal),
        of(ControlSource::Error),
        of(ControlSource::Group),
    );
    let mut options: Vec<Partial> = vec![Vec::new()];
    if !signals.is_empty() || !errors.is_empty() {
        let empty = |k: usize| (k, vec![0; layout.keys[k].width()]);
        let one = |k: usize, label: usize| {
            let mut counts = vec![0; layout.keys[k].width()];
            counts[label] = 1;
            (k, counts)
        };
        let mut successes: Vec<Partial> = vec![errors.iter().map(|k| empty(*k)).collect()];
        for k in &signals {
            let width = layout.keys[*k].width();
            capped_product(successes.len(), width)?;
            successes = successes
                .iter()
                .flat_map(|base| {
                    (0..width).map(move |label| {
                        let mut next = base.clone();
                        next.push(one(*k, label));
                        next
                    })
                })
                .collect();
        }
        let mut joint: Vec<Partial> = successes;
        for label in ERROR_LABELS {
            let mut outcome: Partial = signals.iter().map(|k| empty(*k)).collect();
            for k in &errors {
                match layout.keys[*k].label_index(label) {
                    Some(l) => outcome.push(one(*k, l)),
                    None => outcome.push(empty(*k)),
                }
            }
            joint.push(outcome);
        }
        for outcome in &mut joint {
            outcome.sort();
        }
        joint.dedup();
        if joint.len() > ASSIGNMENT_LIMIT {
            return Err(Ceiling);
        }
        options = joint;
    }
    for k in groups {
        let width = layout.keys[k].width();
        capped_product(options.len(), width)?;
        options = options
            .iter()
            .flat_map(|base| {
                (0..width).map(move |label| {
                    let mut next = base.clone();
                    let mut counts = vec![0; width];
                    counts[label] = 1;
                    next.push((k, counts));
                    next.sort();
                    next
                })
            })
            .collect();
    }
    Ok(options)
}

/// The product of several option lists, merged into single partials.
fn product(lists: &[Vec<Partial>]) -> Result<Vec<Partial>, Ceiling> {
    let mut out: Vec<Partial> = vec![Vec::new()];
    for list in lists {
        capped_product(out.len(), list.len())?;
        out = out
            .iter()
            .flat_map(|base| {
                list.iter().map(move |option| {
                    let mut next = base.clone();
                    next.extend(option.iter().cloned());
                    next.sort();
                    next
                })
            })
            .collect();
    }
    Ok(out)
}

fn write(layout: &Layout, assignment: &mut [u32], partial: &Partial) {
    for (k, counts) in partial {
        let offset = layout.keys[*k].offset;
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
    pub(crate) facts: &'a ControlFacts<'g>,
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
    pub(crate) fn build(&self) -> Result<Vec<Vec<Partial>>, Ceiling> {
        let layout = self.layout();
        let mut scalar: BTreeMap<NodeId, Vec<usize>> = BTreeMap::new();
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
                scalar.entry(slot.key.node).or_default().push(pos);
            }
        }
        let mut dims = Vec::new();
        for keys in scalar.values() {
            dims.push(node_options(layout, keys)?);
        }
        for (scope, nodes) in &scopes {
            dims.extend(self.scope_dims(*scope, nodes)?);
        }
        Ok(dims)
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
    ) -> Result<Vec<Vec<Partial>>, Ceiling> {
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
                let mut keys = self.expansion.keys_of(&p.pred);
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
            .map(|keys| node_options(layout, keys))
            .collect::<Result<Vec<_>, _>>()?;
        let shared_assignments = product(&shared_lists)?;

        // Components: union-find over the scope's nodes.
        let members: Vec<NodeId> = nodes.keys().copied().collect();
        let position: HashMap<NodeId, usize> =
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
            let mut candidates = BTreeSet::new();
            for shared in &shared_assignments {
                let items = self.item_outcomes(component, nodes, &scope_pars, shared)?;
                self.aggregate(component, nodes, &items, max_items, shared, &mut candidates)?;
            }
            dims.push(candidates.into_iter().collect());
        }
        Ok(dims)
    }

    /// The distinct per-item outcomes of a component under one shared assignment.
    fn item_outcomes(
        &self,
        component: &[NodeId],
        nodes: &BTreeMap<NodeId, Vec<usize>>,
        scope_pars: &BTreeSet<NodeId>,
        shared: &Partial,
    ) -> Result<Vec<Partial>, Ceiling> {
        let layout = self.layout();
        let mut per_node: Vec<Vec<Option<Partial>>> = Vec::new();
        for node in component {
            let keys = nodes.get(node).map(Vec::as_slice).unwrap_or(&[]);
            let mut options: Vec<Option<Partial>> =
                node_options(layout, keys)?.into_iter().map(Some).collect();
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
                    item.extend(option.iter().cloned());
                }
                self.program.evaluate(layout, &scratch, &mut values);
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
                    .filter(|f| scope_pars.contains(&f.0) && component.contains(&f.0))
                    .all(|f| self.correlation_holds(f, &scratch, &values));
                if presence_ok && correlation_ok {
                    item.sort();
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
        correlation_holds(self.layout(), self.index, filter, assignment, values)
    }

    /// Adds every multiset of 0..=max_items per-item outcomes, summed, as candidates.
    fn aggregate(
        &self,
        component: &[NodeId],
        nodes: &BTreeMap<NodeId, Vec<usize>>,
        items: &[Partial],
        max_items: u64,
        shared: &Partial,
        candidates: &mut BTreeSet<Partial>,
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
            let mut candidate: Partial = sums.iter().map(|(k, c)| (*k, c.clone())).collect();
            candidate.extend(shared.iter().cloned());
            candidate.sort();
            candidates.insert(candidate);
            if candidates.len() > ASSIGNMENT_LIMIT {
                return Err(Ceiling);
            }
            if capacity == 0 {
                continue;
            }
            for (i, item) in items.iter().enumerate().skip(next) {
                let mut more = sums.clone();
                for (k, counts) in item {
                    if let Some(total) = more.get_mut(k) {
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

/// Only non-zero labels constrain: a positive count needs the positive predicate, a
/// negative count the negative one.
pub(crate) fn correlation_holds(
    layout: &Layout,
    index: &Index,
    filter: &Filter,
    assignment: &[u32],
    values: &[bool],
) -> bool {
    let (par, positive, negative) = *filter;
    let Some(slot) = layout
        .keys
        .iter()
        .find(|s| s.key.node == par && is_correlation_key(index, &s.key))
    else {
        return true;
    };
    if assignment[slot.offset] == 0 {
        return true;
    }
    let count = |labels: [&str; 2]| {
        labels
            .iter()
            .filter_map(|l| slot.label_index(l))
            .map(|l| assignment[slot.offset + 1 + l])
            .sum::<u32>()
    };
    (count(["reached", "satisfied"]) == 0 || values[positive])
        && (count(["quorum_unreachable", "no_satisfier"]) == 0 || values[negative])
}

/// Enumerates the product of `dims`, skipping conflicting combinations and filtering by the
/// correlations of non-aggregated pars. Returns the flat assignments and their count.
pub(crate) fn enumerate(
    index: &Index,
    expansion: &Expansion,
    program: &Program,
    filters: &[Filter],
    dims: &[Vec<Partial>],
) -> Result<(Vec<u32>, usize), Ceiling> {
    let layout = &expansion.layout;
    let scalar_filters: Vec<&Filter> = filters
        .iter()
        .filter(|f| {
            layout
                .keys
                .iter()
                .position(|s| s.key.node == f.0 && is_correlation_key(index, &s.key))
                .is_some_and(|k| !expansion.aggregate[k])
        })
        .collect();
    let mut sink = Sink {
        layout,
        index,
        program,
        filters: scalar_filters,
        data: Vec::new(),
        produced: 0,
        kept: 0,
        values: Vec::new(),
    };
    let mut assignment = vec![0u32; layout.stride];
    if dims.is_empty() {
        sink.emit(&assignment)?;
        return Ok((sink.data, sink.kept));
    }
    let mut owner = vec![usize::MAX; layout.keys.len()];
    let mut written: Vec<Vec<usize>> = vec![Vec::new(); dims.len()];
    let mut next = vec![0usize; dims.len()];
    let mut level = 0usize;
    let mut steps = 0usize;
    loop {
        if next[level] == dims[level].len() {
            if level == 0 {
                break;
            }
            level -= 1;
            undo(layout, &mut assignment, &mut owner, &mut written[level]);
            continue;
        }
        let candidate = &dims[level][next[level]];
        next[level] += 1;
        steps += 1;
        if steps > STEP_BUDGET {
            return Err(Ceiling);
        }
        let conflict = candidate.iter().any(|(k, counts)| {
            owner[*k] != usize::MAX && {
                let offset = layout.keys[*k].offset;
                assignment[offset] != 1
                    || assignment[offset + 1..offset + 1 + counts.len()] != **counts
            }
        });
        if conflict {
            continue;
        }
        for (k, counts) in candidate {
            if owner[*k] == usize::MAX {
                owner[*k] = level;
                written[level].push(*k);
                let offset = layout.keys[*k].offset;
                assignment[offset] = 1;
                assignment[offset + 1..offset + 1 + counts.len()].copy_from_slice(counts);
            }
        }
        if level + 1 == dims.len() {
            sink.emit(&assignment)?;
            undo(layout, &mut assignment, &mut owner, &mut written[level]);
        } else {
            level += 1;
            next[level] = 0;
        }
    }
    Ok((sink.data, sink.kept))
}

/// Collects enumerated assignments, counting them against the ceiling and applying the
/// correlation filter of non-aggregated pars.
struct Sink<'a, 'g> {
    layout: &'a Layout<'g>,
    index: &'a Index<'g>,
    program: &'a Program,
    filters: Vec<&'a Filter>,
    data: Vec<u32>,
    produced: usize,
    kept: usize,
    values: Vec<bool>,
}

impl Sink<'_, '_> {
    fn emit(&mut self, assignment: &[u32]) -> Result<(), Ceiling> {
        self.produced += 1;
        if self.produced > ASSIGNMENT_LIMIT {
            return Err(Ceiling);
        }
        if !self.filters.is_empty() {
            self.program
                .evaluate(self.layout, assignment, &mut self.values);
            let keep = self
                .filters
                .iter()
                .all(|f| correlation_holds(self.layout, self.index, f, assignment, &self.values));
            if !keep {
                return Ok(());
            }
        }
        self.data.extend_from_slice(assignment);
        self.kept += 1;
        Ok(())
    }
}

fn undo(layout: &Layout, assignment: &mut [u32], owner: &mut [usize], written: &mut Vec<usize>) {
    for k in written.drain(..) {
        owner[k] = usize::MAX;
        let slot = &layout.keys[k];
        assignment[slot.offset..slot.offset + 1 + slot.width()]
            .iter_mut()
            .for_each(|v| *v = 0);
    }
}
