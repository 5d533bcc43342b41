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
mod admission;
mod ahead;
mod analyze;
mod assign;
mod at;
pub mod builtin;
mod canonical;
pub mod delivery_overlap;
mod diag;
mod domain;
mod flow;
mod folds;
mod guards;
mod index;
mod merge;
mod nodeset;
mod passes;
pub mod plan_rules;
mod predicate;
mod reach;
mod refs;
mod registry_check;
mod verification;

use trellis_graph::{GraphDiagnostic, GraphSpec, WorkerRegistry};

pub use builtin::verify_builtin;
pub use canonical::{CanonicalError, GraphIdentity, canonical_bytes, graph_identity};
pub use registry_check::{WorkerIssue, WorkerIssueKind, check_workers};
pub use verification::{Verification, VerifiedGraph};

use admission::{check, compile, verify_with};
use diag::Diags;
use passes::analyze_into;

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

/// The reference templates directory for unit tests (`None`, with a note, when the
/// conformance vectors are absent outside CI).
#[cfg(test)]
fn tests_support_templates() -> Option<std::path::PathBuf> {
    trellis_graph::conformance::require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|dir| dir.join("zeroshot-templates"))
}
