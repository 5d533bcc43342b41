//! Why a runtime plan was refused: the one error every plan check returns.

use trellis_graph::NodeName;

/// Why a plan was refused. Every variant that concerns a node names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("runtime plan is not valid JSON for its shape: {0}")]
    Malformed(String),
    #[error("runtime plan has no binding for executable node {0}")]
    MissingBinding(NodeName),
    #[error("runtime plan contains a binding for non-executable node {0}")]
    UnexpectedBinding(NodeName),
    #[error("agent-backed node {0} requires authored instructions")]
    AgentWithoutInstructions(NodeName),
    #[error("node {0} has an agent binding, so the plan needs `harness` and `provider`")]
    HarnessMissing(NodeName),
    #[error("harness {harness} does not support provider {provider}")]
    UnsupportedProvider { harness: String, provider: String },
    #[error("node {0} has a git_delivery binding but its worker is not a built-in delivery worker")]
    DeliveryBindingOnNonDelivery(NodeName),
    #[error("node {0} runs a built-in delivery worker, which cannot be an agent")]
    AgentOnDeliveryWorker(NodeName),
    #[error("node {node}: {problem}")]
    InvalidBinding { node: NodeName, problem: String },
}
