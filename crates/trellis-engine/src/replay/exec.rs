//! Reference evaluation of steps and verifiers: matching a visit to its records (crash retries
//! included) and applying the settled outcome to controls, channels and state.

use std::collections::BTreeMap;

use serde_json::Value;
use trellis_graph::{ControlSource, OutputChannel, StepNode, WorkerErrorCode, WorkerOutcome};

use super::context::{Channel, Context};
use super::{At, Blocked, DispatchRequest, Replay, Status};
use crate::decision::{PromotedValue, TraceDecision};
use crate::error::ReplayError;
use crate::history::{ExecutionRecord, Occurrence};
use crate::outcome::channel_label;
use crate::paths::{bind, select, set_path};

impl<'g> Replay<'g, '_> {
    pub(super) fn eval_exec(
        &mut self,
        exec: &'g StepNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let occurrence = Occurrence {
            node: exec.name.clone(),
            map_indices: at.indices.clone(),
        };
        let input = bind(
            &exec.input_bindings,
            &ctx.state,
            at.item.as_ref(),
            &exec.name,
        )?;
        let records = self.records.get(&occurrence).cloned().unwrap_or_default();
        let mut cursor = self.cursors.get(&occurrence).copied().unwrap_or(0);
        let mut attempt: u32 = 1;
        // A record must be dispatched after the node was reached (or after the crash it retries).
        let mut reached = at.ready;
        loop {
            let visible = records.get(cursor).filter(|r| r.dispatched_at <= at.cutoff);
            let Some(record) = visible else {
                return Ok(Status::Pending(Blocked {
                    dispatches: vec![DispatchRequest {
                        occurrence,
                        attempt,
                        worker: exec.worker.clone(),
                        input,
                    }],
                    waiting: Vec::new(),
                }));
            };
            if record.attempt != attempt {
                return Err(ReplayError::AttemptMismatch {
                    execution: record.execution,
                    expected: attempt,
                    actual: record.attempt,
                });
            }
            if record.input != input {
                return Err(ReplayError::InputMismatch(record.execution));
            }
            if record.dispatched_at <= reached {
                return Err(ReplayError::DispatchedTooEarly(record.execution));
            }
            cursor += 1;
            self.cursors.insert(occurrence.clone(), cursor);
            let (settled_at, outcome) = match record.state.settlement() {
                Some((s, outcome)) if s <= at.cutoff => (s, outcome),
                _ => {
                    return Ok(Status::Pending(Blocked {
                        dispatches: Vec::new(),
                        waiting: vec![record.execution],
                    }));
                }
            };
            let retry = outcome.error_code() == Some(WorkerErrorCode::Crash)
                && u64::from(attempt) < exec.attempts.get();
            if retry {
                attempt += 1;
                reached = settled_at;
                continue;
            }
            let done = at.ready.max(settled_at);
            self.apply_outcome(exec, record, outcome, ctx, at, done)?;
            return Ok(Status::Continue(done));
        }
    }

    fn apply_outcome(
        &mut self,
        exec: &StepNode,
        record: &ExecutionRecord,
        outcome: &WorkerOutcome,
        ctx: &mut Context,
        at: &At,
        done: u64,
    ) -> Result<(), ReplayError> {
        let name = &exec.name;
        ctx.facts.reset_executable(name, &at.indices);
        let channel = match outcome {
            WorkerOutcome::Error { code, .. } => {
                ctx.facts
                    .set_control(name, ControlSource::Error, None, &at.indices, code.as_str());
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
            } => {
                for (field, label) in signals {
                    ctx.facts.set_control(
                        name,
                        ControlSource::Signal,
                        Some(field),
                        &at.indices,
                        label.as_str(),
                    );
                }
                Some(Channel {
                    output: output.clone(),
                    diagnostic: Some(diagnostic.clone()),
                    signals: signals
                        .iter()
                        .map(|(f, l)| (f.clone(), l.as_str().to_owned()))
                        .collect(),
                })
            }
        };
        let mut written = Vec::new();
        if let Some(channel) = channel {
            ctx.facts.set_channel(name, &at.indices, channel);
            for binding in &exec.write_bindings {
                let value = self.read_channel(record, exec, binding, ctx, at)?;
                set_path(&mut ctx.state, &binding.target, value.clone(), name)?;
                ctx.writes.insert(binding.target.clone());
                written.push(PromotedValue {
                    path: binding.target.clone(),
                    value,
                });
            }
        }
        if !written.is_empty() {
            self.trace(
                done,
                TraceDecision::Promote {
                    node: name.clone(),
                    map_indices: at.indices.clone(),
                    values: written,
                },
            );
        }
        self.trace(
            done,
            TraceDecision::Continue {
                node: name.clone(),
                map_indices: at.indices.clone(),
            },
        );
        Ok(())
    }

    /// The value a write binding copies: a path of a node's output or diagnostic, or a
    /// signal's label. The source is read at its own map depth.
    fn read_channel(
        &self,
        record: &ExecutionRecord,
        exec: &StepNode,
        binding: &trellis_graph::WriteBinding,
        ctx: &Context,
        at: &At,
    ) -> Result<Value, ReplayError> {
        let source = &binding.value;
        let depth = self
            .shape
            .map_depth(source.node.as_str())
            .min(at.indices.len());
        let missing = || ReplayError::MissingOutputPath {
            execution: record.execution,
            node: exec.name.clone(),
            path: channel_label(binding),
        };
        let channel = ctx
            .facts
            .channel(&source.node, &at.indices[..depth])
            .ok_or_else(missing)?;
        let value = match source.channel {
            OutputChannel::Out => select(&channel.output, &source.path).cloned(),
            OutputChannel::Diagnostic => channel
                .diagnostic
                .as_ref()
                .and_then(|d| select(d, &source.path))
                .cloned(),
            OutputChannel::Signal => source
                .path
                .segments()
                .first()
                .and_then(|field| channel.signals.get(field))
                .map(|label| Value::String(label.clone())),
        };
        value.ok_or_else(missing)
    }
}
