//! Pars (§6.7): join validation, independent branches, write checks, completion scenarios,
//! the join correlation, and the scenario merge with its parallel definition effect.

use std::collections::BTreeSet;

use trellis_graph::{DiagnosticCode, GraphNode, Join};

use super::promote::Rule;
use super::{Analyzer, Scope};
use crate::assign::Correlation;
use crate::at::At;
use crate::diag::Step;
use crate::flow::{Effects, Flow};
use crate::guards;
use crate::merge::{Scenarios, keep_promoted, merge_par, parallel_effect};
use crate::nodeset::NodeId;
use crate::predicate::{Pred, always, and, at_least, guard, never, not, or};

impl<'g> Analyzer<'_, 'g> {
    pub(crate) fn par(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let GraphNode::Par(par) = self.index.node(id) else {
            return Effects::empty(flow);
        };
        let canon = self.canon(id);
        self.check_group_state(id, &par.state, flow, scope);
        let n = par.branches.len();
        let mut conservative = false;
        let required = match &par.join {
            Join::All => n,
            Join::Any | Join::First { .. } => 1,
            Join::Quorum { count } => {
                if count.get() > n as u64 {
                    self.diags.emit(
                        DiagnosticCode::InvalidGraphShape,
                        "parallel quorum exceeds branch count",
                        self.at(id, &[Step::Field("join"), Step::Field("count")]),
                        [&par.name],
                    );
                    conservative = true;
                    n
                } else {
                    count.get() as usize
                }
            }
        };
        if let Join::First { when } = &par.join {
            let mut descendants = Vec::new();
            self.index.descendants(id, &mut descendants);
            let inside: BTreeSet<NodeId> = descendants.into_iter().collect();
            let available = |n: NodeId| flow.available.contains(n) || inside.contains(&n);
            let (index, facts, owners) = (self.index, &self.facts, &self.branch_owned);
            guards::validate(
                self.index,
                when,
                &available,
                &mut |node, earlier| super::masked_error(index, facts, owners, flow, node, earlier),
                At::node(id).field("join").field("when"),
                DiagnosticCode::InvalidGraphShape,
                self.diags,
            );
            for selector in when.selectors() {
                self.out.control_references.push((id, &selector.name));
            }
        }
        let branch_scope = Scope {
            state: &par.state,
            map: scope.map.clone(),
            presence: (required == n).then(|| scope.presence.clone()).flatten(),
        };
        let children = self.index.entry(id).children.clone();
        let branches: Vec<Effects<'g>> = children
            .iter()
            .map(|child| self.analyze(*child, flow, &branch_scope))
            .collect();
        self.branch_write_checks(id, &children, &branches);
        let completions: Vec<Pred<'g>> = branches.iter().map(|e| e.completion.clone()).collect();
        let join_path = At::node(id).field("join");
        let (completion, scenarios, falls_through) = match &par.join {
            Join::First { when } => {
                let satisfiers: Vec<Pred<'g>> = branches
                    .iter()
                    .zip(&completions)
                    .map(|(branch, done)| {
                        // Used whenever its selectors are available on the branch, even
                        // when the guard is invalid otherwise (as the reference does). A
                        // `k_of_map` selector is also usable when its map ran in this branch
                        // (not when the map ran before the par: the reference leaves that
                        // guard unused).
                        let usable =
                            guards::selectors_with_k_of_map(when)
                                .iter()
                                .all(|(s, in_k_of_map)| {
                                    self.index.lookup(s.name.as_str()).is_some_and(|n| {
                                        flow.available.contains(n)
                                            || branch.definite_nodes.contains(n)
                                            || (*in_k_of_map
                                                && self.index.entry(n).map_owner.is_some_and(
                                                    |owner| branch.definite_nodes.contains(owner),
                                                ))
                                    })
                                });
                        if usable {
                            and(vec![done.clone(), guard(when)])
                        } else {
                            never()
                        }
                    })
                    .collect();
                // A selector with no domain that the reference enumerates with no candidate
                // (a group field it lacks, a signal of a node that is no executable) leaves
                // every check reading the guard without assignments: the par never settles.
                let empty_space = satisfiers
                    .iter()
                    .any(|s| crate::predicate::constant(s) != Some(false))
                    && when.selectors().iter().any(|s| self.enumerates_nothing(s));
                let satisfaction = or(satisfiers.clone());
                let all_complete = and(completions.clone());
                let settlement = or(vec![satisfaction.clone(), all_complete.clone()]);
                let mut roots = satisfiers.clone();
                roots.push(settlement.clone());
                let outcome = self.assignments(&roots, join_path).ok().map(|space| {
                    let mut sets = BTreeSet::new();
                    let mut settles = false;
                    for a in 0..space.len() {
                        let values = space.root_values(a);
                        settles |= values[n];
                        if values[..n].iter().any(|v| *v) {
                            sets.insert(values[..n].to_vec());
                        }
                    }
                    (sets, settles)
                });
                self.facts.correlations.insert(
                    canon,
                    Correlation {
                        positive: satisfaction.clone(),
                        negative: and(vec![not(satisfaction.clone()), all_complete.clone()]),
                        parts: vec![satisfaction, all_complete],
                    },
                );
                match outcome {
                    _ if empty_space => (never(), Some(BTreeSet::new()), false),
                    Some((sets, settles)) => (settlement, Some(sets), settles),
                    // An unknown settlement constrains nothing downstream.
                    None => (always(), None, true),
                }
            }
            _ => {
                let reached = at_least(required, completions.clone());
                let outcome = if conservative {
                    None
                } else {
                    self.assignments(&completions, join_path).ok().map(|space| {
                        let mut sets = BTreeSet::new();
                        for a in 0..space.len() {
                            let values = space.root_values(a);
                            if values.iter().filter(|v| **v).count() >= required {
                                sets.insert(values.to_vec());
                            }
                        }
                        sets
                    })
                };
                if !conservative {
                    self.facts.correlations.insert(
                        canon,
                        Correlation {
                            positive: reached.clone(),
                            negative: not(reached.clone()),
                            parts: completions.clone(),
                        },
                    );
                }
                match outcome {
                    Some(sets) => {
                        let falls = !sets.is_empty();
                        (reached, Some(sets), falls)
                    }
                    // An invalid quorum or a too-large space: unknown, so treated as an
                    // unconstrained completion (the reference does the same).
                    None => (always(), None, true),
                }
            }
        };
        let mut effects = match &scenarios {
            Some(sets) => merge_par(
                flow,
                &branches,
                &Scenarios {
                    sets: sets.iter().cloned().collect(),
                    required,
                },
            ),
            None => {
                let mut conservative = Effects::empty(flow);
                for branch in &branches {
                    conservative.exit_failed.union_with(&branch.exit_failed);
                    for (path, types) in &branch.possible_writes {
                        for ty in types {
                            crate::flow::record_possible(
                                &mut conservative.possible_writes,
                                path,
                                ty,
                            );
                        }
                    }
                }
                conservative
            }
        };
        effects
            .conditional
            .entry(canon)
            .or_default()
            .union_with(&effects.definite_nodes.clone());
        effects.definite_nodes.insert(canon);
        effects.exit_failed.insert(canon);
        effects.falls_through = falls_through;
        effects.completion = completion;
        let rule = if matches!(par.join, Join::All) {
            Rule::Definite
        } else {
            Rule::EveryAlternative
        };
        self.promote(
            id,
            &par.promoted_state_paths,
            &par.state,
            rule,
            &effects,
            scope,
        );
        keep_promoted(&mut effects, &par.promoted_state_paths);
        if let Some(effect) = parallel_effect(canon, flow, &effects.definite_writes) {
            effects.parallel.push(effect);
        }
        effects
    }

    /// Whether the reference builds no candidate at all for this selector's node: a `group`
    /// selector outside its domain, or a `signal` of a node that is no executable.
    fn enumerates_nothing(&self, selector: &trellis_graph::ControlSelector) -> bool {
        use trellis_graph::ControlSource;
        crate::domain::key_of(self.index, selector).is_some_and(|key| {
            crate::domain::domain(self.index, &key).is_none()
                && match selector.source {
                    ControlSource::Group => true,
                    ControlSource::Signal => self.index.node(key.node).executable().is_none(),
                    ControlSource::Error => false,
                }
        })
    }

    /// Promotion type compatibility across branches, and overlapping writes under join all.
    fn branch_write_checks(&mut self, id: NodeId, children: &[NodeId], branches: &[Effects<'g>]) {
        let GraphNode::Par(par) = self.index.node(id) else {
            return;
        };
        for (i, path) in par.promoted_state_paths.iter().enumerate() {
            let typed: Vec<(usize, &crate::flow::Ty)> = branches
                .iter()
                .enumerate()
                .flat_map(|(b, e)| {
                    e.possible_writes
                        .iter()
                        .filter(|(p, _)| ***p == *path)
                        .flat_map(move |(_, types)| types.iter().map(move |t| (b, t)))
                })
                .collect();
            for (x, (bx, tx)) in typed.iter().enumerate() {
                for (by, ty) in &typed[x + 1..] {
                    if bx != by && !tx.is_subtype_of(ty) && !ty.is_subtype_of(tx) {
                        self.diags.emit(
                            DiagnosticCode::SchemaSafety,
                            "parallel promotion has incompatible branch value types",
                            self.at(id, &[Step::Field("promotedStatePaths"), Step::Index(i)]),
                            [&par.name],
                        );
                    }
                }
            }
        }
        if !matches!(par.join, Join::All) {
            return;
        }
        for i in 0..branches.len() {
            for j in i + 1..branches.len() {
                for a in branches[i].possible_writes.keys() {
                    for b in branches[j].possible_writes.keys() {
                        if a.overlaps(b) {
                            self.diags.emit(
                                DiagnosticCode::WriteConflict,
                                "parallel all branches have overlapping writes",
                                self.at(id, &[Step::Field("branches")]),
                                [self.name(children[i]), self.name(children[j])],
                            );
                        }
                    }
                }
            }
        }
    }
}
