//! The only graph the engine runs: one the verifier accepted. A reducer over an unverified
//! graph could meet what verification rules out (an unbounded loop, a choice with no branch,
//! a read of something never written); the type makes that impossible to ask for.

use trellis_graph::{GraphDiagnostic, GraphSpec, WorkerRegistry};
use trellis_verify::{Verification, VerifiedGraph};

/// Why the verifier refused a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Every diagnostic, in canonical order.
    Rejected(Vec<GraphDiagnostic>),
    /// The verifier failed on its own (never caused by the graph).
    Internal(String),
}

/// A verified GraphSpec, ready to be reduced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunnableGraph {
    spec: GraphSpec,
}

impl RunnableGraph {
    /// Verifies `spec` against `registry`: the runnable graph with its verification (IR,
    /// identity, bounds), or why it was refused.
    pub fn verify(
        spec: GraphSpec,
        registry: &dyn WorkerRegistry,
    ) -> Result<(Self, VerifiedGraph), Refusal> {
        let verification = trellis_verify::verify(&spec, registry);
        Self::accepted(spec, verification)
    }

    /// Verifies `spec` against Trellis's built-in worker registry.
    pub fn verify_builtin(spec: GraphSpec) -> Result<(Self, VerifiedGraph), Refusal> {
        let verification = trellis_verify::verify_builtin(&spec);
        Self::accepted(spec, verification)
    }

    fn accepted(
        spec: GraphSpec,
        verification: Verification,
    ) -> Result<(Self, VerifiedGraph), Refusal> {
        match verification {
            Verification::Verified(verified) => Ok((Self { spec }, verified)),
            Verification::Rejected(diagnostics) => Err(Refusal::Rejected(diagnostics)),
            Verification::Internal(message) => Err(Refusal::Internal(message)),
        }
    }

    /// A graph the engine's own tests reduce without verifying it (they exercise the reducer
    /// on shapes the verifier would refuse, and on workers no registry knows).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn unverified(spec: GraphSpec) -> Self {
        Self { spec }
    }

    /// The graph.
    pub fn spec(&self) -> &GraphSpec {
        &self.spec
    }
}
