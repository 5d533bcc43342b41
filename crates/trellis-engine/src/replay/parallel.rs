//! Reference evaluation of the concurrent groups: par joins (all, any, quorum, first) with
//! loser voiding, and maps with overflow, indexed promotion and terminal voiding.

use serde_json::Value;
use trellis_graph::{GraphNode, Join, MapNode, ParNode};

use super::context::{Context, Facts};
use super::groups::set_group_control;
use super::{At, Blocked, Effects, Replay, Status};
use crate::decision::PromotedValue;
use crate::error::ReplayError;
use crate::history::VoidReason;
use crate::paths::{promoted_write_paths, select, select_data, set_path, wrote};

/// One evaluated par branch or map item.
struct Lane {
    status: Status,
    ctx: Context,
    effects: Effects,
}

/// How many completed branches a join needs.
pub(crate) fn required_completions(join: &Join, branches: usize) -> usize {
    match join {
        Join::All => branches,
        Join::Any | Join::First { .. } => 1,
        Join::Quorum { count } => usize::try_from(count.get()).unwrap_or(usize::MAX),
    }
}

impl<'g> Replay<'g, '_> {
    fn run_lane(
        &mut self,
        node: &'g GraphNode,
        base: &Context,
        at: &At,
    ) -> Result<Lane, ReplayError> {
        let mut ctx = base.clone();
        let (status, effects) = self.isolated(|r| r.eval(node, &mut ctx, at))?;
        Ok(Lane {
            status,
            ctx,
            effects,
        })
    }

    /// The ledger positions at which a concurrent group entered at `at` may resolve: its
    /// entry, every settlement inside its subtree, and finally the evaluation's own cutoff.
    /// Trying them in order finds the moment it resolved without ever looking past it, so a
    /// branch never mistakes a later loop round's records for its own.
    fn resolution_points(&self, group: &trellis_graph::NodeName, at: &At) -> Vec<u64> {
        let mut points: Vec<u64> = self
            .history
            .executions
            .iter()
            .filter(|r| {
                r.occurrence.map_indices.starts_with(&at.indices)
                    && self.shape.in_subtree(group, r.occurrence.node.as_str())
            })
            .filter_map(|r| r.state.settlement().map(|(settled, _)| settled))
            .filter(|settled| *settled > at.ready && *settled < at.cutoff)
            .collect();
        points.push(at.ready.min(at.cutoff));
        points.push(at.cutoff);
        points.sort_unstable();
        points.dedup();
        points
    }

    /// Claims, for voiding, every execution a lane still waits on.
    fn claim(lane: &mut Lane, at: u64, reason: VoidReason) {
        if let Status::Pending(blocked) = &lane.status {
            for execution in &blocked.waiting {
                lane.effects.voids.push((*execution, at, reason));
            }
        }
    }

    fn pending(&mut self, lanes: Vec<Lane>) -> Status {
        let mut blocked = Blocked::default();
        for lane in lanes {
            if let Status::Pending(b) = lane.status {
                blocked.dispatches.extend(b.dispatches);
                blocked.waiting.extend(b.waiting);
            }
            self.absorb(lane.effects);
        }
        Status::Pending(blocked)
    }

    pub(super) fn eval_par(
        &mut self,
        par: &'g ParNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let base = ctx.enter(self.shape, &par.name, &at.indices);
        let saved = self.cursors.clone();
        let points = self.resolution_points(&par.name, at);
        let required = required_completions(&par.join, par.branches.len());
        let (field, reached, unreachable) = match par.join {
            Join::First { .. } => ("raced", "satisfied", "no_satisfier"),
            _ => ("joined", "reached", "quorum_unreachable"),
        };
        for (point_index, point) in points.iter().enumerate() {
            self.rewind(&saved, &par.name, &at.indices);
            let trial = At {
                cutoff: *point,
                ..at.clone()
            };
            let mut lanes = Vec::with_capacity(par.branches.len());
            for branch in &par.branches {
                lanes.push(self.run_lane(branch, &base, &trial)?);
            }
            let mut completed: Vec<(u64, usize)> = Vec::new();
            for (index, lane) in lanes.iter().enumerate() {
                if let Status::Continue(done) = lane.status {
                    let counts = match &par.join {
                        Join::First { when } => lane.ctx.facts.holds(when, self.shape, &at.indices),
                        _ => true,
                    };
                    if counts {
                        completed.push((done, index));
                    }
                }
            }
            completed.sort_unstable();
            if completed.len() >= required {
                let winners = &completed[..required];
                let join_at = winners
                    .iter()
                    .map(|(done, _)| *done)
                    .fold(at.ready, u64::max);
                let mut facts = base.facts.clone();
                let mut values = Vec::new();
                for (_, index) in winners {
                    let lane = &lanes[*index];
                    for path in promoted_write_paths(&lane.ctx.writes, &par.promoted_state_paths) {
                        let value = select(&lane.ctx.state, &path).cloned().ok_or_else(|| {
                            ReplayError::MissingStatePath {
                                node: par.name.clone(),
                                path: path.dotted(),
                            }
                        })?;
                        set_path(&mut ctx.state, &path, value.clone(), &par.name)?;
                        ctx.writes.insert(path.clone());
                        values.push(PromotedValue { path, value });
                    }
                    let branch = par.branches[*index].name();
                    facts.adopt_subtree(&lane.ctx.facts, self.shape, branch, &at.indices);
                }
                for (index, mut lane) in lanes.into_iter().enumerate() {
                    if !winners.iter().any(|(_, w)| *w == index) {
                        Self::claim(&mut lane, join_at, VoidReason::ParallelJoin);
                    }
                    self.absorb(lane.effects);
                }
                ctx.facts = facts;
                set_group_control(ctx, &par.name, field, &at.indices, reached);
                self.trace_group(&par.name, at, join_at, values);
                return Ok(Status::Continue(join_at));
            }
            let running = lanes.iter().any(|l| matches!(l.status, Status::Pending(_)));
            if !running {
                let done = lanes
                    .iter()
                    .filter_map(|l| l.status.at())
                    .fold(at.ready, u64::max);
                for lane in lanes {
                    self.absorb(lane.effects);
                }
                ctx.facts = base.facts;
                set_group_control(ctx, &par.name, field, &at.indices, unreachable);
                self.trace_group(&par.name, at, done, Vec::new());
                return Ok(Status::Continue(done));
            }
            if point_index + 1 == points.len() {
                return Ok(self.pending(lanes));
            }
        }
        Err(ReplayError::Invariant("par without resolution points"))
    }

    pub(super) fn eval_map(
        &mut self,
        map: &'g MapNode,
        ctx: &mut Context,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let over = select_data(&map.over, &ctx.state, at.item.as_ref(), &map.name)?;
        let items = over
            .as_array()
            .ok_or_else(|| ReplayError::MapOverNotArray(map.name.clone()))?
            .clone();
        let base = ctx.enter(self.shape, &map.name, &at.indices);
        if items.len() as u64 > map.max_items.get() {
            ctx.facts = base.facts;
            set_group_control(ctx, &map.name, "overflow", &at.indices, "overflow");
            self.trace_group(&map.name, at, at.ready, Vec::new());
            return Ok(Status::Continue(at.ready));
        }
        let saved = self.cursors.clone();
        let points = self.resolution_points(&map.name, at);
        for (point_index, point) in points.iter().enumerate() {
            self.rewind(&saved, &map.name, &at.indices);
            let trial = At {
                cutoff: *point,
                ..at.clone()
            };
            let mut lanes = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                lanes.push(self.run_lane(&map.body, &base, &item_at(&trial, index, item)?)?);
            }
            let terminal = lanes
                .iter()
                .enumerate()
                .filter_map(|(i, l)| match l.status {
                    Status::Terminal(done, _) => Some((done, i)),
                    _ => None,
                })
                .min();
            if let Some((terminal_at, winner)) = terminal {
                let status = std::mem::replace(&mut lanes[winner].status, Status::Continue(0));
                for mut lane in lanes {
                    Self::claim(&mut lane, terminal_at, VoidReason::MapTerminal);
                    self.absorb(lane.effects);
                }
                return Ok(status);
            }
            let running = lanes.iter().any(|l| matches!(l.status, Status::Pending(_)));
            if !running {
                return self.finish_map(map, ctx, base.facts, lanes, at);
            }
            if point_index + 1 == points.len() {
                return Ok(self.pending(lanes));
            }
        }
        Err(ReplayError::Invariant("map without resolution points"))
    }

    fn finish_map(
        &mut self,
        map: &MapNode,
        ctx: &mut Context,
        mut facts: Facts,
        lanes: Vec<Lane>,
        at: &At,
    ) -> Result<Status, ReplayError> {
        let mut values = Vec::new();
        for path in &map.promoted_state_paths {
            if !lanes.iter().all(|l| wrote(&l.ctx.writes, path)) {
                continue;
            }
            let mut collected = Vec::with_capacity(lanes.len());
            for lane in &lanes {
                let value = select(&lane.ctx.state, path).cloned().ok_or_else(|| {
                    ReplayError::MissingStatePath {
                        node: map.name.clone(),
                        path: path.dotted(),
                    }
                })?;
                collected.push(value);
            }
            let array = Value::Array(collected);
            set_path(&mut ctx.state, path, array.clone(), &map.name)?;
            ctx.writes.insert(path.clone());
            values.push(PromotedValue {
                path: path.clone(),
                value: array,
            });
        }
        let done = lanes
            .iter()
            .filter_map(|l| l.status.at())
            .fold(at.ready, u64::max);
        let body = map.body.name();
        for (index, lane) in lanes.into_iter().enumerate() {
            let mut prefix = at.indices.clone();
            prefix.push(index_u32(index)?);
            facts.adopt_subtree(&lane.ctx.facts, self.shape, body, &prefix);
            self.absorb(lane.effects);
        }
        ctx.facts = facts;
        set_group_control(ctx, &map.name, "overflow", &at.indices, "ok");
        self.trace_group(&map.name, at, done, values);
        Ok(Status::Continue(done))
    }
}

fn index_u32(index: usize) -> Result<u32, ReplayError> {
    u32::try_from(index).map_err(|_| ReplayError::IdOverflow)
}

fn item_at(at: &At, index: usize, item: &Value) -> Result<At, ReplayError> {
    let mut indices = at.indices.clone();
    indices.push(index_u32(index)?);
    Ok(At {
        indices,
        item: Some(item.clone()),
        ..at.clone()
    })
}
