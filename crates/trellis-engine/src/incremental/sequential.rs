//! Seq, choice and loop frames in the incremental evaluator: running children in order,
//! choosing a branch, repeating a body, and promoting into the parent scope when done.

use std::sync::Arc;

use trellis_graph::FieldPath;

use super::machine::{Flow, FrameId, FrameKind, Machine, Outcome, invariant, shape_error};
use super::plan::PlanKind;
use crate::decision::PromotedValue;
use crate::error::ReplayError;
use crate::paths::promoted_write_paths;

impl Machine {
    pub(super) fn run_seq(&mut self, id: FrameId, mut ready: u64) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let PlanKind::Seq { children, .. } = &plan.node(self.frames[id].node).kind else {
            return Err(invariant("seq frame without seq node"));
        };
        loop {
            let FrameKind::Seq { next, .. } = &self.frames[id].kind else {
                return Err(invariant("seq frame kind"));
            };
            let next = *next;
            let Some(child) = children.get(next) else {
                return self.finish_scoped(id, ready, None);
            };
            match self.enter(*child, Some((id, next)), ready)? {
                Flow::Done(Outcome::Continue(at)) => {
                    ready = at;
                    if let FrameKind::Seq { next, .. } = &mut self.frames[id].kind {
                        *next += 1;
                    }
                }
                Flow::Done(terminal) => {
                    self.take(id);
                    return Ok(Flow::Done(terminal));
                }
                Flow::Suspended(child) => {
                    if let FrameKind::Seq { child: slot, .. } = &mut self.frames[id].kind {
                        *slot = Some(child);
                    }
                    return Ok(Flow::Suspended(id));
                }
            }
        }
    }

    pub(super) fn run_choice(&mut self, id: FrameId, ready: u64) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let frame = &self.frames[id];
        let PlanKind::Choice {
            branches,
            otherwise,
            ..
        } = &plan.node(frame.node).kind
        else {
            return Err(invariant("choice frame without choice node"));
        };
        let selected = branches
            .iter()
            .enumerate()
            .find(|(_, (guard, _))| self.facts.holds(&plan, guard, &frame.indices))
            .map(|(slot, (_, node))| (slot, *node))
            .or(otherwise.map(|node| (branches.len(), node)));
        // No matching branch and no otherwise: the choice falls through unchanged.
        let Some((slot, branch)) = selected else {
            return self.finish_scoped(id, ready, None);
        };
        match self.enter(branch, Some((id, slot)), ready)? {
            Flow::Done(Outcome::Continue(at)) => self.finish_scoped(id, at, None),
            Flow::Done(terminal) => {
                self.take(id);
                Ok(Flow::Done(terminal))
            }
            Flow::Suspended(child) => {
                if let FrameKind::Choice { child: slot, .. } = &mut self.frames[id].kind {
                    *slot = Some(child);
                }
                Ok(Flow::Suspended(id))
            }
        }
    }

    pub(super) fn run_loop(&mut self, id: FrameId, mut ready: u64) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let PlanKind::Loop { body, rounds, .. } = &plan.node(self.frames[id].node).kind else {
            return Err(invariant("loop frame without loop node"));
        };
        loop {
            let FrameKind::Loop { round, .. } = &mut self.frames[id].kind else {
                return Err(invariant("loop frame kind"));
            };
            if *round >= *rounds {
                return self.finish_scoped(id, ready, Some("exhausted"));
            }
            *round += 1;
            match self.enter(*body, Some((id, 0)), ready)? {
                Flow::Done(Outcome::Continue(at)) => {
                    ready = at;
                    if self.converged(id) {
                        return self.finish_scoped(id, ready, Some("converged"));
                    }
                }
                Flow::Done(terminal) => {
                    self.take(id);
                    return Ok(Flow::Done(terminal));
                }
                Flow::Suspended(child) => {
                    if let FrameKind::Loop { child: slot, .. } = &mut self.frames[id].kind {
                        *slot = Some(child);
                    }
                    return Ok(Flow::Suspended(id));
                }
            }
        }
    }

    pub(super) fn loop_round_done(&mut self, id: FrameId, at: u64) -> Result<Flow, ReplayError> {
        if self.converged(id) {
            return self.finish_scoped(id, at, Some("converged"));
        }
        self.run_loop(id, at)
    }

    fn converged(&self, id: FrameId) -> bool {
        let frame = &self.frames[id];
        match &self.plan.node(frame.node).kind {
            PlanKind::Loop {
                until: Some(until), ..
            } => self.facts.holds(&self.plan, until, &frame.indices),
            _ => false,
        }
    }

    /// Finishes a seq, choice or loop: promotes its paths into the parent scope, sets the
    /// loop's `terminated` control, traces, and releases the frame.
    pub(super) fn finish_scoped(
        &mut self,
        id: FrameId,
        done: u64,
        terminated: Option<&'static str>,
    ) -> Result<Flow, ReplayError> {
        let plan = Arc::clone(&self.plan);
        let frame = self.take(id);
        let (FrameKind::Seq { scope, .. }
        | FrameKind::Choice { scope, .. }
        | FrameKind::Loop { scope, .. }) = frame.kind
        else {
            return Err(invariant("finish of a non-scoped frame"));
        };
        let node = plan.node(frame.node);
        let promoted: &[FieldPath] = match &node.kind {
            PlanKind::Seq { promoted, .. }
            | PlanKind::Choice { promoted, .. }
            | PlanKind::Loop { promoted, .. } => promoted,
            _ => &[],
        };
        let parent = self.scope_mut(frame.parent)?;
        let mut values = Vec::new();
        for path in promoted {
            if let Some(value) = scope.state.select(path) {
                parent
                    .state
                    .set(path, value.clone())
                    .map_err(|()| shape_error(&node.name, path))?;
                values.push(PromotedValue {
                    path: path.clone(),
                    value: value.to_json(),
                });
            }
        }
        parent
            .writes
            .extend(promoted_write_paths(&scope.writes, promoted));
        if let Some(label) = terminated {
            self.facts
                .set_group(frame.node, &frame.indices, "terminated", label);
        }
        self.trace_group(frame.node, &frame.indices, values);
        Ok(Flow::Done(Outcome::Continue(done)))
    }
}
