//! The control facts the dataflow walk records about join correlations and map presence, and
//! the borrowed view of them a check's expansion and dimensions read (the owning
//! `ControlFacts` in `mod.rs` also holds the check workspace built from those modules).

use super::resolved::GuardTable;
use crate::index::FastMap;
use crate::nodeset::NodeId;
use crate::predicate::Pred;

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

/// The recorded facts a check reads: `ControlFacts` without its workspace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FactsRef<'a, 'g> {
    pub(crate) correlations: &'a FastMap<NodeId, Correlation<'g>>,
    pub(crate) presence: &'a FastMap<NodeId, Presence<'g>>,
    pub(crate) guards: &'a GuardTable<'g>,
}
