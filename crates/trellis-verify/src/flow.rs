//! Dataflow state (§6.8): the Flow at a program point, the Effects a node summarizes, and the
//! ordered application of effects, choice-residual refinement and parallel reconciliation.

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::{FieldName, FieldPath, PayloadType};

use crate::nodeset::{NodeId, NodeSet};
use crate::predicate::{Pred, always};

/// A state path, shared cheaply between flows.
pub(crate) type SPath = Rc<FieldPath>;
/// A payload type, shared cheaply between flows.
pub(crate) type Ty = Rc<PayloadType>;

pub(crate) fn spath(segments: Vec<FieldName>) -> Option<SPath> {
    FieldPath::new(segments).ok().map(Rc::new)
}

/// A state write: its target, the written type and the paths it guarantees to define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriteFact {
    pub(crate) target: SPath,
    pub(crate) ty: Ty,
    pub(crate) guaranteed: BTreeMap<SPath, Ty>,
    /// The executables whose write this is, ascending (several once alternatives or branches
    /// are joined); a choice's common write resolves on their success (§13.6).
    pub(crate) producers: Vec<NodeId>,
}

/// A par's promoted writes, visible only while the par is known to have succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParallelEffect {
    pub(crate) par: NodeId,
    pub(crate) targets: Vec<SPath>,
    /// Affected path → (definition before the par, definition after its writes).
    pub(crate) transitions: BTreeMap<SPath, (Option<Ty>, Option<Ty>)>,
}

/// Pending writes per node, in first-insertion order.
pub(crate) type Pending = Vec<(NodeId, Vec<WriteFact>)>;

/// The abstract state at a program point.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    pub(crate) available: NodeSet,
    pub(crate) unavailable: NodeSet,
    pub(crate) conditional: BTreeMap<NodeId, NodeSet>,
    /// Shared until written: flows are cloned for every alternative and branch, and most of
    /// those never write state.
    pub(crate) defined: Rc<BTreeMap<SPath, Ty>>,
    pub(crate) failed: NodeSet,
    pub(crate) pending: Pending,
    pub(crate) parallel: Vec<Rc<ParallelEffect>>,
}

/// What a node's analysis hands to its successor.
#[derive(Debug, Clone)]
pub(crate) struct Effects<'g> {
    pub(crate) definite_nodes: NodeSet,
    pub(crate) unavailable_nodes: NodeSet,
    pub(crate) conditional: BTreeMap<NodeId, NodeSet>,
    pub(crate) definite_writes: BTreeMap<SPath, WriteFact>,
    /// Every write that may happen, with its distinct types in discovery order.
    pub(crate) possible_writes: BTreeMap<SPath, Vec<Ty>>,
    pub(crate) pending: Pending,
    pub(crate) parallel: Vec<Rc<ParallelEffect>>,
    pub(crate) exit_failed: NodeSet,
    pub(crate) falls_through: bool,
    pub(crate) completion: Pred<'g>,
}

impl Flow {
    /// The flow before the root: required paths of the initial input are defined.
    pub(crate) fn initial(initial_input: &PayloadType, capacity: usize) -> Self {
        let mut defined = BTreeMap::new();
        required_paths(initial_input, &mut Vec::new(), &mut defined);
        Flow {
            available: NodeSet::with_capacity(capacity),
            unavailable: NodeSet::with_capacity(capacity),
            conditional: BTreeMap::new(),
            defined: Rc::new(defined),
            failed: NodeSet::with_capacity(capacity),
            pending: Vec::new(),
            parallel: Vec::new(),
        }
    }

    /// Whether a node's outputs and controls may be read here.
    pub(crate) fn dominates(&self, node: NodeId) -> bool {
        self.available.contains(node) && !self.unavailable.contains(node)
    }
}

/// Every path reachable through required record fields, with its declared type.
pub(crate) fn required_paths(
    ty: &PayloadType,
    prefix: &mut Vec<FieldName>,
    out: &mut BTreeMap<SPath, Ty>,
) {
    let Some(fields) = ty.fields() else {
        return;
    };
    for (name, field) in fields {
        if !field.required {
            continue;
        }
        prefix.push(name.clone());
        if let Some(path) = spath(prefix.clone()) {
            out.insert(path, Rc::new(field.ty.clone()));
        }
        required_paths(&field.ty, prefix, out);
        prefix.pop();
    }
}

/// Applies a write to a definition map: overlapping paths go, guaranteed paths come.
pub(crate) fn write_defined(defined: &mut BTreeMap<SPath, Ty>, fact: &WriteFact) {
    defined.retain(|path, _| !path.overlaps(&fact.target));
    for (path, ty) in &fact.guaranteed {
        defined.insert(path.clone(), ty.clone());
    }
}

/// Records a definite write in an effects map; older overlapping facts are dropped or lose
/// the guaranteed paths the new write replaces.
pub(crate) fn record_write(writes: &mut BTreeMap<SPath, WriteFact>, fact: WriteFact) {
    writes.retain(|target, _| !fact.target.is_prefix_of(target));
    for (target, old) in writes.iter_mut() {
        if target.is_prefix_of(&fact.target) {
            old.guaranteed.retain(|p, _| !p.overlaps(&fact.target));
        }
    }
    writes.insert(fact.target.clone(), fact);
}

/// Adds a possible write type, keeping each distinct type once.
pub(crate) fn record_possible(possible: &mut BTreeMap<SPath, Vec<Ty>>, path: &SPath, ty: &Ty) {
    let types = possible.entry(path.clone()).or_default();
    if !types.contains(ty) {
        types.push(ty.clone());
    }
}

pub(crate) fn merge_pending(into: &mut Pending, node: NodeId, writes: &[WriteFact]) {
    match into.iter_mut().find(|(n, _)| *n == node) {
        Some((_, existing)) => {
            for w in writes {
                if !existing.contains(w) {
                    existing.push(w.clone());
                }
            }
        }
        None => into.push((node, writes.to_vec())),
    }
}

/// Step 2 of applying effects: older parallel targets overlapped by `writes` are dropped,
/// except targets owned by the incoming effects' own new parallel effects.
fn drop_overlapped(
    effects: &mut Vec<Rc<ParallelEffect>>,
    writes: &[&SPath],
    owned: &[Rc<ParallelEffect>],
) {
    if writes.is_empty() {
        return;
    }
    let killers: Vec<&SPath> = writes
        .iter()
        .copied()
        .filter(|w| !owned.iter().any(|e| e.targets.contains(w)))
        .collect();
    if killers.is_empty() {
        return;
    }
    for effect in effects.iter_mut() {
        if !effect
            .targets
            .iter()
            .any(|t| killers.iter().any(|k| k.overlaps(t)))
        {
            continue;
        }
        let effect = Rc::make_mut(effect);
        effect
            .targets
            .retain(|t| !killers.iter().any(|k| k.overlaps(t)));
        let targets = effect.targets.clone();
        effect
            .transitions
            .retain(|p, _| targets.iter().any(|t| t.is_prefix_of(p)));
    }
    effects.retain(|e| !e.targets.is_empty());
}

impl<'g> Effects<'g> {
    /// Effects that change nothing (an implicit empty alternative) from `flow`.
    pub(crate) fn empty(flow: &Flow) -> Self {
        Self::empty_failing(flow.failed.clone())
    }

    /// Effects that change nothing and leave `exit_failed` failed.
    pub(crate) fn empty_failing(exit_failed: NodeSet) -> Self {
        Effects {
            definite_nodes: NodeSet::default(),
            unavailable_nodes: NodeSet::default(),
            conditional: BTreeMap::new(),
            definite_writes: BTreeMap::new(),
            possible_writes: BTreeMap::new(),
            pending: Vec::new(),
            parallel: Vec::new(),
            exit_failed,
            falls_through: true,
            completion: always(),
        }
    }
}

/// Threads effects through a flow while accumulating the combined effects (the delta).
#[derive(Debug, Clone)]
pub(crate) struct Tracker<'g> {
    pub(crate) flow: Flow,
    pub(crate) acc: Effects<'g>,
}

impl<'g> Tracker<'g> {
    pub(crate) fn new(flow: Flow) -> Self {
        // `exit_failed` is only read after `finish`, which sets it.
        let acc = Effects::empty_failing(NodeSet::default());
        Tracker { flow, acc }
    }

    /// Applies a successor's effects in the contract's order (§6.8 steps 1–8).
    pub(crate) fn apply(&mut self, e: &Effects<'g>) {
        let (flow, acc) = (&mut self.flow, &mut self.acc);
        flow.available.union_with(&e.definite_nodes);
        acc.definite_nodes.union_with(&e.definite_nodes);
        flow.unavailable.union_with(&e.unavailable_nodes);
        acc.unavailable_nodes.union_with(&e.unavailable_nodes);
        for (owner, nodes) in &e.conditional {
            flow.conditional
                .entry(*owner)
                .or_default()
                .union_with(nodes);
            acc.conditional.entry(*owner).or_default().union_with(nodes);
        }
        let targets: Vec<&SPath> = e.definite_writes.keys().collect();
        drop_overlapped(&mut flow.parallel, &targets, &e.parallel);
        drop_overlapped(&mut acc.parallel, &targets, &e.parallel);
        for fact in e.definite_writes.values() {
            write_defined(Rc::make_mut(&mut flow.defined), fact);
            record_write(&mut acc.definite_writes, fact.clone());
        }
        flow.parallel.extend(e.parallel.iter().cloned());
        acc.parallel.extend(e.parallel.iter().cloned());
        for (node, writes) in &e.pending {
            merge_pending(&mut flow.pending, *node, writes);
            merge_pending(&mut acc.pending, *node, writes);
        }
        for (path, types) in &e.possible_writes {
            for ty in types {
                record_possible(&mut acc.possible_writes, path, ty);
            }
        }
        flow.failed.clone_from(&e.exit_failed);
        self.reconcile();
        self.resolve_pending();
    }

    /// Enters a choice alternative whose residual shows `succeeded` nodes succeeding and
    /// `failed_pars` failing.
    pub(crate) fn refine(&mut self, succeeded: &[NodeId], failed_pars: &[NodeId]) {
        for node in succeeded {
            self.flow.failed.remove(*node);
        }
        for par in failed_pars {
            if let Some(nodes) = self.flow.conditional.get(par).cloned() {
                self.flow.unavailable.union_with(&nodes);
                self.acc.unavailable_nodes.union_with(&nodes);
            }
            self.flow.failed.insert(*par);
        }
        self.resolve_pending();
        self.reconcile();
    }

    /// Pending writes of nodes no longer in `failed` become definite (step 8). Only writes
    /// made inside the tracked group become its definite writes; a write pending from before
    /// the group joins the flow's definitions alone (§13.7).
    fn resolve_pending(&mut self) {
        let ready: Vec<NodeId> = self
            .flow
            .pending
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !self.flow.failed.contains(*n))
            .collect();
        for node in ready {
            let Some(at) = self.flow.pending.iter().position(|(n, _)| *n == node) else {
                continue;
            };
            let (_, writes) = self.flow.pending.remove(at);
            let own = match self.acc.pending.iter().position(|(n, _)| *n == node) {
                Some(at) => self.acc.pending.remove(at).1,
                None => Vec::new(),
            };
            let targets: Vec<&SPath> = writes.iter().map(|w| &w.target).collect();
            drop_overlapped(&mut self.flow.parallel, &targets, &[]);
            drop_overlapped(&mut self.acc.parallel, &targets, &[]);
            for fact in &writes {
                write_defined(Rc::make_mut(&mut self.flow.defined), fact);
            }
            for fact in own {
                record_write(&mut self.acc.definite_writes, fact);
            }
        }
    }

    /// Par promotions are visible only where the par is known to have succeeded.
    fn reconcile(&mut self) {
        let flow = &mut self.flow;
        if flow.parallel.is_empty() {
            return;
        }
        let active: Vec<Rc<ParallelEffect>> = flow
            .parallel
            .iter()
            .filter(|e| flow.available.contains(e.par))
            .cloned()
            .collect();
        for effect in active.iter().rev() {
            for (path, (before, _)) in &effect.transitions {
                set_defined(Rc::make_mut(&mut flow.defined), path, before);
            }
        }
        for effect in &active {
            if flow.failed.contains(effect.par) {
                continue;
            }
            Rc::make_mut(&mut flow.defined)
                .retain(|p, _| !effect.targets.iter().any(|t| t.overlaps(p)));
            for (path, (_, after)) in &effect.transitions {
                set_defined(Rc::make_mut(&mut flow.defined), path, after);
            }
        }
    }

    /// The accumulated effects, with `failed` at exit.
    pub(crate) fn finish(mut self) -> (Flow, Effects<'g>) {
        self.acc.exit_failed.clone_from(&self.flow.failed);
        (self.flow, self.acc)
    }
}

fn set_defined(defined: &mut BTreeMap<SPath, Ty>, path: &SPath, ty: &Option<Ty>) {
    match ty {
        Some(ty) => {
            defined.insert(path.clone(), ty.clone());
        }
        None => {
            defined.remove(path);
        }
    }
}
