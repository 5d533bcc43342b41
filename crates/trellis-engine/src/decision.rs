//! What a reduction tells the runtime: executions to dispatch, executions to void, the run's
//! terminal result, and an informational trace of completed nodes.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::{FieldPath, NodeName, WorkerRef};

pub use trellis_run_model::TerminalResult;

use crate::history::{ExecutionId, NodeInstanceId, Occurrence, VoidReason};

/// The failure reason of a run whose root completes without reaching a terminal node (the
/// reserved implicit sink; a verified graph never falls through).
pub const UNHANDLED_REASON: &str = "unhandled";

/// Start one worker execution. The runtime records it (as dispatched) before starting it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dispatch {
    pub execution: ExecutionId,
    pub node_instance: NodeInstanceId,
    pub occurrence: Occurrence,
    pub attempt: u32,
    pub worker: WorkerRef,
    pub input: Value,
}

/// Cancel an active execution whose result can no longer matter, then record it as voided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Void {
    pub execution: ExecutionId,
    pub reason: VoidReason,
}

/// One value a node copied into its enclosing state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromotedValue {
    pub path: FieldPath,
    pub value: Value,
}

/// A node completed (`continue`) or copied values outward (`promote`). Informational only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TraceDecision {
    #[serde(rename_all = "camelCase")]
    Continue {
        node: NodeName,
        map_indices: Vec<u32>,
    },
    #[serde(rename_all = "camelCase")]
    Promote {
        node: NodeName,
        map_indices: Vec<u32>,
        values: Vec<PromotedValue>,
    },
}

/// The decisions for one history.
///
/// * `dispatches` are in authored pre-order (map items in index order) with fresh ids following
///   the history's largest execution and node-instance ids.
/// * `voids` are ordered by dispatch; while any is listed `terminal` stays `None`.
/// * `trace` lists the node completions that happened at the history's latest ledger position,
///   so concatenating the traces of a run reduced after every change gives its full trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reduction {
    pub dispatches: Vec<Dispatch>,
    pub voids: Vec<Void>,
    pub terminal: Option<TerminalResult>,
    pub trace: Vec<TraceDecision>,
}
