//! Enumeration of a check's dimensions (§6.4 steps 6–7): the product with conflicting
//! combinations skipped, the ceiling count, and the correlation filter.

use super::ceiling::{ASSIGNMENT_LIMIT, Ceiling};
use super::dim::{Dim, entries};
use super::expansion::Expansion;
use super::program::{JoinLabels, Layout, Program};
use crate::domain::is_correlation_key;
use crate::index::Index;
use crate::nodeset::NodeId;

/// Enumeration steps allowed before a check is declared too large (guards against hangs
/// when shared keys make most combinations conflict).
pub(crate) const STEP_BUDGET: usize = ASSIGNMENT_LIMIT * 256;

/// A par's correlation as a filter on assignments: the ops of its positive and negative
/// predicates, and where its `joined`/`raced` key lives in the check's assignments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filter {
    pub(crate) par: NodeId,
    positive: usize,
    negative: usize,
    key: Option<CorrelationKey>,
}

/// A correlation key's position and offset, with its join labels.
#[derive(Debug, Clone, Copy)]
struct CorrelationKey {
    position: usize,
    offset: usize,
    labels: JoinLabels,
}

/// The filter of `par`'s correlation over `layout`.
pub(crate) fn filter(
    index: &Index,
    layout: &Layout,
    par: NodeId,
    positive: usize,
    negative: usize,
) -> Filter {
    let key = (layout.keys.iter().enumerate())
        .find(|(_, s)| s.key.node == par && is_correlation_key(index, &s.key))
        .map(|(position, slot)| CorrelationKey {
            position,
            offset: slot.offset,
            labels: slot.join_labels(),
        });
    Filter {
        par,
        positive,
        negative,
        key,
    }
}

impl Filter {
    /// Only non-zero labels constrain: a positive count needs the positive predicate, a
    /// negative count the negative one.
    pub(crate) fn holds(&self, assignment: &[u32], values: &[bool]) -> bool {
        let Some(key) = &self.key else {
            return true;
        };
        if assignment[key.offset] == 0 {
            return true;
        }
        let counts = &assignment[key.offset + 1..];
        (!JoinLabels::any_counted(&key.labels.positive, counts) || values[self.positive])
            && (!JoinLabels::any_counted(&key.labels.negative, counts) || values[self.negative])
    }
}

/// What the visitor of an enumeration wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    Continue,
    Stop,
}

/// Buffers an enumeration works in, kept between checks.
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    assignment: Vec<u32>,
    /// Per key: the level whose candidate wrote it (`usize::MAX`: none).
    owner: Vec<usize>,
    /// Keys written, per level: `written[starts[level]..]` belong to `level`.
    written: Vec<usize>,
    starts: Vec<usize>,
    next: Vec<usize>,
    values: Vec<bool>,
    filters: Vec<Filter>,
}

/// Whether two dimensions can assign the same key (then combinations may conflict and the
/// space can only be counted by enumerating it).
pub(crate) fn may_conflict(layout: &Layout, dims: &[Dim], buffers: &mut Buffers) -> bool {
    let used_by = &mut buffers.owner;
    used_by.clear();
    used_by.resize(layout.keys.len(), usize::MAX);
    for (d, dim) in dims.iter().enumerate() {
        for candidate in dim.iter() {
            for (k, _) in entries(layout, candidate) {
                match used_by[k] {
                    usize::MAX => used_by[k] = d,
                    other if other != d => return true,
                    _ => {}
                }
            }
        }
    }
    false
}

/// The steps [`enumerate`] takes over dimensions that share no key (every candidate of a
/// level is tried under every combination of the levels above), saturating.
pub(crate) fn steps(dims: &[Dim]) -> usize {
    let mut combinations = 1usize;
    let mut total = 0usize;
    for dim in dims {
        combinations = combinations.saturating_mul(dim.len());
        total = total.saturating_add(combinations);
    }
    total
}

/// A prepared check, as enumeration reads it.
pub(crate) struct Check<'a, 'g> {
    pub(crate) expansion: &'a Expansion<'g>,
    pub(crate) program: &'a Program,
    pub(crate) filters: &'a [Filter],
    pub(crate) dims: &'a [Dim],
    /// No two dimensions assign the same key (see [`may_conflict`]): no combination can
    /// conflict, so candidates are written without checking.
    pub(crate) exclusive: bool,
}

/// Enumerates the product of `dims`, skipping conflicting combinations, counting them
/// against the ceiling, filtering by the correlations of non-aggregated pars, and handing
/// each kept assignment with its evaluated predicates to `visit`.
pub(crate) fn enumerate(
    check: Check,
    buffers: &mut Buffers,
    visit: &mut dyn FnMut(&[u32], &[bool]) -> Next,
) -> Result<(), Ceiling> {
    let Check {
        expansion,
        program,
        filters,
        dims,
        exclusive,
    } = check;
    let layout = &expansion.layout;
    let Buffers {
        assignment,
        owner,
        written,
        starts,
        next,
        values,
        filters: scalar_filters,
    } = buffers;
    scalar_filters.clear();
    scalar_filters.extend(
        filters
            .iter()
            .filter(|f| f.key.is_some_and(|k| !expansion.aggregate[k.position])),
    );
    let mut sink = Sink {
        program,
        filters: scalar_filters,
        produced: 0,
        values,
        visit,
    };
    assignment.clear();
    assignment.resize(layout.stride, 0);
    if dims.is_empty() {
        sink.emit(assignment)?;
        return Ok(());
    }
    owner.clear();
    owner.resize(layout.keys.len(), usize::MAX);
    written.clear();
    starts.clear();
    starts.resize(dims.len(), 0);
    next.clear();
    next.resize(dims.len(), 0);
    let mut level = 0usize;
    let mut steps = 0usize;
    loop {
        if next[level] == dims[level].len() {
            if level == 0 {
                break;
            }
            level -= 1;
            undo(layout, assignment, owner, written, starts[level]);
            continue;
        }
        let candidate = &dims[level][next[level]];
        next[level] += 1;
        steps += 1;
        if steps > STEP_BUDGET {
            return Err(Ceiling);
        }
        let conflict = !exclusive
            && entries(layout, candidate).any(|(k, counts)| {
                owner[k] != usize::MAX && {
                    let offset = layout.keys[k].offset;
                    assignment[offset] != 1
                        || assignment[offset + 1..offset + 1 + counts.len()] != *counts
                }
            });
        if conflict {
            continue;
        }
        starts[level] = written.len();
        for (k, counts) in entries(layout, candidate) {
            if exclusive || owner[k] == usize::MAX {
                owner[k] = level;
                written.push(k);
                let offset = layout.keys[k].offset;
                assignment[offset] = 1;
                assignment[offset + 1..offset + 1 + counts.len()].copy_from_slice(counts);
            }
        }
        if level + 1 == dims.len() {
            let next_step = sink.emit(assignment)?;
            undo(layout, assignment, owner, written, starts[level]);
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
struct Sink<'a> {
    program: &'a Program,
    filters: &'a [Filter],
    produced: usize,
    values: &'a mut Vec<bool>,
    visit: &'a mut dyn FnMut(&[u32], &[bool]) -> Next,
}

impl Sink<'_> {
    fn emit(&mut self, assignment: &[u32]) -> Result<Next, Ceiling> {
        self.produced += 1;
        if self.produced > ASSIGNMENT_LIMIT {
            return Err(Ceiling);
        }
        self.program.evaluate(assignment, self.values);
        let keep = self
            .filters
            .iter()
            .all(|f| f.holds(assignment, self.values));
        if !keep {
            return Ok(Next::Continue);
        }
        Ok((self.visit)(assignment, self.values))
    }
}

/// Clears the keys written since `from` (one level's candidate).
fn undo(
    layout: &Layout,
    assignment: &mut [u32],
    owner: &mut [usize],
    written: &mut Vec<usize>,
    from: usize,
) {
    for k in written.drain(from..) {
        owner[k] = usize::MAX;
        let slot = &layout.keys[k];
        assignment[slot.offset..slot.offset + 1 + slot.width()].fill(0);
    }
}
