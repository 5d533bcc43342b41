//! Enumeration of a check's dimensions (§6.4 steps 6–7): the product with conflicting
//! combinations skipped, the ceiling count, and the correlation filter.

use super::dims::{Filter, Partial};
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
