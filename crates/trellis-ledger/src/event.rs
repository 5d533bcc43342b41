//! The closed set of run events, the only way a run's state changes.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::{NodeName, WorkerOutcome};

use trellis_run_model::sanitize_log_message;

use crate::transitions::EventKind;
pub use trellis_run_model::{
    Cursor, LogLevel, LogStream, ReusedOutcome, SettledBy, TerminalResult, TokenUsage, VoidReason,
};

/// One durable fact about a run. Stored as JSON tagged by a snake_case `kind`, with camelCase
/// fields; unknown kinds and fields are rejected when stored events are read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum RunEvent {
    /// The controller began driving the run (`admitted → running`).
    RunStarted {},
    /// A controller process took ownership of the run; lets observers tell whether it is alive.
    ControllerAttached {
        pid: u32,
        /// When the controller process started, so a reused pid is not mistaken for it.
        started_at_ms: u64,
        host: String,
        /// The host's boot identity (Linux `boot_id`), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boot_id: Option<String>,
    },
    /// A dispatch: recorded before the worker starts.
    NodeStarted {
        execution: u64,
        node_instance: u64,
        node: NodeName,
        map_indices: Vec<u32>,
        attempt: u32,
        input: Value,
        worker: String,
    },
    /// A settled outcome: recorded before the next reduction.
    NodeCompleted {
        execution: u64,
        outcome: WorkerOutcome,
        /// Set when a resumed run reused a predecessor's settled outcome instead of running.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reused_from: Option<ReusedOutcome>,
        /// Set when Trellis settled the execution itself (the worker never reported), so a
        /// resumed run knows to run it again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        settled_by: Option<SettledBy>,
    },
    /// An active execution whose result no longer matters.
    ExecutionVoided { execution: u64, reason: VoidReason },
    /// A sanitized log line of the run or of one execution.
    Log {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        execution: Option<u64>,
        stream: LogStream,
        level: LogLevel,
        message: String,
        timestamp_ms: u64,
    },
    /// The worker process of an active execution started, in its own process group; lets a
    /// later command kill the group if the controller dies.
    WorkerProcess { execution: u64, process_group: u32 },
    /// Tokens (and cost, when known) one execution consumed since its previous report.
    TokenUsage { execution: u64, usage: TokenUsage },
    /// Someone asked the run to stop (`→ stopping`); no new dispatches after this.
    ForceStopRequested {},
    /// The run's result; nothing may follow it.
    Terminal { result: TerminalResult },
    /// A progress event of a GaP workflow run, kept as recorded.
    GapEvent { payload: Value },
    /// A GaP tool, script or router body is about to run: recorded before it starts, so a
    /// resumed run knows which bodies may have had effects without settling.
    GapNodeStarted {
        /// The full node id (`subgraph.node`, `<send>.target#i`).
        node: String,
        /// 0-based visit of that node id within the run.
        visit: u32,
        node_type: String,
    },
    /// A GaP body settled (or was reused from a predecessor): what a resumed run replays
    /// instead of running it again.
    GapNodeSettled {
        node: String,
        visit: u32,
        outcome: GapNodeOutcome,
    },
    /// The workspace was recorded before a dispatch wave, while nothing ran: files (a commit
    /// in the workspace repository's `refs/trellis/checkpoints/<run>/<number>`) and graph
    /// position (every execution below `next_execution` had settled) of one moment.
    CheckpointTaken {
        /// 1, 2, … within the run.
        number: u32,
        commit: String,
        tree: String,
        /// What it precedes: a writing node, or an outermost parallel group.
        before: CheckpointBefore,
        /// The first execution of the wave it precedes.
        next_execution: u64,
        /// Files added, changed or deleted since the previous checkpoint (the first: since
        /// `HEAD`), and the bytes of those added or changed.
        files_changed: u64,
        bytes_changed: u64,
        timestamp_ms: u64,
    },
}

/// How a GaP body settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "status",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum GapNodeOutcome {
    /// The body returned `output` (a router's body: the dict it returned). `output` is absent
    /// when it was too large to record (`omittedBytes`); such a body runs again on resume.
    Succeeded {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        omitted_bytes: Option<u64>,
        /// The run whose settled output this one reused instead of running.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reused_from: Option<crate::ids::RunId>,
    },
    /// The body failed with this error text.
    Failed { error: String },
    /// The body was cancelled (a force stop, a failing sibling).
    Cancelled {},
}

/// What a checkpoint precedes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckpointBefore {
    pub kind: CheckpointBeforeKind,
    pub name: NodeName,
}

/// A node or a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointBeforeKind {
    Node,
    Group,
}

/// A stored event with its position and the wall-clock time the ledger recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoredEvent {
    pub cursor: Cursor,
    pub recorded_at_ms: u64,
    pub event: RunEvent,
}

/// Which events a read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventFilter {
    #[default]
    All,
    /// Everything but `log` events: what `watch` follows.
    ExceptLogs,
    /// Only `log` events: what `logs` follows.
    LogsOnly,
}

impl RunEvent {
    /// The kind of this event.
    pub fn kind(&self) -> EventKind {
        match self {
            Self::RunStarted {} => EventKind::RunStarted,
            Self::ControllerAttached { .. } => EventKind::ControllerAttached,
            Self::NodeStarted { .. } => EventKind::NodeStarted,
            Self::NodeCompleted { .. } => EventKind::NodeCompleted,
            Self::ExecutionVoided { .. } => EventKind::ExecutionVoided,
            Self::Log { .. } => EventKind::Log,
            Self::WorkerProcess { .. } => EventKind::WorkerProcess,
            Self::TokenUsage { .. } => EventKind::TokenUsage,
            Self::ForceStopRequested {} => EventKind::ForceStopRequested,
            Self::Terminal { .. } => EventKind::Terminal,
            Self::GapEvent { .. } => EventKind::GapEvent,
            Self::CheckpointTaken { .. } => EventKind::CheckpointTaken,
            Self::GapNodeStarted { .. } => EventKind::GapNodeStarted,
            Self::GapNodeSettled { .. } => EventKind::GapNodeSettled,
        }
    }

    /// The `kind` tag of this event.
    pub fn kind_name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The execution this event is about, if any.
    pub fn execution(&self) -> Option<u64> {
        match self {
            Self::NodeStarted { execution, .. }
            | Self::NodeCompleted { execution, .. }
            | Self::ExecutionVoided { execution, .. }
            | Self::TokenUsage { execution, .. } => Some(*execution),
            Self::Log { execution, .. } => *execution,
            _ => None,
        }
    }

    pub fn is_log(&self) -> bool {
        matches!(self, Self::Log { .. })
    }

    /// Whether `filter` selects this event.
    pub fn matches(&self, filter: EventFilter) -> bool {
        match filter {
            EventFilter::All => true,
            EventFilter::ExceptLogs => !self.is_log(),
            EventFilter::LogsOnly => self.is_log(),
        }
    }

    /// A log event whose level follows its stream and whose message is already sanitized.
    pub fn log(
        execution: Option<u64>,
        stream: LogStream,
        message: &str,
        timestamp_ms: u64,
    ) -> Self {
        Self::Log {
            execution,
            stream,
            level: stream.default_level(),
            message: sanitize_log_message(message),
            timestamp_ms,
        }
    }

    /// The form the ledger stores: log messages sanitized, everything else unchanged.
    pub fn normalized(&self) -> std::borrow::Cow<'_, Self> {
        std::borrow::Cow::Owned(match self {
            Self::Log {
                execution,
                stream,
                level,
                message,
                timestamp_ms,
            } => Self::Log {
                execution: *execution,
                stream: *stream,
                level: *level,
                message: sanitize_log_message(message),
                timestamp_ms: *timestamp_ms,
            },
            // Only log text needs cleaning; everything else is stored as given.
            other => return std::borrow::Cow::Borrowed(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_serialize_with_snake_case_kinds_and_camel_case_fields() {
        let started = RunEvent::NodeStarted {
            execution: 3,
            node_instance: 2,
            node: NodeName::new("review").unwrap(),
            map_indices: vec![0, 4],
            attempt: 1,
            input: json!({"task": "x"}),
            worker: "builtin.agent.worker@1".to_owned(),
        };
        let value = serde_json::to_value(&started).unwrap();
        assert_eq!(
            value,
            json!({"kind": "node_started", "execution": 3, "nodeInstance": 2, "node": "review",
                   "mapIndices": [0, 4], "attempt": 1, "input": {"task": "x"},
                   "worker": "builtin.agent.worker@1"})
        );
        assert_eq!(serde_json::from_value::<RunEvent>(value).unwrap(), started);
        assert_eq!(
            serde_json::to_value(RunEvent::RunStarted {}).unwrap(),
            json!({"kind": "run_started"})
        );
    }

    #[test]
    fn unknown_kinds_and_fields_are_rejected() {
        for bad in [
            json!({"kind": "run_started", "extra": 1}),
            json!({"kind": "force_stop_requested", "why": "x"}),
            json!({"kind": "node_exploded"}),
            json!({"kind": "execution_voided", "execution": 1, "reason": "parallel_join", "x": 0}),
            json!({"kind": "terminal", "result": {"status": "failed", "reason": "x", "y": 1}}),
            json!({"kind": "token_usage", "execution": 1, "usage": {"inputTokens": 1}}),
        ] {
            assert!(
                serde_json::from_value::<RunEvent>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn completed_events_carry_typed_outcomes() {
        let value = json!({"kind": "node_completed", "execution": 9,
            "outcome": {"status": "error", "code": "crash", "reason": "declared_failure"},
            "reusedFrom": {"runId": "run-0", "execution": 4}});
        let event: RunEvent = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(serde_json::to_value(&event).unwrap(), value);
        let inconsistent = json!({"kind": "node_completed", "execution": 9,
            "outcome": {"status": "error", "code": "crash", "reason": "policy_denied"}});
        assert!(serde_json::from_value::<RunEvent>(inconsistent).is_err());
    }

    #[test]
    fn log_constructor_derives_level_and_sanitizes() {
        let RunEvent::Log { level, message, .. } =
            RunEvent::log(None, LogStream::Error, "bad\u{1b}[0m", 5)
        else {
            panic!("not a log event");
        };
        assert_eq!(level, LogLevel::Error);
        assert_eq!(message, "bad\\u{1b}[0m");
    }
}
