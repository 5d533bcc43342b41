//! Choices (§6.6): guard validation, exhaustiveness and dead alternatives from the legal
//! assignments, residual refinement of each alternative's flow, and the choice merge.

use std::collections::BTreeMap;

use trellis_graph::{DiagnosticCode, GraphNode};

use super::promote::Rule;
use super::{Analyzer, BranchOwner, CommonWriter, Scope};
use crate::assign::Check;
use crate::at::At;
use crate::diag::Step;
use crate::flow::{Effects, Flow, SPath, Tracker, WriteFact};
use crate::guards;
use crate::merge::{join_facts, keep_promoted, merge_choice};
use crate::nodeset::NodeId;
use crate::predicate::{Pred, always, and, guard, not, or};

/// What the legal assignments say about one alternative (a branch, or the uncovered rest).
#[derive(Debug, Default, Clone)]
struct Residual {
    reachable: bool,
    succeeded: Vec<NodeId>,
    failed_pars: Vec<NodeId>,
}

impl<'g> Analyzer<'_, 'g> {
    pub(crate) fn choice(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let GraphNode::Choice(choice) = self.index.node(id) else {
            return Effects::empty(flow);
        };
        self.check_group_state(id, &choice.state, flow, scope);
        let mut valid = true;
        for (i, branch) in choice.branches.iter().enumerate() {
            let path = At::node(id).field("branches").index(i).field("when");
            let (index, facts, owners) = (self.index, &self.facts, &self.branch_owned);
            valid &= guards::validate(
                self.index,
                &branch.when,
                &|n| flow.available.contains(n),
                &mut |node, earlier| super::masked_error(index, facts, owners, flow, node, earlier),
                path,
                DiagnosticCode::ChoiceExhaustiveness,
                self.diags,
            );
            for selector in branch.when.selectors() {
                self.out.control_references.push((id, &selector.name));
            }
        }
        let guards: Vec<Pred<'g>> = choice.branches.iter().map(|b| guard(&b.when)).collect();
        let n = guards.len();
        // Alternative `i` is taken when guard `i` is the first that holds (`n`: none holds).
        let residual_preds: Vec<Pred<'g>> = (0..=n)
            .map(|i| {
                let mut parts: Vec<Pred<'g>> = guards[..i].iter().cloned().map(not).collect();
                if i < n {
                    parts.push(guards[i].clone());
                }
                and(parts)
            })
            .collect();
        let control = if valid {
            self.classify(&guards, At::node(id).field("branches"))
                .ok()
                .map(|classified| self.residuals(classified))
        } else {
            None
        };
        if let Some(residuals) = &control {
            // The last two residuals read every branch guard, so their own check would build
            // this very space: its answer is whether the classification reached them (an
            // enclosing sequence that continues after the choice asks exactly that).
            for i in n.saturating_sub(1)..=n {
                self.remember_single(&residual_preds[i], residuals[i].reachable);
            }
        }
        if let Some(residuals) = &control {
            for (i, residual) in residuals[..n].iter().enumerate() {
                if !residual.reachable {
                    self.diags.emit(
                        DiagnosticCode::ChoiceExhaustiveness,
                        "choice branch is unreachable after excluding earlier branches",
                        self.at(
                            id,
                            &[Step::Field("branches"), Step::Index(i), Step::Field("when")],
                        ),
                        [&choice.name],
                    );
                }
            }
            let uncovered = residuals[n].reachable;
            match (&choice.otherwise, uncovered) {
                (None, true) => self.diags.emit(
                    DiagnosticCode::ChoiceExhaustiveness,
                    "choice branches do not cover every legal control assignment",
                    self.at(id, &[Step::Field("branches")]),
                    [&choice.name],
                ),
                (Some(otherwise), false) => {
                    // Located under this choice even when the otherwise's name is a duplicate
                    // (other diagnostics about a duplicate use its first occurrence).
                    let mut path = self.at(id, &[Step::Field("otherwise")]);
                    path.push(trellis_graph::PathSegment::node(otherwise.name()));
                    self.diags.emit(
                        DiagnosticCode::ChoiceExhaustiveness,
                        "choice otherwise is unreachable because earlier branches cover every legal control assignment",
                        path,
                        [&choice.name],
                    );
                }
                _ => {}
            }
        }
        let reachable = |i: usize| control.as_ref().is_none_or(|r| r[i].reachable);
        let children = self.index.entry(id).children.clone();
        let mut flags = Vec::new();
        let mut alternatives: Vec<Effects<'g>> = Vec::new();
        for i in 0..=n {
            let child = match children.get(i) {
                Some(child) if i < n || choice.otherwise.is_some() => Some(*child),
                _ => None,
            };
            if i < n || child.is_some() {
                flags.push(reachable(i));
            }
            if !reachable(i) {
                continue;
            }
            let mut tracker = Tracker::new(flow.clone());
            let residual = residual_preds[i].clone();
            if let Some(residuals) = &control {
                let mut succeeded = residuals[i].succeeded.clone();
                succeeded.extend(self.resolved_common_writes(flow, &residual));
                tracker.refine(&succeeded, &residuals[i].failed_pars);
            }
            let Some(child) = child else {
                // The implicit empty alternative of a non-exhaustive choice.
                let (_, mut effects) = tracker.finish();
                effects.completion = residual;
                alternatives.push(effects);
                continue;
            };
            let child_scope = Scope {
                state: &choice.state,
                map: scope.map.clone(),
                presence: scope
                    .presence
                    .clone()
                    .map(|p| and(vec![p, residual.clone()])),
            };
            let inner = self.analyze(child, &tracker.flow, &child_scope);
            // Branch restriction: an alternative whose completion contradicts its residual
            // cannot continue after the choice.
            // An unconstrained completion adds nothing to a reachable residual.
            // The conjunction is checked as the very predicate the alternative completes with,
            // so an enclosing sequence that completes exactly when this alternative does
            // finds the answer among the checks already made.
            let completion = and(vec![residual, inner.completion.clone()]);
            let continues = inner.falls_through
                && (control.is_none()
                    || crate::predicate::constant(&inner.completion) == Some(true)
                    || self
                        .satisfiable(std::slice::from_ref(&completion), At::node(id), &|v| v[0])
                        .unwrap_or(true));
            let effects = if continues {
                tracker.apply(&inner);
                let (_, mut effects) = tracker.finish();
                effects.completion = completion;
                effects
            } else {
                let mut effects = Effects::empty(flow);
                effects.possible_writes = inner.possible_writes.clone();
                effects.falls_through = false;
                effects.completion = inner.completion.clone();
                effects
            };
            alternatives.push(effects);
        }
        self.out.alternatives.insert(id, flags);
        let contributing: Vec<&Effects<'g>> =
            alternatives.iter().filter(|e| e.falls_through).collect();
        let all: Vec<&Effects<'g>> = alternatives.iter().collect();
        let mut effects = merge_choice(flow, &contributing, &all);
        // With unknown control (invalid guards or a too-large space) the completion is left
        // unconstrained, as the reference does.
        effects.completion = match &control {
            Some(_) => or(contributing.iter().map(|e| e.completion.clone()).collect()),
            None => always(),
        };
        effects.falls_through = !contributing.is_empty();
        let canon = self.canon(id);
        self.record_branch_owners(canon, &contributing, &effects);
        self.common_pending(canon, &contributing, &mut effects);
        effects.definite_nodes.insert(canon);
        self.promote(
            id,
            &choice.promoted_state_paths,
            &choice.state,
            Rule::EveryAlternative,
            &effects,
            scope,
        );
        keep_promoted(&mut effects, &choice.promoted_state_paths);
        if !effects.pending.iter().any(|(owner, _)| *owner == canon) {
            effects.exit_failed.remove(canon);
        }
        effects
    }

    /// Executables definite in some but not all completing alternatives remember their
    /// alternative, so later guards may read their errors where it was surely taken (§13.6).
    fn record_branch_owners(
        &mut self,
        choice: NodeId,
        contributing: &[&Effects<'g>],
        merged: &Effects<'g>,
    ) {
        for alternative in contributing {
            for node in alternative.definite_nodes.iter() {
                if merged.definite_nodes.contains(node)
                    || self.index.node(node).executable().is_none()
                {
                    continue;
                }
                self.branch_owned.insert(
                    node,
                    BranchOwner {
                        choice,
                        choice_completion: merged.completion.clone(),
                        branch_completion: alternative.completion.clone(),
                    },
                );
            }
        }
    }

    /// A path that every completing alternative writes — pending on different producers, or
    /// definite in some — is carried by the choice itself as one pending write (§13.6); the
    /// choice stays failed until a later residual shows some alternative completed with the
    /// write's producers in it succeeding.
    fn common_pending(
        &mut self,
        choice: NodeId,
        contributing: &[&Effects<'g>],
        merged: &mut Effects<'g>,
    ) {
        if contributing.len() < 2 {
            return;
        }
        type Writers<'e> = (Vec<&'e WriteFact>, Vec<NodeId>);
        let tables: Vec<BTreeMap<&SPath, Writers>> = contributing
            .iter()
            .map(|alternative| {
                let mut table: BTreeMap<&SPath, Writers> = BTreeMap::new();
                let pending = (alternative.pending.iter())
                    .filter(|(node, _)| self.index.node(*node).executable().is_some())
                    .flat_map(|(_, writes)| writes);
                for write in pending.chain(alternative.definite_writes.values()) {
                    let (facts, producers) = table.entry(&write.target).or_default();
                    facts.push(write);
                    for node in &write.producers {
                        if !producers.contains(node) {
                            producers.push(*node);
                        }
                    }
                }
                table
            })
            .collect();
        let mut facts = Vec::new();
        let mut producers = vec![Vec::new(); contributing.len()];
        for target in tables[0].keys() {
            let already = merged.pending.iter().flat_map(|(_, w)| w);
            if merged.definite_writes.contains_key(*target)
                || already.into_iter().any(|w| &w.target == *target)
            {
                continue;
            }
            let Some(writers) = tables
                .iter()
                .map(|t| t.get(target))
                .collect::<Option<Vec<&Writers>>>()
            else {
                continue;
            };
            let every: Vec<&WriteFact> = writers
                .iter()
                .flat_map(|(f, _)| f.iter().copied())
                .collect();
            let Some(fact) = join_facts(&every) else {
                continue;
            };
            facts.push(fact);
            for (mine, (_, nodes)) in producers.iter_mut().zip(&writers) {
                for node in nodes {
                    if !mine.contains(node) {
                        mine.push(*node);
                    }
                }
            }
        }
        if facts.is_empty() {
            return;
        }
        merged.pending.push((choice, facts));
        merged.exit_failed.insert(choice);
        let writers = contributing
            .iter()
            .zip(producers)
            .map(|(alternative, producers)| CommonWriter {
                completion: alternative.completion.clone(),
                producers,
            })
            .collect();
        self.common_writes.insert(choice, writers);
    }

    /// The choices with a common pending write that `residual` resolves: on every legal
    /// assignment where it holds, some alternative of the choice completed with all its
    /// producers mentioned and succeeding.
    fn resolved_common_writes(&self, flow: &Flow, residual: &Pred<'g>) -> Vec<NodeId> {
        let mut resolved = Vec::new();
        for (owner, _) in &flow.pending {
            let Some(writers) = self.common_writes.get(owner) else {
                continue;
            };
            if !flow.failed.contains(*owner) {
                continue;
            }
            let mut roots = vec![residual.clone()];
            roots.extend(writers.iter().map(|w| w.completion.clone()));
            let implied = Check::every(
                self.index,
                &self.facts,
                &roots,
                &mut |values, failing, mentioned| {
                    !values[0]
                        || writers.iter().enumerate().any(|(k, writer)| {
                            values[k + 1]
                                && !writer.producers.is_empty()
                                && writer.producers.iter().all(|p| {
                                    mentioned.binary_search(p).is_ok() && !failing.contains(p)
                                })
                        })
                },
            );
            if implied == Ok(true) {
                resolved.push(*owner);
            }
        }
        resolved
    }

    /// What each alternative's legal assignments say: reachability, the nodes that succeed
    /// on every one of them, and the pars that may fail.
    fn residuals(&self, classified: crate::assign::Classified) -> Vec<Residual> {
        let crate::assign::Classified {
            reachable,
            mut failing,
            mut mentioned,
        } = classified;
        mentioned.sort_unstable();
        let mut out = vec![Residual::default(); reachable.len()];
        for ((residual, reachable), failing) in out.iter_mut().zip(reachable).zip(&mut failing) {
            if !reachable {
                continue;
            }
            residual.reachable = true;
            failing.sort_unstable();
            failing.dedup();
            residual.succeeded = mentioned
                .iter()
                .copied()
                .filter(|node| failing.binary_search(node).is_err())
                .collect();
            residual.failed_pars = failing
                .iter()
                .copied()
                .filter(|node| matches!(self.index.node(*node), GraphNode::Par(_)))
                .collect();
        }
        out
    }
}
