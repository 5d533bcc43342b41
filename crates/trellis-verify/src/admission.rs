//! Admission of one graph: the analyzer, then the worker registry only when the analyzer found
//! nothing, then the compiled IR and its identity.

use trellis_graph::{
    CompiledGraphIr, GraphDiagnostic, GraphSpec, StructuralBounds, WorkerRegistry,
};

use crate::ahead;
use crate::canonical::graph_identity;
use crate::diag::{self, Diags};
use crate::index;
use crate::registry_check::{self, WorkerIssue};
use crate::verification::{Verification, VerifiedGraph};

/// [`verify`](crate::verify) with admission diagnostics found before the analyzer (built-in
/// registry rules); they are reported together with the analyzer's and also keep the registry
/// unconsulted.
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
pub(crate) enum Refusal {
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
pub(crate) struct Admitted {
    bounds: StructuralBounds,
    identity: Option<ahead::Identity>,
}

/// Analyzer, then registry: the bounds of an admitted graph, or why it is refused.
pub(crate) fn check(
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
pub(crate) fn compile(spec: GraphSpec, admitted: Admitted) -> Verification {
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
