//! Enumeration of a check's dimensions (§6.4 steps 6–7): the product with conflicting
//! combinations skipped, the ceiling count, and the correlation filter.

use super::dims::{Dim, Filter, entries};
use super::program::{Layout, Program};
use super::{ASSIGNMENT_LIMIT, Ceiling, Expansion};
use crate::domain::is_correlation_key;
use crate::index::Index;

/// Enumeration steps allowed before a check is declared too large (guards against hangs
/// when shared keys make most combinations conflict).
const STEP_BUDGET: usize = ASSIGNMENT_LIMIT * 256;

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

/// What the visitor of an enumeration wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    Continue,
    Stop,
}

/// Whether two dimensions can assign the same key (then combinations may conflict and the
/// space can only be counted by enumerating it).
pub(crate) fn may_conflict(layout: &Layout, dims: &[Dim]) -> bool {
    let mut seen = vec![false; layout.keys.len()];
    for dim in dims {
        let mut mine = vec![false; layout.keys.len()];
        for candidate in dim.iter() {
            for (k, _) in entries(layout, candidate) {
                mine[k] = true;
            }
        }
        for (k, used) in mine.iter().enumerate() {
            if *used {
                if seen[k] {
                    return true;
                }
                seen[k] = true;
            }
        }
    }
    false
}

/// Enumerates the product of `dims`, skipping conflicting combinations, counting them
/// against the ceiling, filtering by the correlations of non-aggregated pars, and handing
/// each kept assignment with its evaluated predicates to `visit`.
pub(crate) fn enumerate(
    index: &Index,
    expansion: &Expansion,
    program: &Program,
    filters: &[Filter],
    dims: &[Dim],
    visit: &mut dyn FnMut(&[u32], &[bool]) -> Next,
) -> Result<(), Ceiling> {
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
        produced: 0,
        values: Vec::new(),
        visit,
    };
    let mut assignment = vec![0u32; layout.stride];
    if dims.is_empty() {
        sink.emit(&assignment)?;
        return Ok(());
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
        let conflict = entries(layout, candidate).any(|(k, counts)| {
            owner[k] != usize::MAX && {
                let offset = layout.keys[k].offset;
                assignment[offset] != 1
                    || assignment[offset + 1..offset + 1 + counts.len()] != *counts
            }
        });
        if conflict {
            continue;
        }
        for (k, counts) in entries(layout, candidate) {
            if owner[k] == usize::MAX {
                owner[k] = level;
                written[level].push(k);
                let offset = layout.keys[k].offset;
                assignment[offset] = 1;
                assignment[offset + 1..offset + 1 + counts.len()].copy_from_slice(counts);
            }
        }
        if level + 1 == dims.len() {
            let next_step = sink.emit(&assignment)?;
            undo(layout, &mut assignment, &mut owner, &mut written[level]);
            if next_step == Next::Stop {
                return Ok(());
            }
        } else {
            level += 1;
            next[level] = 0;
        }
    }
    Ok(())
}

/// Counts enumerated assignments against the ceiling, applies the correlation filter of
/// non-aggregated pars, and forwards kept ones to the visitor.
struct Sink<'a, 'g> {
    layout: &'a Layout<'g>,
    index: &'a Index<'g>,
    program: &'a Program,
    filters: Vec<&'a Filter>,
    produced: usize,
    values: Vec<bool>,
    visit: &'a mut dyn FnMut(&[u32], &[bool]) -> Next,
}

impl Sink<'_, '_> {
    fn emit(&mut self, assignment: &[u32]) -> Result<Next, Ceiling> {
        self.produced += 1;
        if self.produced > ASSIGNMENT_LIMIT {
            return Err(Ceiling);
        }
        self.program
            .evaluate(self.layout, assignment, &mut self.values);
        let keep = self
            .filters
            .iter()
            .all(|f| correlation_holds(self.layout, self.index, f, assignment, &self.values));
        if !keep {
            return Ok(Next::Continue);
        }
        Ok((self.visit)(assignment, &self.values))
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
