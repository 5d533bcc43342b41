//! Sequences, loops and maps (§6.6, §6.8): threading flows through children, loop exits, and
//! map bodies with indexed promotions.

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::limits::ceilings;
use trellis_graph::{ControlSource, DiagnosticCode, GraphNode, PayloadType};

use super::promote::Rule;
use super::{Analyzer, MapScope, Scope};
use crate::at::At;
use crate::diag::Step;
use crate::flow::{Effects, Flow, Tracker, WriteFact, record_possible};
use crate::guards;
use crate::merge::keep_promoted;
use crate::nodeset::NodeId;
use crate::predicate::{always, and, guard, never};

fn lift(fact: &WriteFact) -> WriteFact {
    let ty = Rc::new(PayloadType::Array {
        items: Box::new((*fact.ty).clone()),
    });
    // The map's array always exists (`[]` for no items), so the reference has the lifted write
    // guarantee its target even when the body's source path is optional (seed 2027).
    let guaranteed = BTreeMap::from([(fact.target.clone(), ty.clone())]);
    WriteFact {
        target: fact.target.clone(),
        ty,
        guaranteed,
        producers: fact.producers.clone(),
    }
}

impl<'g> Analyzer<'_, 'g> {
    pub(crate) fn seq(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let GraphNode::Seq(seq) = self.index.node(id) else {
            return Effects::empty(flow);
        };
        self.check_group_state(id, &seq.state, flow, scope);
        let mut tracker = Tracker::new(flow.clone());
        let mut updating = true;
        let mut all_fall = true;
        let mut completions = Vec::new();
        let mut presence = scope.presence.clone();
        let mut possible = BTreeMap::new();
        let children = self.index.entry(id).children.clone();
        for child in children {
            let child_scope = Scope {
                state: &seq.state,
                map: scope.map.clone(),
                presence: presence.clone(),
            };
            let effects = self.analyze(child, &tracker.flow, &child_scope);
            // Children after the first one that cannot continue never run, so their
            // completions do not constrain the sequence's.
            if updating {
                completions.push(effects.completion.clone());
            }
            for (path, types) in &effects.possible_writes {
                for ty in types {
                    record_possible(&mut possible, path, ty);
                }
            }
            if updating {
                if effects.falls_through {
                    tracker.apply(&effects);
                } else {
                    updating = false;
                }
            }
            all_fall &= effects.falls_through;
            presence = presence.map(|p| {
                if effects.falls_through {
                    and(vec![p, effects.completion.clone()])
                } else {
                    never()
                }
            });
        }
        let completion = and(completions);
        let satisfiable = self
            .satisfiable(std::slice::from_ref(&completion), At::node(id), &|v| v[0])
            .unwrap_or(true);
        let (_, mut effects) = tracker.finish();
        effects.possible_writes = possible;
        effects.definite_nodes.insert(self.canon(id));
        effects.falls_through = all_fall && satisfiable;
        effects.completion = completion;
        self.promote(
            id,
            &seq.promoted_state_paths,
            &seq.state,
            Rule::Definite,
            &effects,
            scope,
        );
        keep_promoted(&mut effects, &seq.promoted_state_paths);
        effects
    }

    pub(crate) fn loop_(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let GraphNode::Loop(l) = self.index.node(id) else {
            return Effects::empty(flow);
        };
        if let Some(input_path) = &l.max_iterations_input
            && !matches!(
                self.initial_input.lookup(input_path),
                Some((PayloadType::Integer, _))
            )
        {
            self.diags.emit(
                DiagnosticCode::SchemaSafety,
                "maxIterationsInput must select an integer in initialInput",
                self.at(id, &[Step::Field("maxIterationsInput")]),
                [&l.name],
            );
        }
        self.check_group_state(id, &l.state, flow, scope);
        let body_scope = Scope {
            state: &l.state,
            map: scope.map.clone(),
            presence: scope.presence.clone(),
        };
        let body_id = self.index.entry(id).children[0];
        let body = self.analyze(body_id, flow, &body_scope);
        if let Some(until) = &l.until {
            let until_at = At::node(id).field("until");
            let body_definite = &body.definite_nodes;
            let available = |n: NodeId| flow.available.contains(n) || body_definite.contains(n);
            let (index, facts, owners) = (self.index, &self.facts, &self.branch_owned);
            let valid = guards::validate(
                self.index,
                until,
                &available,
                &mut |node, earlier| super::masked_error(index, facts, owners, flow, node, earlier),
                until_at,
                DiagnosticCode::LoopExitSatisfiability,
                self.diags,
            );
            // A verifier (any source) or a step read through `error`, entered in every
            // iteration (§13.3).
            for selector in until.selectors() {
                let guaranteed = self.index.lookup(selector.name.as_str()).is_some_and(|n| {
                    body_definite.contains(n)
                        && match self.index.node(n) {
                            GraphNode::Verifier(_) => true,
                            GraphNode::Step(_) => selector.source == ControlSource::Error,
                            _ => false,
                        }
                });
                if !guaranteed {
                    self.diags.emit(
                        DiagnosticCode::LoopExitSatisfiability,
                        format!(
                            "loop exit selector {} must select a verifier or a step error guaranteed in every iteration",
                            selector.name
                        ),
                        until_at.path(self.index),
                        [&l.name, &selector.name],
                    );
                }
            }
            // A space past the ceiling (reported by the check) is no proof of a way out: the
            // reference calls that guard unsatisfiable too.
            if valid && self.satisfiable(&[guard(until)], until_at, &|v| v[0]) != Some(true) {
                self.diags.emit(
                    DiagnosticCode::LoopExitSatisfiability,
                    "loop exit guard is unsatisfiable",
                    until_at.path(self.index),
                    [&l.name],
                );
            }
        }
        let mut effects = body;
        effects.definite_nodes.insert(self.canon(id));
        self.promote(
            id,
            &l.promoted_state_paths,
            &l.state,
            Rule::Definite,
            &effects,
            scope,
        );
        keep_promoted(&mut effects, &l.promoted_state_paths);
        effects
    }

    pub(crate) fn map(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let GraphNode::Map(m) = self.index.node(id) else {
            return Effects::empty(flow);
        };
        let canon = self.canon(id);
        if m.max_items.get() > ceilings::MAP_ITEMS {
            self.diags.emit(
                DiagnosticCode::CeilingExceeded,
                "maxItems exceeds full-v1 limit 1024",
                self.at(id, &[Step::Field("maxItems")]),
                [&m.name],
            );
        }
        self.check_group_state(id, &m.state, flow, scope);
        let over_at = At::node(id).field("over");
        let over_scope = Scope {
            state: &m.state,
            map: scope.map.clone(),
            presence: scope.presence.clone(),
        };
        let item = match self.data_selector(&m.over, over_at, flow, &over_scope) {
            Some(ty) => match &*ty {
                PayloadType::Array { items } => Some(Rc::new((**items).clone())),
                _ => {
                    self.diags.emit(
                        DiagnosticCode::SchemaSafety,
                        "map selector must resolve to an array",
                        over_at.path(self.index),
                        [&m.name],
                    );
                    None
                }
            },
            None => None,
        };
        // Element overrides of enclosing maps stay in force inside this body.
        let mut overrides = scope
            .map
            .as_ref()
            .map(|outer| outer.overrides.clone())
            .unwrap_or_default();
        let mut own = Vec::new();
        for (i, path) in m.promoted_state_paths.iter().enumerate() {
            let key = Rc::new(path.clone());
            let inherited = scope
                .map
                .as_ref()
                .and_then(|o| o.overrides.get(&key))
                .cloned();
            let ty = inherited.or_else(|| m.state.lookup(path).map(|(t, _)| Rc::new(t.clone())));
            match ty.as_deref() {
                None => {}
                Some(PayloadType::Array { items }) => {
                    overrides.insert(key.clone(), Rc::new((**items).clone()));
                    own.push(key);
                }
                Some(_) => {
                    // A promoted path that cannot be indexed shadows any inherited element.
                    overrides.remove(&key);
                    self.diags.emit(
                        DiagnosticCode::SchemaSafety,
                        "map promoted state path must be an array for indexed body writes",
                        self.at(id, &[Step::Field("promotedStatePaths"), Step::Index(i)]),
                        [&m.name],
                    );
                }
            }
        }
        let body_scope = Scope {
            state: &m.state,
            map: Some(Rc::new(MapScope {
                map: canon,
                item,
                overrides: overrides.clone(),
            })),
            presence: Some(always()),
        };
        let body_id = self.index.entry(id).children[0];
        let body = self.analyze(body_id, flow, &body_scope);
        let mut effects = Effects::empty(flow);
        effects.definite_nodes.insert(canon);
        effects.exit_failed.union_with(&body.exit_failed);
        for (path, types) in &body.possible_writes {
            let lifted = own.contains(path);
            for ty in types {
                let ty = if lifted {
                    Rc::new(PayloadType::Array {
                        items: Box::new((**ty).clone()),
                    })
                } else {
                    ty.clone()
                };
                record_possible(&mut effects.possible_writes, path, &ty);
            }
        }
        for path in &own {
            if let Some(fact) = body.definite_writes.get(path) {
                effects.definite_writes.insert(path.clone(), lift(fact));
            }
            for (node, writes) in &body.pending {
                let lifted: Vec<WriteFact> = writes
                    .iter()
                    .filter(|w| &w.target == path)
                    .map(lift)
                    .collect();
                if !lifted.is_empty() {
                    crate::flow::merge_pending(&mut effects.pending, *node, &lifted);
                }
            }
        }
        self.promote(
            id,
            &m.promoted_state_paths,
            &m.state,
            Rule::Map,
            &effects,
            scope,
        );
        keep_promoted(&mut effects, &m.promoted_state_paths);
        effects
    }
}
