//! Executable leaves in the incremental evaluator: matching a recorded dispatch to the leaf
//! that asked for it, crash retries, and applying a settled outcome to facts and state.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use trellis_graph::{OutputChannel, WorkerErrorCode, WorkerOutcome, WriteBinding};

use super::facts::Channel;
use super::machine::{FrameKind, Machine, Outcome, invariant, shape_error};
use super::plan::{ExecPlan, NodeId, PlanKind};
use super::value::PValue;
use crate::decision::{PromotedValue, TraceDecision};
use crate::error::ReplayError;
use crate::history::{ExecutionId, ExecutionRecord, VoidReason};
use crate::outcome::channel_label;
use crate::paths::select;

impl Machine {
    /// Attaches a recorded dispatch to the waiting leaf of its occurrence.
    pub(super) fn dispatch(
        &mut self,
        node: NodeId,
        record: &ExecutionRecord,
    ) -> Result<(), ReplayError> {
        let id = record.execution;
        let key = (node, record.occurrence.map_indices.clone());
        let Some(&frame_id) = self.leaves.get(&key) else {
            return Err(ReplayError::UnexpectedDispatch(id));
        };
        let frame = self.frame_mut(frame_id);
        let order = frame.order.clone();
        let FrameKind::Leaf(leaf) = &mut frame.kind else {
            return Err(invariant("leaf index points at a group"));
        };
        if leaf.running.is_some() {
            return Err(ReplayError::UnexpectedDispatch(id));
        }
        if record.attempt != leaf.attempt {
            return Err(ReplayError::AttemptMismatch {
                execution: id,
                expected: leaf.attempt,
                actual: record.attempt,
            });
        }
        if record.input != leaf.input {
            return Err(ReplayError::InputMismatch(id));
        }
        if record.dispatched_at <= leaf.after {
            return Err(ReplayError::DispatchedTooEarly(id));
        }
        leaf.running = Some(id);
        self.awaiting.remove(&order);
        self.running.insert(id, frame_id);
        Ok(())
    }

    /// Settles a running execution: a retry for an allowed crash, else the outcome flows on.
    /// Executions of abandoned subtrees may still settle (a race with their void); that
    /// changes nothing.
    pub(super) fn settle(
        &mut self,
        execution: ExecutionId,
        at: u64,
        outcome: &WorkerOutcome,
    ) -> Result<(), ReplayError> {
        let Some(frame_id) = self.running.remove(&execution) else {
            return match self.voiding.remove(&execution) {
                Some(_) => Ok(()),
                None => Err(ReplayError::InvalidTransition(execution)),
            };
        };
        let plan = Arc::clone(&self.plan);
        let frame = self.frame_mut(frame_id);
        let node = frame.node;
        let order = frame.order.clone();
        let PlanKind::Exec(exec) = &plan.node(node).kind else {
            return Err(invariant("leaf without executable node"));
        };
        let FrameKind::Leaf(leaf) = &mut frame.kind else {
            return Err(invariant("running index points at a group"));
        };
        let retry = outcome.error_code() == Some(WorkerErrorCode::Crash)
            && u64::from(leaf.attempt) < exec.attempts;
        if retry {
            leaf.attempt += 1;
            leaf.running = None;
            leaf.after = at;
            self.awaiting.insert(order, frame_id);
            return Ok(());
        }
        let leaf_frame = self.take(frame_id);
        self.leaves.remove(&(node, leaf_frame.indices.clone()));
        let done = leaf_frame.ready.max(at);
        self.apply_outcome(exec, node, execution, outcome, &leaf_frame)?;
        self.propagate(leaf_frame.parent, Outcome::Continue(done))
    }

    /// Records the void of an abandoned execution, checking the reducer asked for it.
    pub(super) fn void(
        &mut self,
        execution: ExecutionId,
        at: u64,
        reason: VoidReason,
    ) -> Result<(), ReplayError> {
        match self.voiding.get(&execution) {
            Some((cutoff, expected)) if at > *cutoff && reason == *expected => {
                self.voiding.remove(&execution);
                Ok(())
            }
            _ => Err(ReplayError::UnexpectedVoid(execution)),
        }
    }

    fn apply_outcome(
        &mut self,
        exec: &ExecPlan,
        node: NodeId,
        execution: ExecutionId,
        outcome: &WorkerOutcome,
        leaf: &super::machine::Frame,
    ) -> Result<(), ReplayError> {
        let channel = match outcome {
            WorkerOutcome::Error { code, .. } => {
                self.facts
                    .set_outcome(node, &leaf.indices, Some(*code), None);
                None
            }
            WorkerOutcome::Verified { output, .. } => Some(Channel {
                output: output.clone(),
                diagnostic: None,
                signals: BTreeMap::new(),
            }),
            WorkerOutcome::Verifier {
                output,
                signals,
                diagnostic,
                ..
            } => Some(Channel {
                output: output.clone(),
                diagnostic: Some(diagnostic.clone()),
                signals: signals.clone(),
            }),
        };
        let name = self.plan.node(node).name.clone();
        let mut written = Vec::new();
        if let Some(channel) = channel {
            self.facts
                .set_outcome(node, &leaf.indices, None, Some(channel));
            for (binding, source) in &exec.writes {
                let value = self
                    .read_channel(binding, *source, &leaf.indices)
                    .ok_or_else(|| ReplayError::MissingOutputPath {
                        execution,
                        node: name.clone(),
                        path: channel_label(binding),
                    })?;
                let scope = self.scope_mut(leaf.parent)?;
                scope
                    .state
                    .set(&binding.target, PValue::from_json(&value))
                    .map_err(|()| shape_error(&name, &binding.target))?;
                scope.writes.insert(binding.target.clone());
                written.push(PromotedValue {
                    path: binding.target.clone(),
                    value,
                });
            }
        }
        if !written.is_empty() {
            self.trace.push(TraceDecision::Promote {
                node: name.clone(),
                map_indices: leaf.indices.clone(),
                values: written,
            });
        }
        self.trace.push(TraceDecision::Continue {
            node: name,
            map_indices: leaf.indices.clone(),
        });
        Ok(())
    }

    /// The value a write binding copies, read at the source node's own map depth.
    fn read_channel(
        &self,
        binding: &WriteBinding,
        source: Option<NodeId>,
        indices: &[u32],
    ) -> Option<Value> {
        let source = source?;
        let depth = self.plan.node(source).map_depth.min(indices.len());
        let channel = self
            .facts
            .get(source, &indices[..depth])?
            .channel
            .as_ref()?;
        let path = &binding.value.path;
        match binding.value.channel {
            OutputChannel::Out => select(&channel.output, path).cloned(),
            OutputChannel::Diagnostic => channel
                .diagnostic
                .as_ref()
                .and_then(|d| select(d, path))
                .cloned(),
            OutputChannel::Signal => path
                .segments()
                .first()
                .and_then(|field| channel.signals.get(field))
                .map(|label| Value::String(label.as_str().to_owned())),
        }
    }
}
