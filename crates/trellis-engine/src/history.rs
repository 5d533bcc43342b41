//! The execution history the reducer replays: one record per dispatched execution, in dispatch
//! order, with ledger positions as opaque monotone numbers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::{NodeName, WorkerOutcome};

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

/// Why the reducer asked for an active execution to be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoidReason {
    /// The execution belongs to a par branch that lost the join.
    ParallelJoin,
    /// The execution belongs to a map item whose sibling reached a terminal first.
    MapTerminal,
}

/// The durable state of one execution; `at` is the ledger position of the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExecutionState {
    Active,
    Settled { at: u64, outcome: WorkerOutcome },
    Voided { at: u64, reason: VoidReason },
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
        let end = match &self.state {
            ExecutionState::Active => None,
            ExecutionState::Settled { at, .. } | ExecutionState::Voided { at, .. } => Some(*at),
        };
        std::iter::once(self.dispatched_at).chain(end)
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
