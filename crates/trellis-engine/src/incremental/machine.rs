//! The incremental evaluator: one live frame per group or executable being visited, resumed
//! when a child completes, so a change costs the depth of the tree plus the work it unblocks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use trellis_graph::{FieldPath, NodeName};

use super::facts::FactStore;
use super::plan::{NodeId, Plan, PlanKind};
use super::value::PValue;
use crate::decision::{PromotedValue, TerminalResult, TraceDecision};
use crate::error::ReplayError;
use crate::history::{ExecutionId, VoidReason};

pub(super) type FrameId = usize;

/// How a finished subtree ended, with the ledger position it ended at.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Continue(u64),
    Terminal(u64, TerminalResult),
}

/// The result of entering or resuming a frame.
pub(super) enum Flow {
    /// The subtree finished; its frame is already released.
    Done(Outcome),
    /// The subtree waits on executions; this is its frame.
    Suspended(FrameId),
}

/// A scope's state and the paths written in it since it was entered.
#[derive(Clone)]
pub(super) struct Scope {
    pub(super) state: PValue,
    pub(super) writes: BTreeSet<FieldPath>,
}

impl Scope {
    pub(super) fn fresh(state: PValue) -> Self {
        Self {
            state,
            writes: BTreeSet::new(),
        }
    }
}

/// A visit of a step or verifier: waiting to be dispatched, or running.
pub(super) struct Leaf {
    pub(super) attempt: u32,
    pub(super) input: serde_json::Value,
    pub(super) running: Option<ExecutionId>,
    /// The ledger position its dispatch must follow (reach, or the crash it retries).
    pub(super) after: u64,
}

/// A par branch or map item: its own scope, its live subtree, and how it ended.
pub(super) struct Slot {
    pub(super) scope: Scope,
    pub(super) child: Option<FrameId>,
    pub(super) ended: Option<u64>,
}

pub(super) enum FrameKind {
    Free,
    Leaf(Leaf),
    Seq {
        scope: Scope,
        next: usize,
        child: Option<FrameId>,
    },
    Choice {
        scope: Scope,
        child: Option<FrameId>,
    },
    Loop {
        scope: Scope,
        round: u64,
        child: Option<FrameId>,
    },
    Par {
        slots: Vec<Slot>,
        /// Completed branches that count for the join: (position, branch).
        completed: Vec<(u64, usize)>,
        pending: usize,
    },
    Map {
        items: Arc<Vec<PValue>>,
        slots: Vec<Slot>,
        pending: usize,
    },
}

pub(super) struct Frame {
    pub(super) node: NodeId,
    pub(super) parent: Option<(FrameId, usize)>,
    pub(super) indices: Vec<u32>,
    pub(super) item: Option<PValue>,
    pub(super) ready: u64,
    /// Slot path from the root: sorts leaves in authored pre-order.
    pub(super) order: Vec<u32>,
    pub(super) kind: FrameKind,
}

pub(super) struct Machine {
    pub(super) plan: Arc<Plan>,
    pub(super) facts: FactStore,
    pub(super) frames: Vec<Frame>,
    free: Vec<FrameId>,
    root_scope: Scope,
    pub(super) root_outcome: Option<Outcome>,
    /// Leaves waiting for a dispatch, in dispatch order.
    pub(super) awaiting: BTreeMap<Vec<u32>, FrameId>,
    /// The live leaf of each occurrence.
    pub(super) leaves: HashMap<(NodeId, Vec<u32>), FrameId>,
    pub(super) running: HashMap<ExecutionId, FrameId>,
    /// Running executions of abandoned subtrees: (deciding position, reason).
    pub(super) voiding: HashMap<ExecutionId, (u64, VoidReason)>,
    /// Trace decisions made at the latest ledger position.
    pub(super) trace: Vec<TraceDecision>,
}

pub(super) fn invariant(what: &'static str) -> ReplayError {
    ReplayError::Invariant(what)
}

impl Machine {
    pub(super) fn new(plan: Plan, root_state: PValue) -> Self {
        let nodes = plan.nodes.len();
        Self {
            plan: Arc::new(plan),
            facts: FactStore::new(nodes),
            frames: Vec::new(),
            free: Vec::new(),
            root_scope: Scope::fresh(root_state),
            root_outcome: None,
            awaiting: BTreeMap::new(),
            leaves: HashMap::new(),
            running: HashMap::new(),
            voiding: HashMap::new(),
            trace: Vec::new(),
        }
    }

    /// Enters the root at position 0.
    pub(super) fn start(&mut self) -> Result<(), ReplayError> {
        if let Flow::Done(outcome) = self.enter(0, None, 0)? {
            self.root_outcome = Some(outcome);
        }
        Ok(())
    }

    pub(super) fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id]
    }

    pub(super) fn frame_mut(&mut self, id: FrameId) -> &mut Frame {
        &mut self.frames[id]
    }

    pub(super) fn alloc(&mut self, frame: Frame) -> FrameId {
        match self.free.pop() {
            Some(id) => {
                self.frames[id] = frame;
                id
            }
            None => {
                self.frames.push(frame);
                self.frames.len() - 1
            }
        }
    }

    /// Releases a frame and returns its contents.
    pub(super) fn take(&mut self, id: FrameId) -> Frame {
        let placeholder = Frame {
            node: 0,
            parent: None,
            indices: Vec::new(),
            item: None,
            ready: 0,
            order: Vec::new(),
            kind: FrameKind::Free,
        };
        self.free.push(id);
        std::mem::replace(&mut self.frames[id], placeholder)
    }

    /// The scope a child at `parent` reads from and promotes into.
    pub(super) fn scope_mut(
        &mut self,
        parent: Option<(FrameId, usize)>,
    ) -> Result<&mut Scope, ReplayError> {
        let Some((id, slot)) = parent else {
            return Ok(&mut self.root_scope);
        };
        match &mut self.frames[id].kind {
            FrameKind::Seq { scope, .. }
            | FrameKind::Choice { scope, .. }
            | FrameKind::Loop { scope, .. } => Ok(scope),
            FrameKind::Par { slots, .. } | FrameKind::Map { slots, .. } => slots
                .get_mut(slot)
                .map(|s| &mut s.scope)
                .ok_or_else(|| invariant("slot out of range")),
            FrameKind::Leaf(_) | FrameKind::Free => Err(invariant("scope of a non-group")),
        }
    }

    /// Where a child entered under `parent` sits: its map indices, map item and order key.
    fn position(&self, parent: Option<(FrameId, usize)>) -> (Vec<u32>, Option<PValue>, Vec<u32>) {
        let Some((id, slot)) = parent else {
            return (Vec::new(), None, Vec::new());
        };
        let frame = &self.frames[id];
        let slot_key = u32::try_from(slot).unwrap_or(u32::MAX);
        let mut order = frame.order.clone();
        order.push(slot_key);
        match &frame.kind {
            FrameKind::Map { items, .. } => {
                let mut indices = frame.indices.clone();
                indices.push(slot_key);
                (indices, items.get(slot).cloned(), order)
            }
            _ => (frame.indices.clone(), frame.item.clone(), order),
        }
    }

    /// Enters `node` under `parent`, reached at `ready`, and runs it as far as it goes.
    pub(super) fn enter(
        &mut self,
        node: NodeId,
        parent: Option<(FrameId, usize)>,
        ready: u64,
    ) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let (indices, item, order) = self.position(parent);
        let new_frame = |kind| Frame {
            node,
            parent,
            indices: indices.clone(),
            item: item.clone(),
            ready,
            order: order.clone(),
            kind,
        };
        match &plan.node(node).kind {
            PlanKind::Exec(exec) => {
                let input = self.bind(&exec.inputs, parent, item.as_ref(), node)?;
                let leaf = Leaf {
                    attempt: 1,
                    input,
                    running: None,
                    after: ready,
                };
                let id = self.alloc(new_frame(FrameKind::Leaf(leaf)));
                self.awaiting.insert(order.clone(), id);
                self.leaves.insert((node, indices.clone()), id);
                Ok(Flow::Suspended(id))
            }
            PlanKind::Succeed { bindings } => {
                let output = self.bind(bindings, parent, item.as_ref(), node)?;
                Ok(Flow::Done(Outcome::Terminal(
                    ready,
                    TerminalResult::Succeeded { output },
                )))
            }
            PlanKind::Fail { reason } => Ok(Flow::Done(Outcome::Terminal(
                ready,
                TerminalResult::Failed {
                    reason: reason.clone(),
                },
            ))),
            PlanKind::Seq { .. } | PlanKind::Choice { .. } | PlanKind::Loop { .. } => {
                self.facts.clear_subtree(&plan, node, &indices);
                let scope = Scope::fresh(self.scope_mut(parent)?.state.clone());
                let kind = match &plan.node(node).kind {
                    PlanKind::Seq { .. } => FrameKind::Seq {
                        scope,
                        next: 0,
                        child: None,
                    },
                    PlanKind::Choice { .. } => FrameKind::Choice { scope, child: None },
                    _ => FrameKind::Loop {
                        scope,
                        round: 0,
                        child: None,
                    },
                };
                let id = self.alloc(new_frame(kind));
                match &plan.node(node).kind {
                    PlanKind::Seq { .. } => self.run_seq(id, ready),
                    PlanKind::Choice { .. } => self.run_choice(id, ready),
                    _ => self.run_loop(id, ready),
                }
            }
            PlanKind::Par { .. } => {
                let id = self.alloc(new_frame(FrameKind::Free));
                self.enter_par(id, parent)
            }
            PlanKind::Map { over, .. } => {
                let items = self.select_over(over, parent, item.as_ref(), node)?;
                let id = self.alloc(new_frame(FrameKind::Free));
                self.enter_map(id, parent, items)
            }
        }
    }

    /// Builds an executable's input or a succeed's output from the parent scope and item.
    fn bind(
        &mut self,
        bindings: &[trellis_graph::InputBinding],
        parent: Option<(FrameId, usize)>,
        item: Option<&PValue>,
        node: NodeId,
    ) -> Result<serde_json::Value, ReplayError> {
        if bindings.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        let name = self.plan.node(node).name.clone();
        let state = self.scope_mut(parent)?.state.clone();
        let mut out = serde_json::Value::Object(serde_json::Map::new());
        for binding in bindings {
            let value = select_data(&binding.value, &state, item, &name)?;
            crate::paths::set_path(&mut out, &binding.target, value.to_json(), &name)?;
        }
        Ok(out)
    }

    fn select_over(
        &mut self,
        over: &trellis_graph::DataSelector,
        parent: Option<(FrameId, usize)>,
        item: Option<&PValue>,
        node: NodeId,
    ) -> Result<Arc<Vec<PValue>>, ReplayError> {
        let name = self.plan.node(node).name.clone();
        let state = self.scope_mut(parent)?.state.clone();
        let value = select_data(over, &state, item, &name)?;
        value
            .as_array()
            .cloned()
            .ok_or(ReplayError::MapOverNotArray(name))
    }

    /// Resumes `id` after its child in `slot` finished.
    pub(super) fn child_done(
        &mut self,
        id: FrameId,
        slot: usize,
        outcome: Outcome,
    ) -> Result<Flow, ReplayError> {
        // A terminal ends a sequential group at once; pars and maps decide for themselves.
        if let Outcome::Terminal(..) = outcome
            && matches!(
                self.frames[id].kind,
                FrameKind::Seq { .. } | FrameKind::Choice { .. } | FrameKind::Loop { .. }
            )
        {
            self.take(id);
            return Ok(Flow::Done(outcome));
        }
        match &mut self.frames[id].kind {
            FrameKind::Seq { next, child, .. } => {
                *next = slot + 1;
                *child = None;
                let Outcome::Continue(at) = outcome else {
                    return Err(invariant("terminal in seq"));
                };
                self.run_seq(id, at)
            }
            FrameKind::Choice { child, .. } => {
                *child = None;
                let Outcome::Continue(at) = outcome else {
                    return Err(invariant("terminal in choice"));
                };
                self.finish_scoped(id, at, None)
            }
            FrameKind::Loop { child, .. } => {
                *child = None;
                let Outcome::Continue(at) = outcome else {
                    return Err(invariant("terminal in loop"));
                };
                self.loop_round_done(id, at)
            }
            FrameKind::Par { .. } => self.par_child_done(id, slot, outcome),
            FrameKind::Map { .. } => self.map_child_done(id, slot, outcome),
            FrameKind::Leaf(_) | FrameKind::Free => Err(invariant("child of a non-group")),
        }
    }

    /// Hands `outcome` of a released frame to its parent, and so on up while groups finish.
    pub(super) fn propagate(
        &mut self,
        mut parent: Option<(FrameId, usize)>,
        mut outcome: Outcome,
    ) -> Result<(), ReplayError> {
        loop {
            let Some((id, slot)) = parent else {
                self.root_outcome = Some(outcome);
                return Ok(());
            };
            let grandparent = self.frames[id].parent;
            match self.child_done(id, slot, outcome)? {
                Flow::Done(o) => {
                    parent = grandparent;
                    outcome = o;
                }
                Flow::Suspended(_) => return Ok(()),
            }
        }
    }

    pub(super) fn trace_group(
        &mut self,
        node: NodeId,
        indices: &[u32],
        values: Vec<PromotedValue>,
    ) {
        let name = self.plan.node(node).name.clone();
        if !values.is_empty() {
            self.trace.push(TraceDecision::Promote {
                node: name.clone(),
                map_indices: indices.to_vec(),
                values,
            });
        }
        self.trace.push(TraceDecision::Continue {
            node: name,
            map_indices: indices.to_vec(),
        });
    }

    /// Abandons a subtree: waiting leaves are forgotten, running ones are queued for voiding.
    pub(super) fn kill(&mut self, id: FrameId, cutoff: u64, reason: VoidReason) {
        let frame = self.take(id);
        match frame.kind {
            FrameKind::Leaf(leaf) => {
                self.leaves.remove(&(frame.node, frame.indices));
                match leaf.running {
                    Some(execution) => {
                        self.running.remove(&execution);
                        self.voiding.insert(execution, (cutoff, reason));
                    }
                    None => {
                        self.awaiting.remove(&frame.order);
                    }
                }
            }
            FrameKind::Seq { child, .. }
            | FrameKind::Choice { child, .. }
            | FrameKind::Loop { child, .. } => {
                if let Some(child) = child {
                    self.kill(child, cutoff, reason);
                }
            }
            FrameKind::Par { slots, .. } | FrameKind::Map { slots, .. } => {
                for child in slots.into_iter().filter_map(|s| s.child) {
                    self.kill(child, cutoff, reason);
                }
            }
            FrameKind::Free => {}
        }
    }
}

pub(super) fn shape_error(node: &NodeName, path: &FieldPath) -> ReplayError {
    ReplayError::StateShape {
        node: node.clone(),
        path: path.dotted(),
    }
}

/// Reads a data selector from a scope state or the innermost map item.
pub(super) fn select_data<'v>(
    selector: &trellis_graph::DataSelector,
    state: &'v PValue,
    item: Option<&'v PValue>,
    node: &NodeName,
) -> Result<&'v PValue, ReplayError> {
    let source = match selector {
        trellis_graph::DataSelector::State { .. } => Some(state),
        trellis_graph::DataSelector::Item { .. } => item,
    };
    source
        .and_then(|s| s.select(selector.path()))
        .ok_or_else(|| ReplayError::MissingStatePath {
            node: node.clone(),
            path: selector.path().dotted(),
        })
}
