//! The legal-control-assignment engine (§6.4): expands a check's guards with join correlations
//! and map presence, builds scalar and aggregate dimensions, enumerates and filters them.

mod ceiling;
mod dim;
mod dims;
mod enumerate;
mod expansion;
mod facts;
mod merge;
mod options;
pub(crate) mod program;
pub(crate) mod resolved;
mod space;

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::index::{FastMap, Index};
use crate::nodeset::NodeId;
use crate::predicate::{Pred, never_holds};

pub(crate) use ceiling::{ASSIGNMENT_LIMIT, Ceiling};
pub(crate) use expansion::Expansion;
use facts::FactsRef;
pub(crate) use facts::{Correlation, Presence};
pub(crate) use space::{Assignments, Classified};

use dims::DimList;
use enumerate::Filter;
use program::Program;

/// Control facts the dataflow walk records for later checks.
#[derive(Debug, Default)]
pub(crate) struct ControlFacts<'g> {
    pub(crate) correlations: FastMap<NodeId, Correlation<'g>>,
    pub(crate) presence: FastMap<NodeId, Presence<'g>>,
    /// Every guard a check has read, resolved once.
    pub(crate) guards: resolved::GuardTable<'g>,
    /// The buffers of the check being prepared, kept for the next one.
    workspace: RefCell<Workspace<'g>>,
}

impl<'g> ControlFacts<'g> {
    /// The recorded facts, without the workspace.
    fn view(&self) -> FactsRef<'_, 'g> {
        FactsRef {
            correlations: &self.correlations,
            presence: &self.presence,
            guards: &self.guards,
        }
    }
}

/// A check ready to enumerate: its keys, compiled predicates, filters and dimensions (steps
/// 1–5 of §6.4). One workspace serves every check of an analysis: a large graph runs thousands
/// of small checks, and allocating their buffers afresh cost about as much as the checks.
#[derive(Debug, Default)]
struct Workspace<'g> {
    expansion: Expansion<'g>,
    program: Program,
    root_ops: Vec<usize>,
    filters: Vec<Filter>,
    presence_ops: BTreeMap<NodeId, usize>,
    dims: DimList,
    /// No two dimensions share a key (computed with the dimensions).
    exclusive: bool,
    /// The number of combinations of the dimensions as built, when within the ceiling.
    size: Option<usize>,
    merging: merge::MergeBuffers,
    scratch: dims::Scratch,
    enumeration: enumerate::Buffers,
    root_values: Vec<bool>,
}

impl<'g> Workspace<'g> {
    /// Steps 1–5 of §6.4 for `roots`: expansion, compilation and dimensions. With `merge`,
    /// indistinguishable candidates are merged (worth it when every assignment is visited;
    /// a satisfiability check usually stops at its first witness).
    fn prepare(
        &mut self,
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
        merge: bool,
    ) -> Result<(), Ceiling> {
        self.expansion.expand(index, facts.view(), roots);
        self.program.clear();
        self.root_ops.clear();
        self.filters.clear();
        self.presence_ops.clear();
        let mut compiler = program::Compiler {
            program: &mut self.program,
            layout: &self.expansion.layout,
            index,
            guards: &facts.guards,
        };
        self.root_ops
            .extend(roots.iter().map(|r| compiler.compile(r)));
        for par in &self.expansion.remembered {
            if let Some(c) = facts.correlations.get(par) {
                let positive = compiler.compile(&c.positive);
                let negative = compiler.compile(&c.negative);
                self.filters.push(enumerate::filter(
                    index,
                    &self.expansion.layout,
                    *par,
                    positive,
                    negative,
                ));
            }
        }
        for node in &self.expansion.present {
            if let Some(p) = facts.presence.get(node) {
                self.presence_ops.insert(*node, compiler.compile(&p.pred));
            }
        }
        dims::DimBuilder {
            index,
            facts: facts.view(),
            expansion: &self.expansion,
            program: &self.program,
            filters: &self.filters,
            presence_ops: &self.presence_ops,
        }
        .build(&mut self.dims, &mut self.scratch)?;
        self.exclusive = !enumerate::may_conflict(
            &self.expansion.layout,
            self.dims.as_slice(),
            &mut self.enumeration,
        );
        self.size = (self.dims.as_slice().iter())
            .try_fold(1usize, |acc, d| acc.checked_mul(d.len()))
            .filter(|n| *n <= ASSIGNMENT_LIMIT);
        // Without shared keys every combination is produced, so the ceiling and the step
        // budget are decided by the sizes alone; within both, candidates no answer depends
        // on can be merged without changing any answer or ceiling.
        if merge
            && self.exclusive
            && self.size.is_some()
            && enumerate::steps(self.dims.as_slice()) <= enumerate::STEP_BUDGET
        {
            merge::merge_indistinguishable(
                index,
                &self.expansion.layout,
                &self.program,
                &mut self.dims,
                &mut self.merging,
            );
        }
        Ok(())
    }

    fn enumerate(
        &mut self,
        visit: &mut dyn FnMut(&[u32], &[bool]) -> enumerate::Next,
    ) -> Result<(), Ceiling> {
        enumerate::enumerate(
            enumerate::Check {
                expansion: &self.expansion,
                program: &self.program,
                filters: &self.filters,
                dims: self.dims.as_slice(),
                exclusive: self.exclusive,
            },
            &mut self.enumeration,
            visit,
        )
    }
}

/// A test of one assignment: its root values, the mentioned nodes it shows failing, and every
/// mentioned node (ascending).
pub(crate) type AssignmentTest<'t> = dyn FnMut(&[bool], &[NodeId], &[NodeId]) -> bool + 't;

/// Checks over the legal control assignments of predicates (§6.4).
pub(crate) struct Check;

impl Check {
    /// The root values of every legal assignment of `roots` (steps 1–7 of §6.4).
    pub(crate) fn assignments<'g>(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
    ) -> Result<Assignments, Ceiling> {
        if let Some(values) = roots
            .iter()
            .map(crate::predicate::constant)
            .collect::<Option<Vec<bool>>>()
        {
            // Constant roots: the single empty assignment.
            return Ok(Assignments::constant(values));
        }
        let mut workspace = facts.workspace.borrow_mut();
        let workspace = &mut *workspace;
        workspace.prepare(index, facts, roots, true)?;
        let mut space = Assignments::empty(roots.len());
        let root_ops = std::mem::take(&mut workspace.root_ops);
        let result = workspace.enumerate(&mut |_, values| {
            space.push(root_ops.iter().map(|op| values[*op]));
            enumerate::Next::Continue
        });
        workspace.root_ops = root_ops;
        result.map(|()| space)
    }

    /// Classifies the legal assignments of a choice's branch guards by the first guard that
    /// holds, with the nodes each alternative may see failing.
    pub(crate) fn classify<'g>(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
    ) -> Result<Classified, Ceiling> {
        let alternatives = roots.len() + 1;
        let mut classified = Classified {
            reachable: vec![false; alternatives],
            failing: vec![Vec::new(); alternatives],
            mentioned: Vec::new(),
        };
        if let Some(values) = roots
            .iter()
            .map(crate::predicate::constant)
            .collect::<Option<Vec<bool>>>()
        {
            // Constant roots read no keys: the single empty assignment, failing nothing.
            classified.reachable[values.iter().position(|v| *v).unwrap_or(roots.len())] = true;
            return Ok(classified);
        }
        let mut workspace = facts.workspace.borrow_mut();
        let workspace = &mut *workspace;
        workspace.prepare(index, facts, roots, true)?;
        let keys = space::FailureKeys::new(index, &workspace.expansion.layout);
        classified.mentioned = keys.mentioned();
        let root_ops = std::mem::take(&mut workspace.root_ops);
        let result = workspace.enumerate(&mut |assignment, values| {
            let first = (root_ops.iter())
                .position(|op| values[*op])
                .unwrap_or(root_ops.len());
            classified.reachable[first] = true;
            keys.failing(assignment, &mut classified.failing[first]);
            enumerate::Next::Continue
        });
        workspace.root_ops = root_ops;
        result.map(|()| classified)
    }

    /// Whether every legal assignment passes `test`, given the root values and the mentioned
    /// nodes it shows failing (§6.8 refinement); stops at the first counterexample.
    pub(crate) fn every<'g>(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
        test: &mut AssignmentTest,
    ) -> Result<bool, Ceiling> {
        let mut workspace = facts.workspace.borrow_mut();
        let workspace = &mut *workspace;
        workspace.prepare(index, facts, roots, false)?;
        let keys = space::FailureKeys::new(index, &workspace.expansion.layout);
        let mentioned = keys.mentioned();
        let mut holds = true;
        let mut failing = Vec::new();
        let mut roots_now = Vec::with_capacity(roots.len());
        let root_ops = std::mem::take(&mut workspace.root_ops);
        let result = workspace.enumerate(&mut |assignment, values| {
            roots_now.clear();
            roots_now.extend(root_ops.iter().map(|op| values[*op]));
            failing.clear();
            keys.failing(assignment, &mut failing);
            holds &= test(&roots_now, &failing, &mentioned);
            if holds {
                enumerate::Next::Continue
            } else {
                enumerate::Next::Stop
            }
        });
        workspace.root_ops = root_ops;
        result.map(|()| holds)
    }

    /// Whether some legal assignment satisfies `test` on the root values. Stops at the first
    /// witness when the space's size is known without enumerating it (no dimensions share a
    /// key); the ceiling is still reported exactly. `test` must be monotone (turning a root
    /// value from false to true never turns the answer from true to false), which lets roots
    /// that can never hold decide the answer without enumerating.
    pub(crate) fn satisfiable<'g>(
        index: &Index<'g>,
        facts: &ControlFacts<'g>,
        roots: &[Pred<'g>],
        test: &dyn Fn(&[bool]) -> bool,
    ) -> Result<bool, Ceiling> {
        let mut workspace = facts.workspace.borrow_mut();
        let workspace = &mut *workspace;
        workspace.prepare(index, facts, roots, false)?;
        let exact = workspace.exclusive;
        if exact {
            if workspace.size.is_none() {
                return Err(Ceiling);
            }
            let mut optimistic = std::mem::take(&mut workspace.root_values);
            optimistic.clear();
            optimistic.extend(roots.iter().map(|r| !never_holds(r)));
            let hopeless = !test(&optimistic);
            workspace.root_values = optimistic;
            if hopeless {
                return Ok(false);
            }
        }
        let mut found = false;
        let mut roots_now = std::mem::take(&mut workspace.root_values);
        let root_ops = std::mem::take(&mut workspace.root_ops);
        let result = workspace.enumerate(&mut |_, values| {
            roots_now.clear();
            roots_now.extend(root_ops.iter().map(|op| values[*op]));
            found |= test(&roots_now);
            if found && exact {
                enumerate::Next::Stop
            } else {
                enumerate::Next::Continue
            }
        });
        workspace.root_values = roots_now;
        workspace.root_ops = root_ops;
        result.map(|()| found)
    }
}
