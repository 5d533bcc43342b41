//! The legal assignments of one check, kept for callers that classify every assignment (choice
//! residuals, join outcomes), with what each says about node failures (§6.8).

use trellis_graph::ControlSource;

use super::program::{KeySlot, Layout};
use crate::domain::is_correlation_key;
use crate::index::Index;
use crate::nodeset::NodeId;

/// The legal assignments of one check and the value of each root predicate on them.
pub(crate) struct Assignments<'g> {
    stride: usize,
    roots: usize,
    data: Vec<u32>,
    root_bits: Vec<bool>,
    count: usize,
    /// The check's keys ordered by node, then layout position, for failure classification.
    keys: Vec<KeyInfo>,
    _graph: std::marker::PhantomData<&'g ()>,
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
    /// A par's `joined`/`raced` key; a count of either negative label means it failed
    /// (`u32::MAX` where the domain lacks the label).
    Correlation {
        negative: [u32; 2],
    },
    Other,
}

impl Role {
    fn of(index: &Index, slot: &KeySlot) -> Self {
        match slot.key.source {
            ControlSource::Error => Role::Error,
            ControlSource::Signal => Role::Signal,
            ControlSource::Group if is_correlation_key(index, &slot.key) => {
                let label = |l: &str| slot.label_index(l).map_or(u32::MAX, |at| at as u32);
                Role::Correlation {
                    negative: [label("quorum_unreachable"), label("no_satisfier")],
                }
            }
            ControlSource::Group => Role::Other,
        }
    }
}

impl<'g> Assignments<'g> {
    /// The single empty assignment of constant roots.
    pub(super) fn constant(values: Vec<bool>) -> Self {
        Self {
            stride: 0,
            roots: values.len(),
            data: Vec::new(),
            root_bits: values,
            count: 1,
            keys: Vec::new(),
            _graph: std::marker::PhantomData,
        }
    }

    /// No assignments yet over `layout`'s keys.
    pub(super) fn empty(index: &Index<'g>, layout: &Layout<'g>, roots: usize) -> Self {
        let mut keys: Vec<(NodeId, usize)> = (layout.keys.iter().enumerate())
            .map(|(pos, slot)| (slot.key.node, pos))
            .collect();
        keys.sort_unstable();
        let keys = keys
            .into_iter()
            .map(|(node, pos)| {
                let slot = &layout.keys[pos];
                KeyInfo {
                    node,
                    offset: slot.offset,
                    width: slot.width(),
                    role: Role::of(index, slot),
                }
            })
            .collect();
        Self {
            stride: layout.stride,
            roots,
            data: Vec::new(),
            root_bits: Vec::new(),
            count: 0,
            keys,
            _graph: std::marker::PhantomData,
        }
    }

    /// Appends one assignment with its root values.
    pub(super) fn push(&mut self, assignment: &[u32], roots: impl Iterator<Item = bool>) {
        self.data.extend_from_slice(assignment);
        self.root_bits.extend(roots);
        self.count += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn assignment(&self, i: usize) -> &[u32] {
        &self.data[i * self.stride..(i + 1) * self.stride]
    }

    /// The value of every root predicate on assignment `i`.
    pub(crate) fn root_values(&self, i: usize) -> &[bool] {
        &self.root_bits[i * self.roots..(i + 1) * self.roots]
    }

    /// Every executable or par the check reads through a signal, error or correlation key
    /// (the same for every assignment: a key is read whether or not it is present).
    pub(crate) fn mentioned(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.keys
            .chunk_by(|a, b| a.node == b.node)
            .filter(|group| group.iter().any(|k| !matches!(k.role, Role::Other)))
            .map(|group| group[0].node)
    }

    /// The mentioned nodes that assignment `i` shows failing (§6.8 refinement), appended to
    /// `out`.
    pub(crate) fn failing(&self, i: usize, out: &mut Vec<NodeId>) {
        let assignment = self.assignment(i);
        for group in self.keys.chunk_by(|a, b| a.node == b.node) {
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
                    Role::Correlation { negative } => {
                        failed |= present
                            && negative
                                .iter()
                                .any(|l| counts.get(*l as usize).is_some_and(|c| *c > 0));
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
