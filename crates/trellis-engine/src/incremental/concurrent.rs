//! Par and map frames in the incremental evaluator: entering every branch or item, joining as
//! completions arrive in ledger order, and abandoning losers and siblings of a terminal.

use std::sync::Arc;

use super::machine::{Flow, FrameId, FrameKind, Machine, Outcome, Scope, Slot, invariant};
use super::plan::{JoinPlan, PlanKind};
use super::value::PValue;
use crate::decision::{PromotedValue, TerminalResult};
use crate::error::ReplayError;
use crate::history::VoidReason;
use crate::paths::{promoted_write_paths, wrote};

impl Machine {
    fn fresh_slots(
        &mut self,
        parent: Option<(FrameId, usize)>,
        count: usize,
    ) -> Result<Vec<Slot>, ReplayError> {
        let state = self.scope_mut(parent)?.state.clone();
        Ok((0..count)
            .map(|_| Slot {
                scope: Scope::fresh(state.clone()),
                child: None,
                ended: None,
            })
            .collect())
    }

    pub(super) fn enter_par(
        &mut self,
        id: FrameId,
        parent: Option<(FrameId, usize)>,
    ) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let (node, ready) = (self.frame(id).node, self.frame(id).ready);
        let PlanKind::Par { branches, .. } = &plan.node(node).kind else {
            return Err(invariant("par frame without par node"));
        };
        let indices = self.frame(id).indices.clone();
        self.facts.clear_subtree(&plan, node, &indices);
        let slots = self.fresh_slots(parent, branches.len())?;
        self.frame_mut(id).kind = FrameKind::Par {
            slots,
            completed: Vec::new(),
            pending: 0,
        };
        for (index, branch) in branches.iter().enumerate() {
            let flow = self.enter(*branch, Some((id, index)), ready)?;
            self.par_record(id, index, flow)?;
        }
        self.par_check(id)
    }

    /// Notes how branch `index` went: still running, completed (counting for the join if a
    /// first-join's `when` holds on its facts), or ended in a terminal (never counts).
    fn par_record(&mut self, id: FrameId, index: usize, flow: Flow) -> Result<(), ReplayError> {
        let plan = Arc::clone(&self.plan);
        let frame = self.frame(id);
        let counts = match (&flow, &plan.node(frame.node).kind) {
            (Flow::Done(Outcome::Continue(_)), PlanKind::Par { join, .. }) => match join {
                JoinPlan::Count(_) => true,
                JoinPlan::First(whens) => whens
                    .get(index)
                    .is_some_and(|when| self.facts.holds(&plan, when, &frame.indices)),
            },
            _ => false,
        };
        let FrameKind::Par {
            slots,
            completed,
            pending,
        } = &mut self.frame_mut(id).kind
        else {
            return Err(invariant("par frame kind"));
        };
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| invariant("par slot out of range"))?;
        match flow {
            Flow::Suspended(child) => {
                slot.child = Some(child);
                *pending += 1;
            }
            Flow::Done(Outcome::Continue(at)) => {
                slot.ended = Some(at);
                if counts {
                    completed.push((at, index));
                }
            }
            Flow::Done(Outcome::Terminal(at, _)) => slot.ended = Some(at),
        }
        Ok(())
    }

    pub(super) fn par_child_done(
        &mut self,
        id: FrameId,
        index: usize,
        outcome: Outcome,
    ) -> Result<Flow, ReplayError> {
        if let FrameKind::Par { slots, pending, .. } = &mut self.frame_mut(id).kind {
            if let Some(slot) = slots.get_mut(index) {
                slot.child = None;
            }
            *pending = pending.saturating_sub(1);
        }
        self.par_record(id, index, Flow::Done(outcome))?;
        self.par_check(id)
    }

    /// Joins once enough branches completed, gives up once nothing is left running.
    fn par_check(&mut self, id: FrameId) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let frame = self.frame(id);
        let PlanKind::Par {
            branches,
            join,
            promoted,
        } = &plan.node(frame.node).kind
        else {
            return Err(invariant("par frame without par node"));
        };
        let required = match join {
            JoinPlan::Count(n) => *n,
            JoinPlan::First(_) => 1,
        };
        let FrameKind::Par {
            completed, pending, ..
        } = &frame.kind
        else {
            return Err(invariant("par frame kind"));
        };
        let (field, reached, unreachable) = match join {
            JoinPlan::First(_) => ("raced", "satisfied", "no_satisfier"),
            JoinPlan::Count(_) => ("joined", "reached", "quorum_unreachable"),
        };
        if completed.len() < required {
            if *pending > 0 {
                return Ok(Flow::Suspended(id));
            }
            let frame = self.take(id);
            let FrameKind::Par { slots, .. } = frame.kind else {
                return Err(invariant("par frame kind"));
            };
            let done = slots
                .iter()
                .filter_map(|s| s.ended)
                .fold(frame.ready, u64::max);
            self.facts.clear_subtree(&plan, frame.node, &frame.indices);
            self.facts
                .set_group(frame.node, &frame.indices, field, unreachable);
            self.trace_group(frame.node, &frame.indices, Vec::new());
            return Ok(Flow::Done(Outcome::Continue(done)));
        }
        let frame = self.take(id);
        let FrameKind::Par {
            slots,
            mut completed,
            ..
        } = frame.kind
        else {
            return Err(invariant("par frame kind"));
        };
        completed.sort_unstable();
        completed.truncate(required);
        let join_at = completed
            .iter()
            .map(|(at, _)| *at)
            .fold(frame.ready, u64::max);
        let is_winner = |index: usize| completed.iter().any(|(_, w)| *w == index);
        for (index, slot) in slots.iter().enumerate() {
            if is_winner(index) {
                continue;
            }
            if let Some(child) = slot.child {
                self.kill(child, join_at, VoidReason::ParallelJoin);
            }
            if let Some(branch) = branches.get(index) {
                self.facts.clear_subtree(&plan, *branch, &frame.indices);
            }
        }
        let name = &plan.node(frame.node).name;
        let target = self.scope_mut(frame.parent)?;
        let mut values = Vec::new();
        for (_, index) in &completed {
            let Some(slot) = slots.get(*index) else {
                return Err(invariant("par winner out of range"));
            };
            for path in promoted_write_paths(&slot.scope.writes, promoted) {
                let value = slot.scope.state.select(&path).cloned().ok_or_else(|| {
                    ReplayError::MissingStatePath {
                        node: name.clone(),
                        path: path.dotted(),
                    }
                })?;
                target
                    .state
                    .set(&path, value.clone())
                    .map_err(|()| super::machine::shape_error(name, &path))?;
                target.writes.insert(path.clone());
                values.push(PromotedValue {
                    path,
                    value: value.to_json(),
                });
            }
        }
        self.facts
            .set_group(frame.node, &frame.indices, field, reached);
        self.trace_group(frame.node, &frame.indices, values);
        Ok(Flow::Done(Outcome::Continue(join_at)))
    }

    pub(super) fn enter_map(
        &mut self,
        id: FrameId,
        parent: Option<(FrameId, usize)>,
        items: Arc<Vec<PValue>>,
    ) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let (node, ready) = (self.frame(id).node, self.frame(id).ready);
        let indices = self.frame(id).indices.clone();
        let PlanKind::Map {
            body, max_items, ..
        } = &plan.node(node).kind
        else {
            return Err(invariant("map frame without map node"));
        };
        self.facts.clear_subtree(&plan, node, &indices);
        if items.len() as u64 > *max_items {
            self.take(id);
            self.facts.set_group(node, &indices, "overflow", "overflow");
            self.trace_group(node, &indices, Vec::new());
            return Ok(Flow::Done(Outcome::Continue(ready)));
        }
        let slots = self.fresh_slots(parent, items.len())?;
        let count = items.len();
        self.frame_mut(id).kind = FrameKind::Map {
            items,
            slots,
            pending: 0,
        };
        // Items are all entered (their immediate progress is traced) even when one of them
        // ends in a terminal; the lowest index among such terminals wins.
        let mut terminal: Option<(usize, u64, TerminalResult)> = None;
        for index in 0..count {
            let flow = self.enter(*body, Some((id, index)), ready)?;
            let FrameKind::Map { slots, pending, .. } = &mut self.frame_mut(id).kind else {
                return Err(invariant("map frame kind"));
            };
            let slot = slots
                .get_mut(index)
                .ok_or_else(|| invariant("map slot out of range"))?;
            match flow {
                Flow::Suspended(child) => {
                    slot.child = Some(child);
                    *pending += 1;
                }
                Flow::Done(Outcome::Continue(at)) => slot.ended = Some(at),
                Flow::Done(Outcome::Terminal(at, result)) => {
                    slot.ended = Some(at);
                    if terminal.is_none() {
                        terminal = Some((index, at, result));
                    }
                }
            }
        }
        if let Some((index, at, result)) = terminal {
            return Ok(self.map_terminal(id, index, at, result));
        }
        self.map_check(id)
    }

    pub(super) fn map_child_done(
        &mut self,
        id: FrameId,
        index: usize,
        outcome: Outcome,
    ) -> Result<Flow, ReplayError> {
        let FrameKind::Map { slots, pending, .. } = &mut self.frame_mut(id).kind else {
            return Err(invariant("map frame kind"));
        };
        *pending = pending.saturating_sub(1);
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| invariant("map slot out of range"))?;
        slot.child = None;
        match outcome {
            Outcome::Continue(at) => {
                slot.ended = Some(at);
                self.map_check(id)
            }
            Outcome::Terminal(at, result) => Ok(self.map_terminal(id, index, at, result)),
        }
    }

    /// An item reached a terminal: every other item is abandoned and the terminal propagates.
    fn map_terminal(
        &mut self,
        id: FrameId,
        winner: usize,
        at: u64,
        result: TerminalResult,
    ) -> Flow {
        let frame = self.take(id);
        if let FrameKind::Map { slots, .. } = frame.kind {
            for (index, slot) in slots.into_iter().enumerate() {
                if let (true, Some(child)) = (index != winner, slot.child) {
                    self.kill(child, at, VoidReason::MapTerminal);
                }
            }
        }
        Flow::Done(Outcome::Terminal(at, result))
    }

    /// When every item completed: collects each promoted path written by all items, in input
    /// order, into an array of the parent scope.
    fn map_check(&mut self, id: FrameId) -> Result<Flow, ReplayError> {
        let FrameKind::Map { pending, .. } = &self.frame(id).kind else {
            return Err(invariant("map frame kind"));
        };
        if *pending > 0 {
            return Ok(Flow::Suspended(id));
        }
        let plan = Arc::clone(&self.plan);
        let frame = self.take(id);
        let FrameKind::Map { slots, .. } = frame.kind else {
            return Err(invariant("map frame kind"));
        };
        let node = plan.node(frame.node);
        let PlanKind::Map { promoted, .. } = &node.kind else {
            return Err(invariant("map frame without map node"));
        };
        let target = self.scope_mut(frame.parent)?;
        let mut values = Vec::new();
        for path in promoted {
            if !slots.iter().all(|s| wrote(&s.scope.writes, path)) {
                continue;
            }
            let mut collected = Vec::with_capacity(slots.len());
            for slot in &slots {
                let value = slot.scope.state.select(path).cloned().ok_or_else(|| {
                    ReplayError::MissingStatePath {
                        node: node.name.clone(),
                        path: path.dotted(),
                    }
                })?;
                collected.push(value);
            }
            let array = PValue::Array(Arc::new(collected));
            target
                .state
                .set(path, array.clone())
                .map_err(|()| super::machine::shape_error(&node.name, path))?;
            target.writes.insert(path.clone());
            values.push(PromotedValue {
                path: path.clone(),
                value: array.to_json(),
            });
        }
        let done = slots
            .iter()
            .filter_map(|s| s.ended)
            .fold(frame.ready, u64::max);
        self.facts
            .set_group(frame.node, &frame.indices, "overflow", "ok");
        self.trace_group(frame.node, &frame.indices, values);
        Ok(Flow::Done(Outcome::Continue(done)))
    }
}
