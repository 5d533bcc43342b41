//! Why a history does not replay against a graph; every variant names the offending execution
//! or node so the runtime can report it.

use trellis_graph::NodeName;

use crate::history::ExecutionId;

/// A history (or an incremental change) that is inconsistent with the graph's semantics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    #[error("execution {0:?} names a node that is not an executable of the graph")]
    UnknownNode(ExecutionId),
    #[error("execution {0:?} has map indices that do not match its node's map depth")]
    WrongOccurrenceDepth(ExecutionId),
    #[error("execution {0:?} appears more than once")]
    DuplicateExecution(ExecutionId),
    #[error("execution {0:?} is not in dispatch order")]
    NotInDispatchOrder(ExecutionId),
    #[error("execution {0:?} carries a ledger position that is zero, repeated or out of order")]
    InvalidPosition(ExecutionId),
    #[error("execution {0:?} uses a node instance inconsistent with its occurrence")]
    NodeInstanceMismatch(ExecutionId),
    #[error("execution {execution:?} has attempt {actual}, expected {expected}")]
    AttemptMismatch {
        execution: ExecutionId,
        expected: u32,
        actual: u32,
    },
    #[error("execution {0:?} was dispatched with an input the graph does not bind")]
    InputMismatch(ExecutionId),
    #[error("execution {0:?} was dispatched before its node was reached")]
    DispatchedTooEarly(ExecutionId),
    #[error("execution {0:?} settled with an outcome kind its node cannot produce")]
    OutcomeKindMismatch(ExecutionId),
    #[error("execution {0:?} does not correspond to any visit the graph makes")]
    UnconsumedExecution(ExecutionId),
    #[error("execution {0:?} was dispatched although the reducer did not ask for it")]
    UnexpectedDispatch(ExecutionId),
    #[error("execution {0:?} was voided although the reducer did not ask for it")]
    UnexpectedVoid(ExecutionId),
    #[error("execution {0:?} changed state in a way the ledger does not allow")]
    InvalidTransition(ExecutionId),
    #[error(
        "execution {execution:?}: write binding of {node} reads {path}, absent from the outcome"
    )]
    MissingOutputPath {
        execution: ExecutionId,
        node: NodeName,
        path: String,
    },
    #[error("node {node} reads {path}, which is absent from its state or item")]
    MissingStatePath { node: NodeName, path: String },
    #[error("node {node} writes {path} through a value that is not an object")]
    StateShape { node: NodeName, path: String },
    #[error("map {0} iterates over a value that is not an array")]
    MapOverNotArray(NodeName),
    #[error("an execution or node-instance id would overflow")]
    IdOverflow,
    /// Never expected: reported instead of panicking if the reducer's own bookkeeping breaks.
    #[error("reducer invariant broken: {0}")]
    Invariant(&'static str),
}
