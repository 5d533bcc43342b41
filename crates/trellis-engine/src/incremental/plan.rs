//! The graph compiled for the incremental reducer: nodes in pre-order with integer ids,
//! subtree ranges, map depths, and guards resolved to node ids with their visibility decided.

use std::collections::HashMap;

use serde_json::Value;
use trellis_graph::{
    ControlSource, DataSelector, EnumSet, FieldName, FieldPath, GraphNode, GraphSpec, Guard,
    InputBinding, Join, NodeName, WorkerRef, WriteBinding,
};

use crate::shape::loop_rounds;

pub(super) type NodeId = usize;

pub(super) struct Plan {
    pub(super) nodes: Vec<PlanNode>,
    ids: HashMap<NodeName, NodeId>,
}

pub(super) struct PlanNode {
    pub(super) name: NodeName,
    pub(super) parent: Option<NodeId>,
    /// One past the last node of this node's subtree (pre-order numbering).
    pub(super) end: NodeId,
    /// Maps enclosing the node.
    pub(super) map_depth: usize,
    /// Direct children in authored order.
    children: Vec<NodeId>,
    is_par: bool,
    pub(super) kind: PlanKind,
}

pub(super) struct ExecPlan {
    pub(super) worker: WorkerRef,
    pub(super) attempts: u64,
    pub(super) verifier: bool,
    pub(super) inputs: Vec<InputBinding>,
    /// Each write binding with its source node, when the graph has one by that name.
    pub(super) writes: Vec<(WriteBinding, Option<NodeId>)>,
}

pub(super) enum JoinPlan {
    /// all / any / quorum: this many completed branches.
    Count(usize),
    /// first: the `when` guard, compiled once per branch (visibility differs per branch).
    First(Vec<CGuard>),
}

pub(super) enum PlanKind {
    Exec(ExecPlan),
    Seq {
        children: Vec<NodeId>,
        promoted: Vec<FieldPath>,
    },
    Choice {
        branches: Vec<(CGuard, NodeId)>,
        otherwise: Option<NodeId>,
        promoted: Vec<FieldPath>,
    },
    Loop {
        body: NodeId,
        rounds: u64,
        until: Option<CGuard>,
        promoted: Vec<FieldPath>,
    },
    Par {
        branches: Vec<NodeId>,
        join: JoinPlan,
        promoted: Vec<FieldPath>,
    },
    Map {
        body: NodeId,
        over: DataSelector,
        max_items: u64,
        promoted: Vec<FieldPath>,
    },
    Succeed {
        bindings: Vec<InputBinding>,
    },
    Fail {
        reason: String,
    },
}

/// A control selector resolved against the graph; `node` is `None` when the name is unknown or
/// the node runs concurrently with the guard (another branch of a shared par), so it reads
/// nothing.
pub(super) struct CSelector {
    pub(super) node: Option<NodeId>,
    pub(super) source: ControlSource,
    pub(super) field: Option<FieldName>,
}

pub(super) enum CGuard {
    In(CSelector, EnumSet),
    All(Vec<CGuard>),
    Any(Vec<CGuard>),
    Not(Box<CGuard>),
    KOfN(u64, Vec<CSelector>, EnumSet),
    KOfMap(u64, CSelector, EnumSet),
}

impl Plan {
    pub(super) fn new(graph: &GraphSpec, initial_input: &Value) -> Self {
        let mut plan = Plan {
            nodes: Vec::new(),
            ids: HashMap::new(),
        };
        let root = plan.number(&graph.root, None, 0);
        plan.compile(&graph.root, root, initial_input);
        plan
    }

    pub(super) fn id(&self, name: &str) -> Option<NodeId> {
        self.ids.get(name).copied()
    }

    pub(super) fn node(&self, id: NodeId) -> &PlanNode {
        &self.nodes[id]
    }

    /// First pass: ids, parents, subtree ends and map depths (kinds are placeholders).
    fn number(&mut self, node: &GraphNode, parent: Option<NodeId>, map_depth: usize) -> NodeId {
        let id = self.nodes.len();
        self.ids.insert(node.name().clone(), id);
        self.nodes.push(PlanNode {
            name: node.name().clone(),
            parent,
            end: id + 1,
            map_depth,
            children: Vec::new(),
            is_par: matches!(node, GraphNode::Par(_)),
            kind: PlanKind::Fail {
                reason: String::new(),
            },
        });
        let child_depth = map_depth + usize::from(matches!(node, GraphNode::Map(_)));
        let children = node
            .children()
            .into_iter()
            .map(|child| self.number(child, Some(id), child_depth))
            .collect();
        self.nodes[id].children = children;
        self.nodes[id].end = self.nodes.len();
        id
    }

    /// Second pass: node kinds, with names resolved now that every id is known.
    fn compile(&mut self, node: &GraphNode, id: NodeId, input: &Value) {
        let child_ids = self.nodes[id].children.clone();
        for (child, child_id) in node.children().into_iter().zip(&child_ids) {
            self.compile(child, *child_id, input);
        }
        let kind = match node {
            GraphNode::Step(s) => PlanKind::Exec(self.exec(s, false, id)),
            GraphNode::Verifier(v) => PlanKind::Exec(self.exec(&v.exec, true, id)),
            GraphNode::Seq(s) => PlanKind::Seq {
                children: child_ids,
                promoted: s.promoted_state_paths.clone(),
            },
            GraphNode::Choice(c) => PlanKind::Choice {
                branches: c
                    .branches
                    .iter()
                    .zip(&child_ids)
                    .map(|(b, child)| (self.guard(&b.when, id), *child))
                    .collect(),
                otherwise: c.otherwise.as_ref().and_then(|_| child_ids.last().copied()),
                promoted: c.promoted_state_paths.clone(),
            },
            GraphNode::Loop(l) => PlanKind::Loop {
                body: child_ids[0],
                rounds: loop_rounds(l, input),
                until: l.until.as_ref().map(|g| self.guard(g, id)),
                promoted: l.promoted_state_paths.clone(),
            },
            GraphNode::Par(p) => PlanKind::Par {
                join: match &p.join {
                    Join::All => JoinPlan::Count(child_ids.len()),
                    Join::Any => JoinPlan::Count(1),
                    Join::Quorum { count } => {
                        JoinPlan::Count(usize::try_from(count.get()).unwrap_or(usize::MAX))
                    }
                    Join::First { when } => {
                        JoinPlan::First(child_ids.iter().map(|b| self.guard(when, *b)).collect())
                    }
                },
                branches: child_ids,
                promoted: p.promoted_state_paths.clone(),
            },
            GraphNode::Map(m) => PlanKind::Map {
                body: child_ids[0],
                over: m.over.clone(),
                max_items: m.max_items.get(),
                promoted: m.promoted_state_paths.clone(),
            },
            GraphNode::Succeed(s) => PlanKind::Succeed {
                bindings: s.bindings.clone(),
            },
            GraphNode::Fail(f) => PlanKind::Fail {
                reason: f.reason.as_str().to_owned(),
            },
        };
        self.nodes[id].kind = kind;
    }

    /// An executable; a write source running concurrently with it reads as absent.
    fn exec(&self, step: &trellis_graph::StepNode, verifier: bool, id: NodeId) -> ExecPlan {
        ExecPlan {
            worker: step.worker.clone(),
            attempts: step.attempts.get(),
            verifier,
            inputs: step.input_bindings.clone(),
            writes: step
                .write_bindings
                .iter()
                .map(|w| {
                    let source = self
                        .id(w.value.node.as_str())
                        .filter(|s| !self.concurrent(id, *s));
                    (w.clone(), source)
                })
                .collect(),
        }
    }

    /// Compiles a guard evaluated at `location`.
    fn guard(&self, guard: &Guard, location: NodeId) -> CGuard {
        let sel = |s: &trellis_graph::ControlSelector| CSelector {
            node: self
                .id(s.name.as_str())
                .filter(|n| !self.concurrent(location, *n)),
            source: s.source,
            field: s.field.clone(),
        };
        match guard {
            Guard::In { value, labels } => CGuard::In(sel(value), labels.clone()),
            Guard::All { guards } => {
                CGuard::All(guards.iter().map(|g| self.guard(g, location)).collect())
            }
            Guard::Any { guards } => {
                CGuard::Any(guards.iter().map(|g| self.guard(g, location)).collect())
            }
            Guard::Not { guard } => CGuard::Not(Box::new(self.guard(guard, location))),
            Guard::KOfN {
                count,
                values,
                labels,
            } => CGuard::KOfN(
                count.get(),
                values.iter().map(sel).collect(),
                labels.clone(),
            ),
            Guard::KOfMap {
                count,
                value,
                labels,
            } => CGuard::KOfMap(count.get(), sel(value), labels.clone()),
        }
    }

    pub(super) fn contains(&self, ancestor: NodeId, node: NodeId) -> bool {
        ancestor <= node && node < self.nodes[ancestor].end
    }

    /// True when `a` and `b` sit in different branches of a par that encloses both: their
    /// facts are private to their branches until the join.
    fn concurrent(&self, a: NodeId, b: NodeId) -> bool {
        let mut lca = a;
        while !self.contains(lca, b) {
            match self.nodes[lca].parent {
                Some(p) => lca = p,
                None => return false,
            }
        }
        if lca == a || lca == b || !self.nodes[lca].is_par {
            return false;
        }
        let branches = &self.nodes[lca].children;
        let branch_of = |n: NodeId| branches.iter().position(|br| self.contains(*br, n));
        branch_of(a) != branch_of(b)
    }
}
