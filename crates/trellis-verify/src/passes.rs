//! The analyzer passes in §6.3 order (profile, semantic/dataflow walk, terminal coverage,
//! reference graph, structural folds) and the structural bounds of a clean graph.

use trellis_graph::{
    DiagnosticCode, FieldName, FieldPath, GraphProfile, GraphSpec, PathSegment, PositiveInteger,
    StructuralBounds, TerminationWitness,
};

use crate::diag::Diags;
use crate::{analyze, folds, index, nodeset, reach, refs};

/// The analyzer passes in §6.3 order; returns the bounds when the graph is clean so far.
pub(crate) fn analyze_into(
    spec: &GraphSpec,
    index: &index::Index,
    diags: &mut Diags,
) -> Option<StructuralBounds> {
    let order = analyze_passes(spec, index, diags);
    fold_bounds(index, order, diags)
}

/// The passes up to the reference graph (§6.3 passes 1–6); returns the acyclic order.
pub(crate) fn analyze_passes(
    spec: &GraphSpec,
    index: &index::Index,
    diags: &mut Diags,
) -> Option<Vec<nodeset::NodeId>> {
    if spec.profile != GraphProfile::Full {
        diags.emit(
            DiagnosticCode::InvalidGraphShape,
            "production full-v1 verifier accepts only openengine.graph.full/v1",
            vec![PathSegment::field("profile")],
            [],
        );
    }
    let root_state = spec.root.group_state().unwrap_or(&spec.initial_input);
    let root_input =
        analyze::fill_root_state(&spec.initial_input, root_state, analyze::Filled::AsInput);
    let defined_input =
        analyze::fill_root_state(&spec.initial_input, root_state, analyze::Filled::AsState);
    let analysis = analyze::run(
        index,
        &spec.initial_input,
        &root_input,
        &defined_input,
        diags,
    );
    reach::check(index, &analysis, diags);
    let references = index
        .write_references
        .iter()
        .copied()
        .chain(analysis.control_references.iter().copied());
    refs::order(index, references, diags)
}

/// The structural folds (pass 7), then the bounds when the graph is clean.
pub(crate) fn fold_bounds(
    index: &index::Index,
    order: Option<Vec<nodeset::NodeId>>,
    diags: &mut Diags,
) -> Option<StructuralBounds> {
    let fold = folds::fold_root(index, diags);
    if !diags.is_empty() {
        return None;
    }
    bounds_of(index, order?, &fold?)
}

/// The structural bounds of a clean graph from its acyclic order (used when it has no loops)
/// and its folds.
pub(crate) fn bounds_of(
    index: &index::Index,
    order: Vec<nodeset::NodeId>,
    fold: &folds::Fold,
) -> Option<StructuralBounds> {
    let termination = if index.loops.is_empty() {
        TerminationWitness::Acyclic {
            order: order.iter().map(|id| index.name(*id).clone()).collect(),
        }
    } else {
        TerminationWitness::Bounded {
            ranking: index
                .loops
                .iter()
                .filter_map(|l| {
                    FieldPath::new(vec![FieldName::new(index.name(*l).as_str()).ok()?]).ok()
                })
                .collect(),
            max_iterations: PositiveInteger::new(fold.loop_entries).ok()?,
        }
    };
    Some(StructuralBounds {
        termination,
        max_node_executions: PositiveInteger::new(fold.executions.max(1)).ok()?,
        peak_concurrency: PositiveInteger::new(fold.concurrency.max(1)).ok()?,
        attempts_per_node: index.attempts_per_node(),
    })
}
