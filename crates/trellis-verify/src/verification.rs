//! What verification returns: the admitted graph (compiled IR and identity), every
//! diagnostic of a rejection, or an internal failure, with the conformance envelope.

use serde_json::{Value, json};
use trellis_graph::{CompiledGraphIr, GraphDiagnostic};

use crate::canonical::GraphIdentity;

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
