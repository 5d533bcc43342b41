//! What callers keep of a check's legal assignments: the root values of each (join outcomes),
//! or each alternative's reachability and failing nodes (choice residuals, §6.8), gathered
//! while enumerating so no assignment is stored.

use trellis_graph::ControlSource;

use super::program::{JoinLabels, KeySlot, Layout};
use crate::domain::is_correlation_key;
use crate::index::Index;
use crate::nodeset::NodeId;

/// The value of every root predicate on each legal assignment of one check.
pub(crate) struct Assignments {
    roots: usize,
    root_bits: Vec<bool>,
    count: usize,
}

impl Assignments {
    /// The single empty assignment of constant roots.
    pub(super) fn constant(values: Vec<bool>) -> Self {
        Self {
            roots: values.len(),
            root_bits: values,
            count: 1,
        }
    }

    pub(super) fn empty(roots: usize) -> Self {
        Self {
            roots,
            root_bits: Vec::new(),
            count: 0,
        }
    }

    /// Appends the root values of one assignment.
    pub(super) fn push(&mut self, roots: impl Iterator<Item = bool>) {
        self.root_bits.extend(roots);
        self.count += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The value of every root predicate on assignment `i`.
    pub(crate) fn root_values(&self, i: usize) -> &[bool] {
        &self.root_bits[i * self.roots..(i + 1) * self.roots]
    }
}

/// A choice check's legal assignments classified by the first root that holds on each
/// (`roots.len()`: none holds).
#[derive(Debug)]
pub(crate) struct Classified {
    /// Per alternative: whether some legal assignment selects it.
    pub(crate) reachable: Vec<bool>,
    /// Per alternative: the nodes some selecting assignment shows failing (with repeats).
    pub(crate) failing: Vec<Vec<NodeId>>,
    /// Every executable or par the check reads through a signal, error or correlation key
    /// (the same for every assignment: a key is read whether or not it is present).
    pub(crate) mentioned: Vec<NodeId>,
}

/// Where a key lives in an assignment and what it says about its node's failure.
#[derive(Debug, Clone, Copy)]
struct KeyInfo {
    node: NodeId,
    offset: usize,
    width: usize,
    role: Role,
}

/// What a key says about whether its node failed (§6.8), decided once per check rather than
/// once per assignment.
#[derive(Debug, Clone, Copy)]
enum Role {
    Error,
    Signal,
    /// A par's `joined`/`raced` key; a count of either negative label means it failed.
    Correlation {
        labels: JoinLabels,
    },
    Other,
}

impl Role {
    fn of(index: &Index, slot: &KeySlot) -> Self {
        match slot.key.source {
            ControlSource::Error => Role::Error,
            ControlSource::Signal => Role::Signal,
            ControlSource::Group if is_correlation_key(index, &slot.key) => Role::Correlation {
                labels: slot.join_labels(),
            },
            ControlSource::Group => Role::Other,
        }
    }
}

/// A check's keys ordered by node, then layout position, for failure classification.
pub(super) struct FailureKeys {
    keys: Vec<KeyInfo>,
}

impl FailureKeys {
    pub(super) fn new(index: &Index, layout: &Layout) -> Self {
        let mut keys: Vec<KeyInfo> = (layout.keys.iter())
            .map(|slot| KeyInfo {
                node: slot.key.node,
                offset: slot.offset,
                width: slot.width(),
                role: Role::of(index, slot),
            })
            .collect();
        keys.sort_by_key(|k| (k.node, k.offset));
        Self { keys }
    }

    fn groups(&self) -> impl Iterator<Item = &[KeyInfo]> + '_ {
        self.keys.chunk_by(|a, b| a.node == b.node)
    }

    /// The nodes the check reads through a signal, error or correlation key, ascending.
    pub(super) fn mentioned(&self) -> Vec<NodeId> {
        self.groups()
            .filter(|group| group.iter().any(|k| !matches!(k.role, Role::Other)))
            .map(|group| group[0].node)
            .collect()
    }

    /// Appends to `out` the mentioned nodes `assignment` shows failing (§6.8 refinement): an
    /// error counted, a negative join label counted, or signals read present with nothing
    /// counted (the verifier ran and failed).
    pub(super) fn failing(&self, assignment: &[u32], out: &mut Vec<NodeId>) {
        for group in self.groups() {
            let mut failed = false;
            let mut signals_present = false;
            let mut signal_total = 0u64;
            for key in group {
                let present = assignment[key.offset] != 0;
                let counts = &assignment[key.offset + 1..key.offset + 1 + key.width];
                match key.role {
                    Role::Error => failed |= present && counts.iter().any(|c| *c > 0),
                    Role::Signal => {
                        if present {
                            signals_present = true;
                            signal_total += counts.iter().map(|c| u64::from(*c)).sum::<u64>();
                        }
                    }
                    Role::Correlation { labels } => {
                        failed |= present && JoinLabels::any_counted(&labels.negative, counts);
                    }
                    Role::Other => {}
                }
            }
            if failed || (signals_present && signal_total == 0) {
                out.push(group[0].node);
            }
        }
    }
}
