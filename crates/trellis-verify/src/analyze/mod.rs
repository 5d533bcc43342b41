//! Pass 4, the semantic/dataflow walk (§6.4–§6.9): one recursive descent from the root that
//! threads the Flow, validates bindings and guards, and records control facts for later checks.

mod bindings;
mod choice;
mod groups;
mod par;
mod promote;

use std::collections::BTreeMap;
use std::rc::Rc;

use trellis_graph::{DiagnosticCode, GraphNode, NodeName, PayloadType, RecordField};

use crate::assign::{Assignments, Ceiling, Check, Classified, ControlFacts, Presence};
use crate::at::At;
use crate::diag::{ASSIGNMENT_CEILING, Diags, Path, Step, extend};
use crate::flow::{Effects, Flow, SPath, Ty};
use crate::index::Index;
use crate::nodeset::NodeId;
use crate::predicate::Pred;

/// The enclosing map body of the node being analysed.
#[derive(Debug)]
pub(crate) struct MapScope {
    pub(crate) map: NodeId,
    /// Element type of `over`, when it resolved to an array.
    pub(crate) item: Option<Ty>,
    /// Indexed promotion targets: state path → element type.
    pub(crate) overrides: BTreeMap<SPath, Ty>,
}

/// Lexical context of a node: the state it sees, its map body, and its map presence.
#[derive(Debug, Clone)]
pub(crate) struct Scope<'g> {
    pub(crate) state: &'g PayloadType,
    pub(crate) map: Option<Rc<MapScope>>,
    pub(crate) presence: Option<Pred<'g>>,
}

/// What the semantic pass leaves for the later passes.
#[derive(Debug, Default)]
pub(crate) struct Analysis<'g> {
    /// Per occurrence: whether normal continuation is possible (`None`: never analysed).
    pub(crate) falls: Vec<Option<bool>>,
    /// Per analysed choice occurrence: reachability of its branches, then its otherwise.
    pub(crate) alternatives: crate::index::FastMap<NodeId, Vec<bool>>,
    /// Choice and par-first → guard selector names.
    pub(crate) control_references: Vec<(NodeId, &'g NodeName)>,
}

/// The choice alternative an executable belongs to when it is definite in some but not all
/// completing alternatives (§13.6).
#[derive(Debug)]
pub(crate) struct BranchOwner<'g> {
    pub(crate) choice: NodeId,
    pub(crate) choice_completion: Pred<'g>,
    pub(crate) branch_completion: Pred<'g>,
}

/// One completing alternative of a choice carrying a common pending write: its completion and
/// the producers of the write in it (§13.6).
#[derive(Debug)]
pub(crate) struct CommonWriter<'g> {
    pub(crate) completion: Pred<'g>,
    pub(crate) producers: Vec<NodeId>,
}

pub(crate) struct Analyzer<'a, 'g> {
    /// Results of single-root satisfiability checks, keyed by predicate address (the entry
    /// keeps the predicate alive so the address cannot be reused).
    pub(crate) single_checks: crate::index::FastMap<*const (), (Pred<'g>, Option<bool>)>,
    pub(crate) index: &'a Index<'g>,
    pub(crate) initial_input: &'g PayloadType,
    pub(crate) diags: &'a mut Diags,
    pub(crate) facts: ControlFacts<'g>,
    pub(crate) out: Analysis<'g>,
    /// Executables owned by one alternative of an earlier choice.
    pub(crate) branch_owned: crate::index::FastMap<NodeId, BranchOwner<'g>>,
    /// Choices that carry a common pending write, keyed by the choice.
    pub(crate) common_writes: crate::index::FastMap<NodeId, Vec<CommonWriter<'g>>>,
}

/// Runs the semantic pass over the whole graph; the root sees `root_input` and the initial
/// definitions come from `defined_input` (the initial input filled by [`fill_root_state`]).
pub(crate) fn run<'g>(
    index: &Index<'g>,
    initial_input: &'g PayloadType,
    root_input: &'g PayloadType,
    defined_input: &PayloadType,
    diags: &mut Diags,
) -> Analysis<'g> {
    let mut analyzer = Analyzer {
        single_checks: crate::index::FastMap::default(),
        index,
        initial_input,
        diags,
        facts: ControlFacts::default(),
        out: Analysis {
            falls: vec![None; index.len()],
            ..Analysis::default()
        },
        branch_owned: crate::index::FastMap::default(),
        common_writes: crate::index::FastMap::default(),
    };
    let flow = Flow::initial(defined_input, index.len());
    let scope = Scope {
        state: root_input,
        map: None,
        presence: None,
    };
    if index.len() > 0 {
        analyzer.analyze(0, &flow, &scope);
    }
    analyzer.out
}

impl<'a, 'g> Analyzer<'a, 'g> {
    pub(crate) fn name(&self, id: NodeId) -> &'g NodeName {
        self.index.name(id)
    }

    pub(crate) fn canon(&self, id: NodeId) -> NodeId {
        self.index.entry(id).canon
    }

    pub(crate) fn at(&self, id: NodeId, steps: &[Step]) -> Path {
        extend(&self.index.path(id), steps)
    }

    /// Analyses one occurrence and records whether it falls through.
    pub(crate) fn analyze(&mut self, id: NodeId, flow: &Flow, scope: &Scope<'g>) -> Effects<'g> {
        let canon = self.canon(id);
        if let (Some(map), Some(pred)) = (&scope.map, &scope.presence) {
            self.facts.presence.entry(canon).or_insert(Presence {
                owner: map.map,
                pred: pred.clone(),
            });
        }
        let effects = match self.index.node(id) {
            GraphNode::Step(_) | GraphNode::Verifier(_) => self.executable(id, flow, scope),
            GraphNode::Succeed(_) | GraphNode::Fail(_) => self.terminal(id, flow, scope),
            GraphNode::Seq(_) => self.seq(id, flow, scope),
            GraphNode::Choice(_) => self.choice(id, flow, scope),
            GraphNode::Par(_) => self.par(id, flow, scope),
            GraphNode::Loop(_) => self.loop_(id, flow, scope),
            GraphNode::Map(_) => self.map(id, flow, scope),
        };
        self.out.falls[id as usize] = Some(effects.falls_through);
        effects
    }

    /// Every group: the incoming state, refined by definitions, must fit the declared state.
    pub(crate) fn check_group_state(
        &mut self,
        id: NodeId,
        declared: &PayloadType,
        flow: &Flow,
        scope: &Scope<'g>,
    ) {
        // Fast path (the common case of a group re-declaring its parent's state): every
        // definition refines the declared state, so the refined state fits; it implies the
        // full check without building the refined type.
        let refines_declared = scope.state == declared
            && flow.defined.iter().all(|(path, ty)| {
                declared
                    .lookup(path)
                    .is_some_and(|(at, _)| ty.is_subtype_of(at))
            });
        // The root sees the filled input itself: its definitions type the fields the run
        // fills as the root state does, which would make the check vacuous for them.
        let fits = refines_declared
            || if id == 0 {
                scope.state.is_subtype_of(declared)
            } else {
                refined(scope.state, &flow.defined, &mut Vec::new()).is_subtype_of(declared)
            };
        if !fits {
            self.diags.emit(
                DiagnosticCode::SchemaSafety,
                "incoming state is not a subtype of the group's declared state",
                self.at(id, &[Step::Field("state")]),
                [self.name(id)],
            );
        }
    }

    /// Whether some legal assignment of `roots` passes `test`; `None` (after reporting the
    /// ceiling at `at`) when the space is too large.
    pub(crate) fn satisfiable(
        &mut self,
        roots: &[Pred<'g>],
        at: At,
        test: &dyn Fn(&[bool]) -> bool,
    ) -> Option<bool> {
        // Constant roots read no guards: one empty assignment decides them.
        if let Some(values) = roots
            .iter()
            .map(crate::predicate::constant)
            .collect::<Option<Vec<bool>>>()
        {
            return Some(test(&values));
        }
        // A single root already checked (a sequence wrapping one non-trivial child) has the
        // same space and answer; the ceiling is reported again at this check's path.
        let single = (roots.len() == 1).then(|| Rc::as_ptr(&roots[0]) as *const ());
        let cached = single.and_then(|ptr| self.single_checks.get(&ptr).map(|(_, r)| *r));
        let result = match cached {
            Some(Some(value)) => Ok(test(&[value])),
            Some(None) => Err(crate::assign::Ceiling),
            None => {
                let result = if single.is_some() {
                    Check::satisfiable(self.index, &self.facts, roots, &|v| v[0])
                } else {
                    Check::satisfiable(self.index, &self.facts, roots, test)
                };
                if let Some(ptr) = single {
                    self.single_checks
                        .insert(ptr, (roots[0].clone(), result.ok()));
                    result.map(|value| test(&[value]))
                } else {
                    result
                }
            }
        };
        if result.is_err() {
            self.diags.emit(
                DiagnosticCode::CeilingExceeded,
                ASSIGNMENT_CEILING,
                at.path(self.index),
                [],
            );
        }
        result.ok()
    }

    /// Records the answer of a single-root check already known from a larger one over the
    /// same space (the first answer for a predicate stays).
    pub(crate) fn remember_single(&mut self, pred: &Pred<'g>, satisfiable: bool) {
        if crate::predicate::constant(pred).is_some() {
            return;
        }
        self.single_checks
            .entry(Rc::as_ptr(pred) as *const ())
            .or_insert_with(|| (pred.clone(), Some(satisfiable)));
    }

    /// The root values of a check's legal assignments, reporting the ceiling at `at`.
    pub(crate) fn assignments(
        &mut self,
        roots: &[Pred<'g>],
        at: At,
    ) -> Result<Assignments, Ceiling> {
        let result = Check::assignments(self.index, &self.facts, roots);
        self.report_ceiling(result, at)
    }

    /// A choice's legal assignments classified by branch, reporting the ceiling at `at`.
    pub(crate) fn classify(&mut self, roots: &[Pred<'g>], at: At) -> Result<Classified, Ceiling> {
        let result = Check::classify(self.index, &self.facts, roots);
        self.report_ceiling(result, at)
    }

    fn report_ceiling<T>(&mut self, result: Result<T, Ceiling>, at: At) -> Result<T, Ceiling> {
        if result.is_err() {
            self.diags.emit(
                DiagnosticCode::CeilingExceeded,
                ASSIGNMENT_CEILING,
                at.path(self.index),
                [],
            );
        }
        result
    }
}

/// Whether `node`, which does not dominate a guard, may still be read through `error` there:
/// it belongs to one alternative of an earlier choice that dominates the guard, and on every
/// legal assignment where that choice completed and the guards evaluated before the selector
/// went their way, that alternative was the one taken (§13.6).
pub(crate) fn masked_error<'g>(
    index: &Index<'g>,
    facts: &ControlFacts<'g>,
    owners: &crate::index::FastMap<NodeId, BranchOwner<'g>>,
    flow: &Flow,
    node: NodeId,
    earlier: &[crate::guards::Earlier<'g>],
) -> bool {
    let Some(owner) = owners.get(&node) else {
        return false;
    };
    if !flow.dominates(owner.choice) {
        return false;
    }
    let prefix = crate::predicate::and(
        earlier
            .iter()
            .map(|e| {
                let g = crate::predicate::guard(e.guard);
                if e.held { g } else { crate::predicate::not(g) }
            })
            .collect(),
    );
    let roots = [
        owner.choice_completion.clone(),
        prefix,
        crate::predicate::not(owner.branch_completion.clone()),
    ];
    Check::satisfiable(index, facts, &roots, &|v| v.iter().all(|held| *held)) == Ok(false)
}

/// The state type as seen at a program point: optional fields with a definition become
/// required, and defined paths take their refined types.
pub(crate) fn refined(
    ty: &PayloadType,
    defined: &BTreeMap<SPath, Ty>,
    prefix: &mut Vec<trellis_graph::FieldName>,
) -> PayloadType {
    let Some(fields) = ty.fields() else {
        return ty.clone();
    };
    let mut out = trellis_graph::Fields::with_capacity(fields.len());
    for (name, field) in fields {
        prefix.push(name.clone());
        let here = crate::flow::spath(prefix.clone());
        let definition = here.as_ref().and_then(|p| defined.get(p));
        let base: &PayloadType = definition.map_or(&field.ty, |t| t);
        let inner = refined(base, defined, prefix);
        out.insert(
            name.clone(),
            RecordField {
                ty: inner,
                required: field.required || definition.is_some(),
            },
        );
        prefix.pop();
    }
    PayloadType::Record { fields: out }
}

/// Whether a run fills a missing required field of this type with an empty value.
fn fillable(ty: &PayloadType) -> bool {
    match ty {
        PayloadType::String | PayloadType::Null | PayloadType::Array { .. } => true,
        PayloadType::Record { fields } => fields.values().all(|f| !f.required || fillable(&f.ty)),
        _ => false,
    }
}

/// How [`fill_root_state`] types an optional input field the run fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filled {
    /// As the input declares it, made required: the root state check sees this.
    AsInput,
    /// As the root state declares it: the initial definitions see this.
    AsState,
}

/// The initial input as a run's first state sees it. A run starts by filling missing required
/// string/null/array/record fields of the root state with empty values, and the reference
/// product admits its own templates only under this reading: required root-state fields that a run
/// fills (absent or optional in the input) become present, recursively through records (also
/// through an optional record, filled inside when given). An absent field takes the root
/// state's type; an optional one the type `filled` says (the reference checks the root state
/// against the input's type but defines the state's).
pub(crate) fn fill_root_state(
    input: &PayloadType,
    state: &PayloadType,
    filled: Filled,
) -> PayloadType {
    let (Some(given), Some(wanted)) = (input.fields(), state.fields()) else {
        return input.clone();
    };
    let mut fields = given.clone();
    for (name, want) in wanted {
        let filled_here = want.required && fillable(&want.ty);
        match fields.get_mut(name) {
            Some(have) if have.required => have.ty = fill_root_state(&have.ty, &want.ty, filled),
            Some(have) if filled_here => {
                have.ty = match filled {
                    Filled::AsInput => fill_root_state(&have.ty, &want.ty, filled),
                    Filled::AsState => want.ty.clone(),
                };
                have.required = true;
            }
            // An optional record the input may carry is filled inside when it is given.
            Some(have) => have.ty = fill_root_state(&have.ty, &want.ty, filled),
            None if filled_here => {
                fields.insert(name.clone(), want.clone());
            }
            None => {}
        }
    }
    PayloadType::Record { fields }
}
