//! The production verifier: diagnostics, control and dataflow analysis, structural bounds,
//! compiled IR, canonical bytes and SHA-256 graph identity.
//!
//! [`verify`] runs the analyzer passes of the contract in order (profile, index, global
//! limits, semantic/dataflow walk, terminal coverage, reference graph, structural folds),
//! consults the worker registry only when the analyzer found nothing, and returns either the
//! compiled IR with its identity or every diagnostic in canonical order. [`builtin`] holds
//! Trellis's built-in worker registry.

// The library has no unsafe code (the allocation-counting profiler example does, so the
// workspace-wide lint, which would cover it too, is not used here).
#![forbid(unsafe_code)]

mod addrmap;
mod ahead;
mod analyze;
mod assign;
pub mod builtin;
mod canonical;
mod diag;
mod domain;
mod flow;
mod folds;
mod guards;
mod index;
mod merge;
mod nodeset;
pub mod plan_rules;
mod predicate;
mod reach;
mod refs;
mod registry_check;

use serde_json::{Value, json};
use trellis_graph::{
    CompiledGraphIr, DiagnosticCode, FieldName, FieldPath, GraphDiagnostic, GraphProfile,
    GraphSpec, PathSegment, PositiveInteger, StructuralBounds, TerminationWitness, WorkerRegistry,
};

pub use builtin::verify_builtin;
pub use canonical::{CanonicalError, GraphIdentity, canonical_bytes, graph_identity};
pub use registry_check::{WorkerIssue, WorkerIssueKind, check_workers};

use diag::Diags;

/// The outcome of verification.
// Returned once per verification and usually `Verified`, so boxing would only add a hop.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// The graph is admitted: its compiled IR and identity.
    Verified(VerifiedGraph),
    /// The graph is rejected: every diagnostic, in the contract's canonical order.
    Rejected(Vec<GraphDiagnostic>),
    /// The verifier failed on a graph it had accepted (never caused by user input).
    Internal(String),
}

/// A verified graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedGraph {
    pub ir: CompiledGraphIr,
    pub identity: GraphIdentity,
}

impl Verification {
    /// The conformance envelope: `{status, diagnostics, compiledIr?}` or an internal error.
    pub fn envelope(&self) -> Value {
        match self {
            Self::Verified(graph) => json!({
                "status": "verified",
                "diagnostics": [],
                "compiledIr": graph.ir.to_value(),
            }),
            Self::Rejected(diagnostics) => json!({
                "status": "rejected",
                "diagnostics": serde_json::to_value(diagnostics).unwrap_or(Value::Null),
            }),
            Self::Internal(message) => json!({"status": "internal-error", "message": message}),
        }
    }

    /// The diagnostics of a rejection (empty otherwise).
    pub fn diagnostics(&self) -> &[GraphDiagnostic] {
        match self {
            Self::Rejected(list) => list,
            _ => &[],
        }
    }
}

/// Verifies a graph against a worker registry (§6.1 pipeline).
pub fn verify(spec: &GraphSpec, registry: &dyn WorkerRegistry) -> Verification {
    verify_with(spec, registry, Vec::new())
}

/// [`verify`] taking the graph by value, so the compiled IR reuses it instead of a copy.
pub fn verify_owned(spec: GraphSpec, registry: &dyn WorkerRegistry) -> Verification {
    match check(&spec, registry, Vec::new()) {
        Ok(admitted) => compile(spec, admitted),
        Err(refusal) => refusal.into(),
    }
}

/// Runs the analyzer only and returns its diagnostics in canonical order.
pub fn analyze(spec: &GraphSpec) -> Vec<GraphDiagnostic> {
    let mut diags = Diags::default();
    let index = index::Index::build(&spec.root, &mut diags);
    analyze_into(spec, &index, &mut diags);
    diags.into_sorted()
}

/// [`verify`] with admission diagnostics found before the analyzer (built-in registry rules);
/// they are reported together with the analyzer's and also keep the registry unconsulted.
pub(crate) fn verify_with(
    spec: &GraphSpec,
    registry: &dyn WorkerRegistry,
    admission: Vec<GraphDiagnostic>,
) -> Verification {
    match check(spec, registry, admission) {
        Ok(admitted) => compile(spec.clone(), admitted),
        Err(refusal) => refusal.into(),
    }
}

/// Why [`check`] did not admit a graph.
enum Refusal {
    Rejected(Vec<GraphDiagnostic>),
    Internal(String),
}

impl From<Refusal> for Verification {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Rejected(list) => Verification::Rejected(list),
            Refusal::Internal(message) => Verification::Internal(message),
        }
    }
}

/// What [`check`] found for an admitted graph: its bounds and what is known of its identity.
struct Admitted {
    bounds: StructuralBounds,
    identity: Option<ahead::Identity>,
}

/// Analyzer, then registry: the bounds of an admitted graph, or why it is refused.
fn check(
    spec: &GraphSpec,
    registry: &dyn WorkerRegistry,
    admission: Vec<GraphDiagnostic>,
) -> Result<Admitted, Refusal> {
    let mut diags = Diags::default();
    diags.extend(admission);
    let index = index::Index::build(&spec.root, &mut diags);
    // A large graph's identity is prepared on a second core while the analyzer runs.
    let (bounds, identity) = ahead::analyze_with_identity(spec, &index, &mut diags);
    if !diags.is_empty() {
        return Err(Refusal::Rejected(diags.into_sorted()));
    }
    let issues = registry_check::check_indexed(spec, &index, registry);
    if !issues.is_empty() {
        let list = issues.iter().map(WorkerIssue::to_diagnostic).collect();
        return Err(Refusal::Rejected(diag::sorted(list)));
    }
    let bounds = bounds.ok_or_else(|| {
        Refusal::Internal("structurally valid graph did not produce structural bounds".to_owned())
    })?;
    Ok(Admitted { bounds, identity })
}

/// The compiled IR of an admitted graph and its identity.
fn compile(spec: GraphSpec, admitted: Admitted) -> Verification {
    let prepared = admitted
        .identity
        .map(|identity| identity.finish(&admitted.bounds));
    let ir = CompiledGraphIr::from_spec(spec, admitted.bounds);
    let identity = match prepared {
        Some(identity) => Ok(identity),
        None => graph_identity(&ir),
    };
    match identity {
        Ok(identity) => Verification::Verified(VerifiedGraph { ir, identity }),
        Err(e) => {
            Verification::Internal(format!("validated graph could not be canonicalized: {e}"))
        }
    }
}

/// The analyzer passes in §6.3 order; returns the bounds when the graph is clean so far.
fn analyze_into(
    spec: &GraphSpec,
    index: &index::Index,
    diags: &mut Diags,
) -> Option<StructuralBounds> {
    let order = analyze_passes(spec, index, diags);
    fold_bounds(index, order, diags)
}

/// The passes up to the reference graph (§6.3 passes 1–6); returns the acyclic order.
fn analyze_passes(
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
fn fold_bounds(
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

/// The reference templates directory for unit tests (`None`, with a note, when the
/// conformance vectors are absent outside CI).
#[cfg(test)]
fn tests_support_templates() -> Option<std::path::PathBuf> {
    trellis_graph::conformance::require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|dir| dir.join("zeroshot-templates"))
}
