//! The reference reducer: a full replay of the history over the graph on cloned contexts,
//! written for clarity rather than speed. The incremental reducer must agree with it.

mod context;
mod exec;
mod groups;
mod parallel;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;
use trellis_graph::{GraphNode, WorkerRef};

use crate::decision::{Dispatch, Reduction, TerminalResult, TraceDecision, Void};
use crate::error::ReplayError;
use crate::history::{
    ExecutionId, ExecutionRecord, History, NodeInstanceId, Occurrence, VoidReason,
};
use crate::outcome::outcome_fits;
use crate::paths::fill_root_state;
use crate::runnable::RunnableGraph;
use crate::shape::Shape;
use context::Context;

/// Reduces `history` from scratch: the reference semantics.
///
/// A par or map resolves at the first ledger position at which, with the history cut there,
/// its join is decided; the reference finds it by trying each settlement inside the group in
/// turn, so its cost grows with the history times those positions. It is meant for tests and
/// audits; the runtime uses [`crate::Reducer`] (or [`crate::Reducer::from_history`]).
pub fn reduce(
    graph: &RunnableGraph,
    initial_input: &Value,
    history: &History,
) -> Result<Reduction, ReplayError> {
    let graph = graph.spec();
    let shape = Shape::new(graph, initial_input);
    let mut replay = Replay::new(&shape, history)?;
    let mut root = Context::new(fill_root_state(graph.root.group_state(), initial_input));
    let at = At {
        indices: Vec::new(),
        item: None,
        ready: 0,
        cutoff: u64::MAX,
    };
    let status = replay.eval(&graph.root, &mut root, &at)?;
    replay.finish(status)
}

/// Where and when a node is evaluated.
#[derive(Debug, Clone)]
pub(super) struct At {
    /// Map indices of the node, outermost first.
    indices: Vec<u32>,
    /// The innermost map item, for `item` selectors.
    item: Option<Value>,
    /// Ledger position at which the node was reached.
    ready: u64,
    /// Records dispatched or settled after this position are not yet visible: used to freeze a
    /// losing par branch or map item at the moment it lost.
    cutoff: u64,
}

/// A dispatch before ids are allocated.
#[derive(Debug, Clone)]
struct DispatchRequest {
    occurrence: Occurrence,
    attempt: u32,
    worker: WorkerRef,
    input: Value,
}

/// What stops a subtree from completing: executions to start and executions still running
/// (or voided, which halts a losing subtree for good).
#[derive(Debug, Default)]
struct Blocked {
    dispatches: Vec<DispatchRequest>,
    waiting: Vec<ExecutionId>,
}

/// The result of evaluating a node.
#[derive(Debug)]
enum Status {
    /// Completed normally at this ledger position.
    Continue(u64),
    Pending(Blocked),
    /// Reached a terminal at this ledger position.
    Terminal(u64, TerminalResult),
}

impl Status {
    fn at(&self) -> Option<u64> {
        match self {
            Status::Continue(at) | Status::Terminal(at, _) => Some(*at),
            Status::Pending(_) => None,
        }
    }
}

/// Side effects collected while evaluating, kept only for evaluations that count.
#[derive(Debug, Default)]
struct Effects {
    trace: Vec<TraceDecision>,
    /// Executions that must be voided: (execution, position of the deciding event, reason).
    voids: Vec<(ExecutionId, u64, VoidReason)>,
}

struct Replay<'g, 'h> {
    shape: &'g Shape<'g>,
    history: &'h History,
    records: HashMap<Occurrence, Vec<&'h ExecutionRecord>>,
    /// How many records of each occurrence the evaluation has consumed.
    cursors: HashMap<Occurrence, usize>,
    effects: Effects,
    latest: u64,
}

impl<'g, 'h> Replay<'g, 'h> {
    fn new(shape: &'g Shape<'g>, history: &'h History) -> Result<Self, ReplayError> {
        validate(shape, history)?;
        let mut records: HashMap<Occurrence, Vec<&ExecutionRecord>> = HashMap::new();
        for record in &history.executions {
            records
                .entry(record.occurrence.clone())
                .or_default()
                .push(record);
        }
        Ok(Self {
            shape,
            history,
            records,
            cursors: HashMap::new(),
            effects: Effects::default(),
            latest: history.latest_position(),
        })
    }

    fn eval(
        &mut self,
        node: &'g GraphNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        match node {
            GraphNode::Step(step) => self.eval_exec(step, ctx, at),
            GraphNode::Verifier(v) => self.eval_exec(&v.exec, ctx, at),
            GraphNode::Seq(seq) => self.eval_seq(seq, ctx, at),
            GraphNode::Choice(choice) => self.eval_choice(choice, ctx, at),
            GraphNode::Loop(l) => self.eval_loop(l, ctx, at),
            GraphNode::Par(par) => self.eval_par(par, ctx, at),
            GraphNode::Map(map) => self.eval_map(map, ctx, at),
            GraphNode::Succeed(s) => {
                let output =
                    crate::paths::bind(&s.bindings, &ctx.state, at.item.as_ref(), &s.name)?;
                Ok(Status::Terminal(
                    at.ready,
                    TerminalResult::Succeeded { output },
                ))
            }
            GraphNode::Fail(f) => Ok(Status::Terminal(
                at.ready,
                TerminalResult::Failed {
                    reason: f.reason.as_str().to_owned(),
                },
            )),
        }
    }

    /// Records a trace decision made at `at` if it happened at the latest position.
    fn trace(&mut self, at: u64, decision: TraceDecision) {
        if at == self.latest {
            self.effects.trace.push(decision);
        }
    }

    /// Evaluates with a fresh effects buffer and returns the buffer alongside the status.
    fn isolated(
        &mut self,
        run: impl FnOnce(&mut Self) -> Result<Status, ReplayError>,
    ) -> Result<(Status, Effects), ReplayError> {
        let saved = std::mem::take(&mut self.effects);
        let status = run(self);
        let effects = std::mem::replace(&mut self.effects, saved);
        Ok((status?, effects))
    }

    fn absorb(&mut self, effects: Effects) {
        self.effects.trace.extend(effects.trace);
        self.effects.voids.extend(effects.voids);
    }

    /// Forgets what the evaluation consumed of `root`'s subtree under `prefix`, so that the
    /// subtree can be evaluated again (frozen at a cutoff).
    fn rewind(
        &mut self,
        saved: &HashMap<Occurrence, usize>,
        root: &trellis_graph::NodeName,
        prefix: &[u32],
    ) {
        let shape = self.shape;
        self.cursors.retain(|occ, _| {
            !(occ.map_indices.starts_with(prefix) && shape.in_subtree(root, occ.node.as_str()))
        });
        for (occ, cursor) in saved {
            if occ.map_indices.starts_with(prefix) && shape.in_subtree(root, occ.node.as_str()) {
                self.cursors.insert(occ.clone(), *cursor);
            }
        }
    }

    fn finish(self, status: Status) -> Result<Reduction, ReplayError> {
        // Every record must have been reached by some visit.
        for record in &self.history.executions {
            let consumed = self.cursors.get(&record.occurrence).copied().unwrap_or(0);
            let total = self.records.get(&record.occurrence).map_or(0, Vec::len);
            if consumed < total {
                let pending = self.records[&record.occurrence][consumed];
                return Err(ReplayError::UnconsumedExecution(pending.execution));
            }
        }
        // The earliest deciding event wins when an execution is claimed twice.
        let mut claims: BTreeMap<ExecutionId, (u64, VoidReason)> = BTreeMap::new();
        for (execution, at, reason) in &self.effects.voids {
            let claim = (*at, *reason);
            claims
                .entry(*execution)
                .and_modify(|c| *c = (*c).min(claim))
                .or_insert(claim);
        }
        let mut voids = Vec::new();
        for record in &self.history.executions {
            let claim = claims.get(&record.execution);
            match (record.state.void(), claim) {
                (Some((at, reason)), Some((cut, expected))) if at > *cut && reason == *expected => {
                }
                (Some(_), _) => {
                    return Err(ReplayError::UnexpectedVoid(record.execution));
                }
                (None, Some((_, reason))) if record.state.is_active() => voids.push(Void {
                    execution: record.execution,
                    reason: *reason,
                }),
                _ => {}
            }
        }
        let mut reduction = Reduction {
            trace: self.effects.trace,
            ..Reduction::default()
        };
        match status {
            Status::Pending(blocked) => {
                reduction.dispatches = allocate(self.history, blocked.dispatches)?;
            }
            Status::Terminal(_, result) if voids.is_empty() => reduction.terminal = Some(result),
            Status::Terminal(..) => {}
            Status::Continue(_) if voids.is_empty() => {
                reduction.terminal = Some(TerminalResult::Failed {
                    reason: crate::decision::UNHANDLED_REASON.to_owned(),
                });
            }
            Status::Continue(_) => {}
        }
        reduction.voids = voids;
        Ok(reduction)
    }
}

/// Gives dispatch requests ids that follow the history's largest ones.
fn allocate(
    history: &History,
    requests: Vec<DispatchRequest>,
) -> Result<Vec<Dispatch>, ReplayError> {
    let mut instances: HashMap<&Occurrence, NodeInstanceId> = HashMap::new();
    let mut last_execution = 0;
    let mut last_instance = 0;
    for record in &history.executions {
        instances.insert(&record.occurrence, record.node_instance);
        last_execution = last_execution.max(record.execution.0);
        last_instance = last_instance.max(record.node_instance.0);
    }
    let mut out = Vec::with_capacity(requests.len());
    for request in requests {
        let node_instance = match instances.get(&request.occurrence) {
            Some(known) => *known,
            None => {
                last_instance = last_instance
                    .checked_add(1)
                    .ok_or(ReplayError::IdOverflow)?;
                NodeInstanceId(last_instance)
            }
        };
        last_execution = last_execution
            .checked_add(1)
            .ok_or(ReplayError::IdOverflow)?;
        out.push(Dispatch {
            execution: ExecutionId(last_execution),
            node_instance,
            occurrence: request.occurrence,
            attempt: request.attempt,
            worker: request.worker,
            input: request.input,
        });
    }
    Ok(out)
}

/// Checks what can be checked without evaluating: nodes, depths, ids, positions, instances
/// and outcome kinds.
fn validate(shape: &Shape, history: &History) -> Result<(), ReplayError> {
    let mut ids = HashSet::new();
    let mut positions = HashSet::new();
    let mut instance_of: HashMap<&Occurrence, NodeInstanceId> = HashMap::new();
    let mut occurrence_of: HashMap<NodeInstanceId, &Occurrence> = HashMap::new();
    let mut last_dispatch = 0;
    for record in &history.executions {
        let id = record.execution;
        let Some((_, verifier)) = shape.executable(record.occurrence.node.as_str()) else {
            return Err(ReplayError::UnknownNode(id));
        };
        if record.occurrence.map_indices.len() != shape.map_depth(record.occurrence.node.as_str()) {
            return Err(ReplayError::WrongOccurrenceDepth(id));
        }
        if !ids.insert(id) {
            return Err(ReplayError::DuplicateExecution(id));
        }
        if record.dispatched_at <= last_dispatch {
            return Err(ReplayError::NotInDispatchOrder(id));
        }
        last_dispatch = record.dispatched_at;
        for position in record.positions() {
            if position == 0 || !positions.insert(position) || position < record.dispatched_at {
                return Err(ReplayError::InvalidPosition(id));
            }
        }
        let known_instance = *instance_of
            .entry(&record.occurrence)
            .or_insert(record.node_instance);
        let known_occurrence = *occurrence_of
            .entry(record.node_instance)
            .or_insert(&record.occurrence);
        if known_instance != record.node_instance || known_occurrence != &record.occurrence {
            return Err(ReplayError::NodeInstanceMismatch(id));
        }
        if let Some((_, outcome)) = record.state.settlement()
            && !outcome_fits(outcome, verifier)
        {
            return Err(ReplayError::OutcomeKindMismatch(id));
        }
    }
    Ok(())
}
