//! Reference evaluation of the sequential groups: seq, choice and loop, and the promotion that
//! copies a finished group's promoted paths and facts into its parent scope.

use trellis_graph::{ChoiceNode, ControlSource, FieldName, FieldPath, LoopNode, NodeName, SeqNode};

use super::context::Context;
use super::{At, Replay, Status};
use crate::decision::{PromotedValue, TraceDecision};
use crate::error::ReplayError;
use crate::paths::{promoted_write_paths, select, set_path};

impl<'g> Replay<'g, '_> {
    pub(super) fn eval_seq(
        &mut self,
        seq: &'g SeqNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let mut local = ctx.enter(self.shape, &seq.name, &at.indices);
        let mut ready = at.ready;
        for child in &seq.children {
            let child_at = At {
                ready,
                ..at.clone()
            };
            match self.eval(child, &mut local, &child_at)? {
                Status::Continue(done) => ready = done,
                other => return Ok(other),
            }
        }
        self.promote(&seq.name, &seq.promoted_state_paths, local, ctx, at, ready)?;
        Ok(Status::Continue(ready))
    }

    pub(super) fn eval_choice(
        &mut self,
        choice: &'g ChoiceNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let mut local = ctx.enter(self.shape, &choice.name, &at.indices);
        let selected = choice
            .branches
            .iter()
            .find(|b| local.facts.holds(&b.when, self.shape, &at.indices))
            .map(|b| &b.node)
            .or(choice.otherwise.as_deref());
        // A choice with no matching branch and no otherwise falls through unchanged.
        let mut done = at.ready;
        if let Some(branch) = selected {
            match self.eval(branch, &mut local, at)? {
                Status::Continue(d) => done = d,
                other => return Ok(other),
            }
        }
        self.promote(
            &choice.name,
            &choice.promoted_state_paths,
            local,
            ctx,
            at,
            done,
        )?;
        Ok(Status::Continue(done))
    }

    pub(super) fn eval_loop(
        &mut self,
        node: &'g LoopNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let mut local = ctx.enter(self.shape, &node.name, &at.indices);
        let mut ready = at.ready;
        let mut label = "exhausted";
        for _ in 0..self.shape.rounds(&node.name) {
            let round = At {
                ready,
                ..at.clone()
            };
            match self.eval(&node.body, &mut local, &round)? {
                Status::Continue(done) => ready = done,
                other => return Ok(other),
            }
            if let Some(until) = &node.until
                && local.facts.holds(until, self.shape, &at.indices)
            {
                label = "converged";
                break;
            }
        }
        self.promote(
            &node.name,
            &node.promoted_state_paths,
            local,
            ctx,
            at,
            ready,
        )?;
        set_group_control(ctx, &node.name, "terminated", &at.indices, label);
        Ok(Status::Continue(ready))
    }

    /// Finishes a group: copies each promoted path present in `local` into `ctx`, carries the
    /// written paths under them outward, adopts `local`'s facts, and traces the completion.
    pub(super) fn promote(
        &mut self,
        group: &NodeName,
        paths: &[FieldPath],
        local: Context,
        ctx: &mut Context,
        at: &At,
        done: u64,
    ) -> Result<(), ReplayError> {
        let mut values = Vec::new();
        for path in paths {
            if let Some(value) = select(&local.state, path) {
                set_path(&mut ctx.state, path, value.clone(), group)?;
                values.push(PromotedValue {
                    path: path.clone(),
                    value: value.clone(),
                });
            }
        }
        ctx.writes
            .extend(promoted_write_paths(&local.writes, paths));
        // Inside the group only its own subtree's facts changed.
        ctx.facts = local.facts;
        self.trace_group(group, at, done, values);
        Ok(())
    }

    pub(super) fn trace_group(
        &mut self,
        group: &NodeName,
        at: &At,
        done: u64,
        values: Vec<PromotedValue>,
    ) {
        if !values.is_empty() {
            self.trace(
                done,
                TraceDecision::Promote {
                    node: group.clone(),
                    map_indices: at.indices.clone(),
                    values,
                },
            );
        }
        self.trace(
            done,
            TraceDecision::Continue {
                node: group.clone(),
                map_indices: at.indices.clone(),
            },
        );
    }
}

pub(super) fn set_group_control(
    ctx: &mut Context,
    group: &NodeName,
    field: &'static str,
    indices: &[u32],
    label: &str,
) {
    let field = FieldName::from_static(field);
    ctx.facts
        .set_control(group, ControlSource::Group, Some(&field), indices, label);
}
