//! Merging alternative and branch effects: choice intersection, par scenario merge, and the
//! filter that keeps only promoted writes when effects leave a group.

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::FieldPath;

use crate::flow::{Effects, Flow, ParallelEffect, SPath, Ty, WriteFact, record_possible};
use crate::nodeset::{NodeId, NodeSet};
use crate::predicate::never;

/// The least common supertype of two comparable types (`None` when incomparable).
pub(crate) fn join_types(a: &Ty, b: &Ty) -> Option<Ty> {
    if a.is_subtype_of(b) {
        Some(b.clone())
    } else if b.is_subtype_of(a) {
        Some(a.clone())
    } else {
        None
    }
}

/// Joins facts for the same target; guaranteed paths are intersected.
pub(crate) fn join_facts(facts: &[&WriteFact]) -> Option<WriteFact> {
    let first = facts.first()?;
    let mut ty = first.ty.clone();
    let mut guaranteed = first.guaranteed.clone();
    let mut producers = first.producers.clone();
    for fact in &facts[1..] {
        producers.extend(fact.producers.iter().copied());
        ty = join_types(&ty, &fact.ty)?;
        guaranteed = guaranteed
            .into_iter()
            .filter_map(|(p, t)| {
                let other = fact.guaranteed.get(&p)?;
                join_types(&t, other).map(|j| (p, j))
            })
            .collect();
    }
    producers.sort_unstable();
    producers.dedup();
    Some(WriteFact {
        target: first.target.clone(),
        ty,
        guaranteed,
        producers,
    })
}

/// Possible writes of every alternative (contributing or not) are unioned.
fn union_possible(into: &mut BTreeMap<SPath, Vec<Ty>>, all: &[&Effects]) {
    for e in all {
        for (path, types) in &e.possible_writes {
            for ty in types {
                record_possible(into, path, ty);
            }
        }
    }
}

/// Choice merge over the alternatives that fall through (`contributing`); `all` are every
/// analysed alternative, for possible writes.
pub(crate) fn merge_choice<'g>(
    flow: &Flow,
    contributing: &[&Effects<'g>],
    all: &[&Effects<'g>],
) -> Effects<'g> {
    let mut merged = Effects::empty_failing(NodeSet::default());
    union_possible(&mut merged.possible_writes, all);
    let Some(first) = contributing.first() else {
        merged.exit_failed = flow.failed.clone();
        merged.falls_through = false;
        merged.completion = never();
        return merged;
    };
    merged.definite_nodes = first.definite_nodes.clone();
    for e in contributing {
        merged.definite_nodes.intersect_with(&e.definite_nodes);
        merged.unavailable_nodes.union_with(&e.unavailable_nodes);
        merged.exit_failed.union_with(&e.exit_failed);
        for (owner, nodes) in &e.conditional {
            merged
                .conditional
                .entry(*owner)
                .or_default()
                .union_with(nodes);
        }
    }
    for target in first.definite_writes.keys() {
        let facts: Option<Vec<&WriteFact>> = contributing
            .iter()
            .map(|e| e.definite_writes.get(target))
            .collect();
        if let Some(fact) = facts.and_then(|f| join_facts(&f)) {
            merged.definite_writes.insert(target.clone(), fact);
        }
    }
    for (node, writes) in &first.pending {
        let common: Vec<WriteFact> = writes
            .iter()
            .filter(|w| {
                contributing
                    .iter()
                    .all(|e| e.pending.iter().any(|(n, ws)| n == node && ws.contains(w)))
            })
            .cloned()
            .collect();
        if !common.is_empty() {
            merged.pending.push((*node, common));
        }
    }
    merged.parallel = first
        .parallel
        .iter()
        .filter(|p| contributing.iter().all(|e| e.parallel.contains(p)))
        .cloned()
        .collect();
    merged
}

/// The par merge rule: a fact held by the `providers` is definite iff in every scenario
/// fewer than `k` completing branches lack it.
pub(crate) struct Scenarios {
    pub(crate) sets: Vec<Vec<bool>>,
    pub(crate) required: usize,
}

impl Scenarios {
    /// Without any scenario (a first-join that can only settle by exhaustion) nothing is
    /// definite.
    pub(crate) fn definite(&self, provides: impl Fn(usize) -> bool) -> bool {
        !self.sets.is_empty()
            && self.sets.iter().all(|set| {
                let lacking = set
                    .iter()
                    .enumerate()
                    .filter(|(i, completes)| **completes && !provides(*i))
                    .count();
                lacking < self.required
            })
    }
}

/// Merges par branch effects by scenarios; the par node itself is added by the caller.
pub(crate) fn merge_par<'g>(
    flow: &Flow,
    branches: &[Effects<'g>],
    scenarios: &Scenarios,
) -> Effects<'g> {
    let mut merged = Effects::empty(flow);
    let all: Vec<&Effects> = branches.iter().collect();
    union_possible(&mut merged.possible_writes, &all);
    let mut candidates = NodeSet::default();
    for e in branches {
        candidates.union_with(&e.definite_nodes);
        merged.unavailable_nodes.union_with(&e.unavailable_nodes);
        merged.exit_failed.union_with(&e.exit_failed);
        for (owner, nodes) in &e.conditional {
            merged
                .conditional
                .entry(*owner)
                .or_default()
                .union_with(nodes);
        }
    }
    for node in candidates.iter() {
        if scenarios.definite(|i| branches[i].definite_nodes.contains(node)) {
            merged.definite_nodes.insert(node);
        }
    }
    let mut targets: Vec<&SPath> = branches
        .iter()
        .flat_map(|e| e.definite_writes.keys())
        .collect();
    targets.sort();
    targets.dedup();
    for target in targets {
        if !scenarios.definite(|i| branches[i].definite_writes.contains_key(target)) {
            continue;
        }
        let facts: Vec<&WriteFact> = branches
            .iter()
            .filter_map(|e| e.definite_writes.get(target))
            .collect();
        if let Some(fact) = join_facts(&facts) {
            merged.definite_writes.insert(target.clone(), fact);
        }
    }
    let mut pending_nodes: Vec<NodeId> = Vec::new();
    for e in branches {
        for (node, _) in &e.pending {
            if !pending_nodes.contains(node) {
                pending_nodes.push(*node);
            }
        }
    }
    for node in pending_nodes {
        let mut kept: Vec<WriteFact> = Vec::new();
        for e in branches {
            for (_, writes) in e.pending.iter().filter(|(n, _)| *n == node) {
                for w in writes {
                    let held = |i: usize| {
                        branches[i]
                            .pending
                            .iter()
                            .any(|(n, ws)| *n == node && ws.contains(w))
                    };
                    if !kept.contains(w) && scenarios.definite(held) {
                        kept.push(w.clone());
                    }
                }
            }
        }
        if !kept.is_empty() {
            merged.pending.push((node, kept));
        }
    }
    for e in branches {
        for effect in &e.parallel {
            if !merged.parallel.contains(effect)
                && scenarios.definite(|i| branches[i].parallel.contains(effect))
            {
                merged.parallel.push(effect.clone());
            }
        }
    }
    merged
}

/// The parallel definition effect of a par's own definite writes.
pub(crate) fn parallel_effect(
    par: NodeId,
    flow: &Flow,
    writes: &BTreeMap<SPath, WriteFact>,
) -> Option<Rc<ParallelEffect>> {
    if writes.is_empty() {
        return None;
    }
    let targets: Vec<SPath> = writes.keys().cloned().collect();
    let mut after = BTreeMap::clone(&flow.defined);
    for fact in writes.values() {
        crate::flow::write_defined(&mut after, fact);
    }
    let mut transitions = BTreeMap::new();
    let affected = flow
        .defined
        .keys()
        .chain(after.keys())
        .filter(|p| targets.iter().any(|t| t.overlaps(p)));
    for path in affected {
        transitions.insert(
            path.clone(),
            (flow.defined.get(path).cloned(), after.get(path).cloned()),
        );
    }
    Some(Rc::new(ParallelEffect {
        par,
        targets,
        transitions,
    }))
}

/// Keeps only writes under a promoted path: unpromoted writes never escape a group.
pub(crate) fn keep_promoted(effects: &mut Effects, promoted: &[FieldPath]) {
    let under = |path: &FieldPath| promoted.iter().any(|p| p.is_prefix_of(path));
    effects.definite_writes.retain(|t, _| under(t));
    effects.possible_writes.retain(|t, _| under(t));
    for (_, writes) in effects.pending.iter_mut() {
        writes.retain(|w| under(&w.target));
    }
    effects.pending.retain(|(_, writes)| !writes.is_empty());
    for effect in effects.parallel.iter_mut() {
        if effect.targets.iter().all(|t| under(t)) {
            continue;
        }
        let effect = Rc::make_mut(effect);
        effect.targets.retain(|t| under(t));
        let targets = effect.targets.clone();
        effect
            .transitions
            .retain(|p, _| targets.iter().any(|t| t.is_prefix_of(p)));
    }
    effects.parallel.retain(|e| !e.targets.is_empty());
}
