//! The execution history the reducer replays: one record per dispatched execution, in dispatch
//! order, with ledger positions as opaque monotone numbers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::NodeName;
pub use trellis_run_model::{ExecutionState, VoidReason};

/// Identifies one execution within a run; 1, 2, 3… in dispatch order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExecutionId(pub u64);

/// Identifies one structural occurrence's worker identity within a run. Every execution of the
/// same occurrence (crash retries and revisits in later loop rounds alike) shares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeInstanceId(pub u64);

/// Where an execution sits in the graph: an executable node plus the index of every enclosing
/// map item, outermost first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Occurrence {
    pub node: NodeName,
    pub map_indices: Vec<u32>,
}

/// One dispatched execution as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionRecord {
    pub execution: ExecutionId,
    pub node_instance: NodeInstanceId,
    pub occurrence: Occurrence,
    pub attempt: u32,
    pub input: Value,
    /// Ledger position of the dispatch.
    pub dispatched_at: u64,
    /// The execution's state as the ledger records it; the reducer reads its positions
    /// (`at`), outcome and void reason only.
    pub state: ExecutionState,
}

/// Every execution of a run, in dispatch order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct History {
    pub executions: Vec<ExecutionRecord>,
}

impl ExecutionRecord {
    /// The ledger positions this record carries: its dispatch, then its settlement or void.
    pub fn positions(&self) -> impl Iterator<Item = u64> {
        std::iter::once(self.dispatched_at).chain(self.state.ended_at())
    }
}

impl History {
    /// The latest ledger position mentioned anywhere in the history (0 when empty).
    pub fn latest_position(&self) -> u64 {
        self.executions
            .iter()
            .flat_map(ExecutionRecord::positions)
            .max()
            .unwrap_or(0)
    }
}
