//! Pass 7, structural folds (§6.12): executions, peak concurrency and loop entries per node,
//! with checked arithmetic against the full-v1 ceilings.

use trellis_graph::limits::ceilings;
use trellis_graph::{DiagnosticCode, GraphNode};

use crate::diag::{Diags, Step, extend};
use crate::index::Index;
use crate::nodeset::NodeId;

/// A node's structural cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Fold {
    pub(crate) executions: u64,
    pub(crate) concurrency: u64,
    pub(crate) loop_entries: u64,
}

const LABELS: [(&str, u64); 3] = [
    ("node executions", ceilings::NODE_EXECUTIONS),
    ("peak concurrency", ceilings::PEAK_CONCURRENCY),
    ("loop entries", ceilings::LOOP_ENTRIES),
];

struct Folder<'a, 'g> {
    index: &'a Index<'g>,
    diags: &'a mut Diags,
}

/// Folds the whole graph; `None` when some ceiling was exceeded (and reported).
pub(crate) fn fold_root(index: &Index, diags: &mut Diags) -> Option<Fold> {
    if index.len() == 0 {
        return None;
    }
    Folder { index, diags }.fold(0)
}

impl Folder<'_, '_> {
    /// Checks the three totals (`None` = overflowed) against their ceilings at `field`, in
    /// the order executions, concurrency, loop entries; only the first one over its ceiling
    /// is reported (as the reference does, §13.5).
    fn bounded(
        &mut self,
        id: NodeId,
        field: &'static str,
        totals: [Option<u64>; 3],
    ) -> Option<Fold> {
        for ((label, ceiling), total) in LABELS.iter().zip(totals) {
            if total.is_none_or(|t| t > *ceiling) {
                self.diags.emit(
                    DiagnosticCode::CeilingExceeded,
                    format!("{label} exceed {ceiling}"),
                    extend(&self.index.path(id), &[Step::Field(field)]),
                    [],
                );
                return None;
            }
        }
        let [executions, concurrency, loop_entries] = totals;
        Some(Fold {
            executions: executions.unwrap_or(0),
            concurrency: concurrency.unwrap_or(0),
            loop_entries: loop_entries.unwrap_or(0),
        })
    }

    fn fold(&mut self, id: NodeId) -> Option<Fold> {
        let index = self.index;
        let entry = index.entry(id);
        let children = &entry.children;
        let folded = match entry.node {
            GraphNode::Step(_) | GraphNode::Verifier(_) => Some(Fold {
                executions: 1,
                concurrency: 1,
                loop_entries: 0,
            }),
            GraphNode::Succeed(_) | GraphNode::Fail(_) => Some(Fold::default()),
            GraphNode::Seq(_) | GraphNode::Par(_) => {
                let parts: Vec<Fold> = children.iter().filter_map(|c| self.fold(*c)).collect();
                let sum = |f: fn(&Fold) -> u64| {
                    parts.iter().try_fold(0u64, |acc, p| acc.checked_add(f(p)))
                };
                let is_par = matches!(entry.node, GraphNode::Par(_));
                let concurrency = if is_par {
                    sum(|f| f.concurrency)
                } else {
                    Some(parts.iter().map(|f| f.concurrency).max().unwrap_or(0))
                };
                let field = if is_par { "branches" } else { "children" };
                self.bounded(
                    id,
                    field,
                    [sum(|f| f.executions), concurrency, sum(|f| f.loop_entries)],
                )
            }
            GraphNode::Choice(choice) => {
                let branch_count = choice.branches.len();
                let mut parts: Vec<Fold> = Vec::new();
                let mut poisoned = false;
                for (i, child) in children.iter().enumerate() {
                    match self.fold(*child) {
                        Some(f) => parts.push(f),
                        None if i >= branch_count => poisoned = true,
                        None => {}
                    }
                }
                (!poisoned).then(|| Fold {
                    executions: parts.iter().map(|f| f.executions).max().unwrap_or(0),
                    concurrency: parts.iter().map(|f| f.concurrency).max().unwrap_or(0),
                    loop_entries: parts.iter().map(|f| f.loop_entries).max().unwrap_or(0),
                })
            }
            GraphNode::Map(m) => {
                let body = self.fold(children[0])?;
                let items = m.max_items.get();
                self.bounded(
                    id,
                    "maxItems",
                    [
                        items.checked_mul(body.executions),
                        items.checked_mul(body.concurrency),
                        items.checked_mul(body.loop_entries),
                    ],
                )
            }
            GraphNode::Loop(l) => {
                let body = self.fold(children[0])?;
                let iterations = l.max_iterations.get();
                let Some(entries) = body.loop_entries.checked_add(1) else {
                    self.diags.emit(
                        DiagnosticCode::CeilingExceeded,
                        "loop-entry arithmetic overflow",
                        extend(&self.index.path(id), &[Step::Field("maxIterations")]),
                        [],
                    );
                    return None;
                };
                self.bounded(
                    id,
                    "maxIterations",
                    [
                        iterations.checked_mul(body.executions),
                        Some(body.concurrency),
                        iterations.checked_mul(entries),
                    ],
                )
            }
        }?;
        self.backstop(id, folded)
    }

    /// The per-node ceiling check; unreachable after the checks above, kept as a guard.
    fn backstop(&mut self, id: NodeId, fold: Fold) -> Option<Fold> {
        let checks = [
            (
                fold.executions > ceilings::NODE_EXECUTIONS,
                "node executions exceed full-v1 ceiling",
            ),
            (
                fold.concurrency > ceilings::PEAK_CONCURRENCY,
                "peak concurrency exceeds full-v1 ceiling",
            ),
            (
                fold.loop_entries > ceilings::LOOP_ENTRIES,
                "loop entries exceed full-v1 ceiling",
            ),
        ];
        let mut ok = true;
        for (exceeded, message) in checks {
            if exceeded {
                ok = false;
                self.diags.emit(
                    DiagnosticCode::CeilingExceeded,
                    message,
                    extend(&self.index.path(id), &[Step::Field("kind")]),
                    [],
                );
            }
        }
        ok.then_some(fold)
    }
}
