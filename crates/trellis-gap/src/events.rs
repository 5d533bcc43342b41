//! Progress events the executor reports, the observer trait, and the serialized run result.

use crate::checkpoint::CheckpointResult;
use crate::issue::Issue;
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::{Map, Value};

/// One progress event; serialized as an NDJSON line `{"event": "<kind>", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// Execution began (after validation passed).
    RunStarted {
        workflow_dir: String,
        trace_dir: Option<String>,
    },
    /// A validation warning (errors abort before `run_started`).
    ValidationWarning { issue: Issue },
    /// A tool, script or router body started (`visit` is 0-based per node id).
    NodeStarted {
        node_id: String,
        node_type: String,
        visit: u32,
    },
    /// A body's output was taken from an earlier attempt of the run instead of running it
    /// again (a resumed run; see [`crate::NodeJournal`]).
    NodeReused { node_id: String, visit: u32 },
    /// The body finished successfully.
    NodeFinished { node_id: String, duration_ms: f64 },
    /// The body raised or could not run.
    NodeFailed {
        node_id: String,
        error: String,
        traceback: Option<String>,
    },
    /// The node was cancelled before or while running.
    NodeCancelled { node_id: String },
    /// A subgraph node began its inner scope.
    SubgraphEntered {
        node_id: String,
        subgraph: String,
        visit: u32,
    },
    /// A subgraph finished with its exit value and bound outputs.
    SubgraphExited {
        subgraph: String,
        exit_value: String,
        error_path: bool,
        outputs: Map<String, Value>,
    },
    /// A streaming node published a value.
    Published { node_id: String, value: Value },
    /// A line printed by a script, tool or the bridge (`node_id` null when unattributed).
    Log {
        node_id: Option<String>,
        stream: String,
        line: String,
    },
    /// A recovery tool call of the end node ran (`error` set when it raised; later calls still run).
    RecoveryCall {
        node_id: String,
        tool: String,
        error: Option<String>,
    },
    /// A checkpoint of a subgraph visit was evaluated.
    CheckpointEvaluated { result: CheckpointResult },
    /// The run ended.
    RunFinished { result: ExecutionResult },
}

/// Receives progress events; implementations must be cheap and must not block for long.
pub trait RunObserver: Send + Sync {
    /// Called from executor threads, possibly concurrently.
    fn on_event(&self, event: &RunEvent);
}

/// An observer that ignores every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullObserver;

impl RunObserver for NullObserver {
    fn on_event(&self, _: &RunEvent) {}
}

/// Collects every event in memory (tests, small tools).
#[derive(Debug, Default)]
pub struct CollectingObserver {
    events: std::sync::Mutex<Vec<RunEvent>>,
}

impl CollectingObserver {
    /// A snapshot of the events so far.
    pub fn events(&self) -> Vec<RunEvent> {
        self.events
            .lock()
            .map(|e| e.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }
}

impl RunObserver for CollectingObserver {
    fn on_event(&self, event: &RunEvent) {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        events.push(event.clone());
    }
}

/// Exit status of a finished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitStatus {
    Success,
    Failure,
}

/// Outcome of [`crate::execute`]; serializes exactly as
/// `{"exit_status","end_node","outputs","error"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionResult {
    /// Status of the end node reached; null when none was reached.
    pub exit_status: Option<ExitStatus>,
    /// Name of the end node reached.
    pub end_node: Option<String>,
    /// Bound outputs of the last visit of each subgraph.
    pub outputs: IndexMap<String, Map<String, Value>>,
    /// Why the run did not succeed (also set for a failure end node).
    pub error: Option<String>,
    /// The full id (`subgraph.node`) of the node whose failure ended the run without reaching
    /// an end node; not part of the serialized result, whose shape is fixed.
    #[serde(skip)]
    pub failed_node: Option<String>,
    /// Checkpoints evaluated after subgraph visits (omitted when none were).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<CheckpointResult>,
    /// Python traceback of the first failing node, when it came from Python.
    #[serde(skip)]
    pub traceback: Option<String>,
    /// Directory holding `dag_trace.json`, when traced.
    #[serde(skip)]
    pub trace_dir: Option<std::path::PathBuf>,
    /// Wall-clock duration in seconds.
    #[serde(skip)]
    pub duration_s: f64,
}

impl ExecutionResult {
    /// True when an end node with status `success` was reached without error.
    pub fn is_success(&self) -> bool {
        self.error.is_none() && self.exit_status == Some(ExitStatus::Success)
    }
}
