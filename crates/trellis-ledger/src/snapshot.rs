//! The materialized state of a run: its head (run-level progress) and its executions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::NodeName;

use crate::admission::RunRecord;
use crate::ids::{Phase, RunId, RunKind};
pub use trellis_run_model::ExecutionState;
use trellis_run_model::{Cursor, TerminalResult, TokenUsage};

/// Run-level progress folded from events. Small and bounded by the number of *active*
/// executions, so storing it on every append costs the same for a long run as for a short one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunProgress {
    pub phase: Phase,
    pub force_stop_requested: bool,
    /// Active execution id → node, ordered by execution id.
    pub active_executions: BTreeMap<u64, NodeName>,
    /// How many executions the run has started (active, completed or voided).
    pub executions_started: u64,
    /// How many log, token-usage, GaP and controller events the run holds.
    pub auxiliary_events: u64,
    pub terminal: Option<TerminalResult>,
    pub token_usage: TokenUsage,
    pub controller: Option<ControllerInfo>,
    /// Ledger time of `run_started`.
    pub started_at_ms: Option<u64>,
    /// Ledger time of `terminal`.
    pub finished_at_ms: Option<u64>,
}

impl RunProgress {
    /// The progress of a freshly admitted run.
    pub fn admitted() -> Self {
        Self {
            phase: Phase::Admitted,
            force_stop_requested: false,
            active_executions: BTreeMap::new(),
            executions_started: 0,
            auxiliary_events: 0,
            terminal: None,
            token_usage: TokenUsage::default(),
            controller: None,
            started_at_ms: None,
            finished_at_ms: None,
        }
    }
}

/// The controller process that last attached to the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerInfo {
    pub pid: u32,
    pub started_at_ms: u64,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The cursor of the `controller_attached` event.
    pub attached_at: Cursor,
}

/// A run's identity, lineage, cursor and progress: everything but the executions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunHead {
    pub run_id: RunId,
    pub title: String,
    pub kind: RunKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_identity: Option<String>,
    pub created_at_ms: u64,
    pub predecessor: Option<RunId>,
    pub successor: Option<RunId>,
    /// The cursor of the run's last event ([`Cursor::START`] when it has none).
    pub cursor: Cursor,
    #[serde(flatten)]
    pub progress: RunProgress,
}

impl RunHead {
    /// Combines the admission record with progress at `cursor`.
    pub fn new(record: &RunRecord, cursor: Cursor, progress: RunProgress) -> Self {
        Self {
            run_id: record.run_id.clone(),
            title: record.title.clone(),
            kind: record.kind,
            graph_identity: record.graph_identity.clone(),
            created_at_ms: record.created_at_ms,
            predecessor: record.predecessor.clone(),
            successor: record.successor.clone(),
            cursor,
            progress,
        }
    }

    pub fn phase(&self) -> Phase {
        self.progress.phase
    }

    pub fn is_finished(&self) -> bool {
        self.progress.phase == Phase::Finished
    }
}

/// One node execution as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionSnapshot {
    pub node: NodeName,
    pub node_instance: u64,
    pub map_indices: Vec<u32>,
    pub attempt: u32,
    pub input: Value,
    pub worker: String,
    /// The cursor of its `node_started` event.
    pub started_at: Cursor,
    pub started_at_ms: u64,
    /// The process group of its worker, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_group: Option<u32>,
    /// Tokens this execution reported, when it reported any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<TokenUsage>,
    pub state: ExecutionState,
}

/// The whole state of a run: head plus every execution, keyed by execution id.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSnapshot {
    #[serde(flatten)]
    pub head: RunHead,
    pub executions: BTreeMap<u64, ExecutionSnapshot>,
}
