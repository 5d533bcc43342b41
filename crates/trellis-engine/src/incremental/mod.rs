//! The incremental reducer: keeps the evaluation alive between changes so each recorded
//! dispatch, settlement or void costs the tree depth plus the work it unblocks, while deciding
//! exactly what [`crate::reduce`] decides for the same history.

mod concurrent;
mod facts;
mod leaf;
mod machine;
mod plan;
mod sequential;
mod value;

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use trellis_graph::WorkerOutcome;

use crate::decision::{Dispatch, Reduction, TerminalResult, Void};
use crate::error::ReplayError;
use crate::history::{
    ExecutionId, ExecutionRecord, History, NodeInstanceId, Occurrence, VoidReason,
};
use crate::paths::fill_root_state;
use crate::runnable::RunnableGraph;
use machine::{FrameKind, Machine, Outcome};
use plan::{NodeId, Plan, PlanKind};
use value::PValue;

/// What the reducer remembers of an execution it has seen.
struct Seen {
    occurrence: Occurrence,
    node_instance: NodeInstanceId,
    attempt: u32,
    dispatched_at: u64,
    /// Ledger position and kind of its end, once settled or voided.
    ended: Option<(u64, bool)>,
}

/// Reduces a run change by change. Feed it every ledger change in ledger order with
/// [`Reducer::apply`] and ask [`Reducer::decide`] whenever the runtime needs decisions; the
/// result always equals [`crate::reduce`] over the history applied so far.
///
/// After any error the reducer is poisoned: every later call reports that first error.
pub struct Reducer {
    machine: Machine,
    poisoned: Option<ReplayError>,
    last_position: u64,
    seen: HashMap<ExecutionId, Seen>,
    instances: HashMap<Occurrence, NodeInstanceId>,
    owners: HashMap<NodeInstanceId, Occurrence>,
    max_execution: u64,
    max_instance: u64,
    last_dispatch: u64,
}

impl Reducer {
    /// Starts a run: evaluates the graph over the initial input with an empty history.
    pub fn new(graph: &RunnableGraph, initial_input: &Value) -> Self {
        let graph = graph.spec();
        let plan = Plan::new(graph, initial_input);
        let state = fill_root_state(graph.root.group_state(), initial_input);
        let mut machine = Machine::new(plan, PValue::from_json(&state));
        let poisoned = machine.start().err();
        Self {
            machine,
            poisoned,
            last_position: 0,
            seen: HashMap::new(),
            instances: HashMap::new(),
            owners: HashMap::new(),
            max_execution: 0,
            max_instance: 0,
            last_dispatch: 0,
        }
    }

    /// Rebuilds the reducer for an existing history by applying its changes in ledger order.
    pub fn from_history(graph: &RunnableGraph, initial_input: &Value, history: &History) -> Self {
        let mut reducer = Self::new(graph, initial_input);
        // The history lists executions in dispatch order; anything else is refused up front.
        let mut previous = 0;
        for record in &history.executions {
            if record.dispatched_at <= previous && reducer.poisoned.is_none() {
                reducer.poisoned = Some(ReplayError::NotInDispatchOrder(record.execution));
            }
            previous = record.dispatched_at;
        }
        // (position, record index, change: 0 dispatch, 1 end)
        let mut changes = Vec::new();
        for (index, record) in history.executions.iter().enumerate() {
            changes.push((record.dispatched_at, index, 0));
            if let Some(at) = record.state.ended_at() {
                changes.push((at, index, 1));
            }
        }
        changes.sort_unstable();
        for (_, index, change) in changes {
            let record = &history.executions[index];
            let result = if change == 0 {
                reducer.guarded(|r| r.dispatch(record))
            } else {
                reducer.guarded(|r| r.end(record))
            };
            if result.is_err() {
                break;
            }
        }
        reducer
    }

    /// Applies the latest version of one execution record: a new id is a dispatch (and, if
    /// the record already ended, its end too); a known id must move from active to settled or
    /// voided. Re-applying an unchanged record is a no-op. Changes must arrive in ledger
    /// order: every new position exceeds all earlier ones.
    pub fn apply(&mut self, record: &ExecutionRecord) -> Result<(), ReplayError> {
        self.guarded(|r| match r.seen.get(&record.execution) {
            None => {
                r.dispatch(record)?;
                if record.state.is_active() {
                    Ok(())
                } else {
                    r.end(record)
                }
            }
            Some(seen) => {
                let same = seen.occurrence == record.occurrence
                    && seen.node_instance == record.node_instance
                    && seen.attempt == record.attempt
                    && seen.dispatched_at == record.dispatched_at;
                if !same {
                    return Err(ReplayError::InvalidTransition(record.execution));
                }
                let state = &record.state;
                match seen.ended {
                    None if state.is_active() => Ok(()),
                    None => r.end(record),
                    Some((at, true)) if state.settlement().is_some_and(|(a, _)| a == at) => Ok(()),
                    Some((at, false)) if state.void().is_some_and(|(a, _)| a == at) => Ok(()),
                    _ => Err(ReplayError::InvalidTransition(record.execution)),
                }
            }
        })
    }

    /// The decisions for everything applied so far.
    pub fn decide(&self) -> Result<Reduction, ReplayError> {
        if let Some(error) = &self.poisoned {
            return Err(error.clone());
        }
        let machine = &self.machine;
        let mut voids: Vec<(u64, ExecutionId, VoidReason)> = machine
            .voiding
            .iter()
            .map(|(execution, (_, reason))| {
                let at = self.seen.get(execution).map_or(0, |s| s.dispatched_at);
                (at, *execution, *reason)
            })
            .collect();
        voids.sort_unstable();
        let terminal = match (&machine.root_outcome, voids.is_empty()) {
            (Some(Outcome::Terminal(_, result)), true) => Some(result.clone()),
            (Some(Outcome::Continue(_)), true) => Some(TerminalResult::Failed {
                reason: crate::decision::UNHANDLED_REASON.to_owned(),
            }),
            _ => None,
        };
        Ok(Reduction {
            dispatches: self.dispatches()?,
            voids: voids
                .into_iter()
                .map(|(_, execution, reason)| Void { execution, reason })
                .collect(),
            terminal,
            trace: machine.trace.clone(),
        })
    }

    fn guarded(
        &mut self,
        change: impl FnOnce(&mut Self) -> Result<(), ReplayError>,
    ) -> Result<(), ReplayError> {
        if let Some(error) = &self.poisoned {
            return Err(error.clone());
        }
        let result = change(self);
        if let Err(error) = &result {
            self.poisoned = Some(error.clone());
        }
        result
    }

    /// Moves the ledger clock to `position`, which must be new and later than every other.
    fn advance(&mut self, position: u64, execution: ExecutionId) -> Result<(), ReplayError> {
        if position <= self.last_position {
            return Err(ReplayError::InvalidPosition(execution));
        }
        self.last_position = position;
        self.machine.trace.clear();
        Ok(())
    }

    fn dispatch(&mut self, record: &ExecutionRecord) -> Result<(), ReplayError> {
        let id = record.execution;
        let plan = std::sync::Arc::clone(&self.machine.plan);
        let node = plan
            .id(record.occurrence.node.as_str())
            .filter(|n| matches!(plan.node(*n).kind, PlanKind::Exec(_)))
            .ok_or(ReplayError::UnknownNode(id))?;
        if record.occurrence.map_indices.len() != plan.node(node).map_depth {
            return Err(ReplayError::WrongOccurrenceDepth(id));
        }
        if self.seen.contains_key(&id) {
            return Err(ReplayError::DuplicateExecution(id));
        }
        if record.dispatched_at <= self.last_dispatch {
            return Err(ReplayError::NotInDispatchOrder(id));
        }
        self.advance(record.dispatched_at, id)?;
        self.last_dispatch = record.dispatched_at;
        let instance = *self
            .instances
            .entry(record.occurrence.clone())
            .or_insert(record.node_instance);
        let owner = self
            .owners
            .entry(record.node_instance)
            .or_insert_with(|| record.occurrence.clone());
        if instance != record.node_instance || *owner != record.occurrence {
            return Err(ReplayError::NodeInstanceMismatch(id));
        }
        self.machine.dispatch(node, record)?;
        self.max_execution = self.max_execution.max(id.0);
        self.max_instance = self.max_instance.max(record.node_instance.0);
        self.seen.insert(
            id,
            Seen {
                occurrence: record.occurrence.clone(),
                node_instance: record.node_instance,
                attempt: record.attempt,
                dispatched_at: record.dispatched_at,
                ended: None,
            },
        );
        Ok(())
    }

    /// Applies the settlement or void a record carries.
    fn end(&mut self, record: &ExecutionRecord) -> Result<(), ReplayError> {
        let id = record.execution;
        if let Some((at, outcome)) = record.state.settlement() {
            self.advance(at, id)?;
            self.check_outcome_kind(record, outcome)?;
            self.mark_ended(id, at, true)?;
            return self.machine.settle(id, at, outcome);
        }
        if let Some((at, reason)) = record.state.void() {
            self.advance(at, id)?;
            self.mark_ended(id, at, false)?;
            return self.machine.void(id, at, reason);
        }
        Ok(())
    }

    fn mark_ended(&mut self, id: ExecutionId, at: u64, settled: bool) -> Result<(), ReplayError> {
        let seen = self
            .seen
            .get_mut(&id)
            .ok_or_else(|| machine::invariant("ended execution never dispatched"))?;
        if seen.ended.is_some() {
            return Err(ReplayError::InvalidTransition(id));
        }
        seen.ended = Some((at, settled));
        Ok(())
    }

    fn check_outcome_kind(
        &self,
        record: &ExecutionRecord,
        outcome: &WorkerOutcome,
    ) -> Result<(), ReplayError> {
        let plan = &self.machine.plan;
        let verifier = plan
            .id(record.occurrence.node.as_str())
            .map(|n| &plan.node(n).kind)
            .is_some_and(|k| matches!(k, PlanKind::Exec(e) if e.verifier));
        if crate::outcome::outcome_fits(outcome, verifier) {
            Ok(())
        } else {
            Err(ReplayError::OutcomeKindMismatch(record.execution))
        }
    }

    /// Every waiting leaf, in pre-order, with ids following the largest ones seen.
    fn dispatches(&self) -> Result<Vec<Dispatch>, ReplayError> {
        let machine = &self.machine;
        let mut next_execution = self.max_execution;
        let mut next_instance = self.max_instance;
        let mut fresh: HashSet<(NodeId, &[u32])> = HashSet::new();
        let mut out = Vec::with_capacity(machine.awaiting.len());
        for frame_id in machine.awaiting.values() {
            let frame = machine.frame(*frame_id);
            let (FrameKind::Leaf(leaf), PlanKind::Exec(exec)) =
                (&frame.kind, &machine.plan.node(frame.node).kind)
            else {
                return Err(machine::invariant("awaiting entry is not a leaf"));
            };
            let occurrence = Occurrence {
                node: machine.plan.node(frame.node).name.clone(),
                map_indices: frame.indices.clone(),
            };
            let node_instance = match self.instances.get(&occurrence) {
                Some(known) => *known,
                None => {
                    if !fresh.insert((frame.node, &frame.indices)) {
                        return Err(machine::invariant("occurrence awaited twice"));
                    }
                    next_instance = next_instance
                        .checked_add(1)
                        .ok_or(ReplayError::IdOverflow)?;
                    NodeInstanceId(next_instance)
                }
            };
            next_execution = next_execution
                .checked_add(1)
                .ok_or(ReplayError::IdOverflow)?;
            out.push(Dispatch {
                execution: ExecutionId(next_execution),
                node_instance,
                occurrence,
                attempt: leaf.attempt,
                worker: exec.worker.clone(),
                input: leaf.input.clone(),
            });
        }
        Ok(out)
    }
}
