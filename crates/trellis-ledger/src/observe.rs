//! Observation projections in the reference JSON shapes (status, watch and log events), plus a
//! follower that pages through a run's events live.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use serde::Serialize;
use trellis_graph::NodeName;

use crate::canonical::sha256_hex;
use crate::cursor::Cursor;
use crate::error::{LedgerError, cursor_ahead};
use crate::event::{
    EventFilter, LogLevel, LogStream, RunEvent, StoredEvent, TerminalResult, TokenUsage,
};
use crate::ids::{Phase, RunId, RunKind};
use crate::limits::MAX_EVENTS_PER_PAGE;
use crate::snapshot::{RunHead, RunSnapshot};
use crate::store::RunStore;

/// Domain tag of public execution references, so they never collide with other hashes.
const EXECUTION_REF_DOMAIN: &str = "trellis.execution-ref/v1";

/// The public, opaque reference of an execution: `ex-` + hex SHA-256 of the run id and
/// execution id under a fixed domain tag.
pub fn execution_ref(run_id: &RunId, execution: u64) -> String {
    let material = format!("{EXECUTION_REF_DOMAIN}\0{run_id}\0{execution}");
    format!("ex-{}", sha256_hex(material.as_bytes()))
}

/// The execution id behind a public reference, if `snapshot` has it.
pub fn resolve_execution_ref(snapshot: &RunSnapshot, reference: &str) -> Option<u64> {
    snapshot
        .executions
        .keys()
        .copied()
        .find(|&execution| execution_ref(&snapshot.head.run_id, execution) == reference)
}

/// One active execution in a status: `{"execution": <ref>, "node": <name>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveExecution {
    pub execution: String,
    pub node: NodeName,
}

/// The `status` object: `{"phase": …}` plus `activeExecutions` while running or stopping,
/// or `terminalResult` once finished.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "phase",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum PhaseStatus {
    Admitted,
    Running {
        active_executions: Vec<ActiveExecution>,
    },
    Stopping {
        active_executions: Vec<ActiveExecution>,
    },
    Finished {
        terminal_result: TerminalResult,
    },
}

impl PhaseStatus {
    fn new(
        run_id: &RunId,
        phase: Phase,
        active: &BTreeMap<u64, NodeName>,
        terminal: Option<&TerminalResult>,
    ) -> Self {
        let listed = || {
            active
                .iter()
                .map(|(&execution, node)| ActiveExecution {
                    execution: execution_ref(run_id, execution),
                    node: node.clone(),
                })
                .collect()
        };
        match (phase, terminal) {
            (Phase::Admitted, _) => Self::Admitted,
            (Phase::Running, _) => Self::Running {
                active_executions: listed(),
            },
            (Phase::Stopping, _) => Self::Stopping {
                active_executions: listed(),
            },
            (Phase::Finished, Some(result)) => Self::Finished {
                terminal_result: result.clone(),
            },
            // The fold never finishes without a result; report a stored state that did as lost.
            (Phase::Finished, None) => Self::Finished {
                terminal_result: TerminalResult::Failed {
                    reason: "runtime_lost".to_owned(),
                },
            },
        }
    }
}

/// A `status` / `list` item / `force-stop` result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusView {
    pub run_id: RunId,
    pub title: String,
    pub kind: RunKind,
    pub at_cursor: Cursor,
    pub status: PhaseStatus,
    pub created_at_ms: u64,
    pub token_usage: TokenUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<RunId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor: Option<RunId>,
}

/// The status projection of a run head.
pub fn status_view(head: &RunHead) -> StatusView {
    let progress = &head.progress;
    StatusView {
        run_id: head.run_id.clone(),
        title: head.title.clone(),
        kind: head.kind,
        at_cursor: head.cursor,
        status: PhaseStatus::new(
            &head.run_id,
            progress.phase,
            &progress.active_executions,
            progress.terminal.as_ref(),
        ),
        created_at_ms: head.created_at_ms,
        token_usage: progress.token_usage,
        predecessor: head.predecessor.clone(),
        successor: head.successor.clone(),
    }
}

/// The `status` of a watch line: the phase, and the result once finished. Unlike a run's
/// [`PhaseStatus`] it lists no active executions (their counts travel beside it), so a line's
/// size does not grow with the number of executions running.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "phase",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum WatchStatus {
    Admitted,
    Running,
    Stopping,
    Finished { terminal_result: TerminalResult },
}

/// How many executions (GaP bodies, for a GaP run) are running and how many have settled
/// (completed, voided, or reused from a predecessor) as of a watch line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExecutionCounts {
    pub active: u64,
    pub settled: u64,
}

/// One `watch` line: what the event at `cursor` changed — its kind, the run's phase right
/// after it and the execution counts; the execution itself is added by the runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    pub run_id: RunId,
    pub title: String,
    pub cursor: Cursor,
    /// The event's kind, so a live view can tell a start from a completion.
    pub event: &'static str,
    pub status: WatchStatus,
    pub counts: ExecutionCounts,
}

/// One `logs` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogView {
    pub run_id: RunId,
    pub cursor: Cursor,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    pub record: LogRecord,
}

/// The record of a log line: level, origin (`agent` for worker streams, `trellis` for the
/// engine's own notes) and the sanitized message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogRecord {
    pub level: LogLevel,
    pub target: &'static str,
    pub message: String,
}

/// The `logs` projection of a stored event; `None` for anything but a log event.
pub fn log_view(run_id: &RunId, stored: &StoredEvent) -> Option<LogView> {
    let RunEvent::Log {
        execution,
        stream,
        level,
        message,
        ..
    } = &stored.event
    else {
        return None;
    };
    Some(LogView {
        run_id: run_id.clone(),
        cursor: stored.cursor,
        execution: execution.map(|e| execution_ref(run_id, e)),
        record: LogRecord {
            level: *level,
            target: match stream {
                LogStream::Output | LogStream::Error => "agent",
                LogStream::System => "trellis",
            },
            message: message.clone(),
        },
    })
}

/// What runs in a watched run: a GraphSpec execution, or a GaP body's visit.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Running {
    Execution(u64),
    GapBody(String, u32),
}

/// Just enough of a run's state to print a watch line after each event: phase, what runs,
/// how much settled, and the result. Replays events cheaply, skipping everything else; each
/// event costs the same however many executions run.
#[derive(Debug, Clone)]
pub struct StatusTracker {
    run_id: RunId,
    title: String,
    cursor: Cursor,
    phase: Phase,
    active: HashSet<Running>,
    settled: u64,
    terminal: Option<TerminalResult>,
}

impl StatusTracker {
    /// The status of a run before its first event.
    pub fn new(run_id: RunId, title: String) -> Self {
        Self {
            run_id,
            title,
            cursor: Cursor::START,
            phase: Phase::Admitted,
            active: HashSet::new(),
            settled: 0,
            terminal: None,
        }
    }

    /// The status of `run_id` as of `cursor`, rebuilt from its non-log events.
    pub fn at(store: &dyn RunStore, run_id: &RunId, cursor: Cursor) -> Result<Self, LedgerError> {
        let head = store.head(run_id)?;
        if cursor > head.cursor {
            return Err(cursor_ahead(run_id, cursor, head.cursor));
        }
        let mut tracker = Self::new(run_id.clone(), head.title);
        while tracker.cursor < cursor {
            let page = store.events_after(
                run_id,
                tracker.cursor,
                MAX_EVENTS_PER_PAGE,
                EventFilter::ExceptLogs,
            )?;
            let before = tracker.cursor;
            for stored in page.iter().take_while(|s| s.cursor <= cursor) {
                tracker.observe(stored);
            }
            if tracker.cursor == before || page.len() < MAX_EVENTS_PER_PAGE {
                break;
            }
        }
        tracker.cursor = cursor;
        Ok(tracker)
    }

    /// The cursor this status is at.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// The current phase (with the result once finished).
    pub fn status(&self) -> WatchStatus {
        match (self.phase, &self.terminal) {
            (Phase::Admitted, _) => WatchStatus::Admitted,
            (Phase::Running, _) => WatchStatus::Running,
            (Phase::Stopping, _) => WatchStatus::Stopping,
            (Phase::Finished, Some(result)) => WatchStatus::Finished {
                terminal_result: result.clone(),
            },
            // The fold never finishes without a result; report a stored state that did as lost.
            (Phase::Finished, None) => WatchStatus::Finished {
                terminal_result: TerminalResult::Failed {
                    reason: "runtime_lost".to_owned(),
                },
            },
        }
    }

    /// The current execution counts.
    pub fn counts(&self) -> ExecutionCounts {
        ExecutionCounts {
            active: self.active.len() as u64,
            settled: self.settled,
        }
    }

    fn settle(&mut self, running: &Running) {
        self.active.remove(running);
        self.settled += 1;
    }

    /// Folds one event in; returns the watch line it produces (none for log events).
    pub fn observe(&mut self, stored: &StoredEvent) -> Option<WatchEvent> {
        self.cursor = self.cursor.max(stored.cursor);
        match &stored.event {
            RunEvent::Log { .. } => return None,
            RunEvent::RunStarted {} => self.phase = Phase::Running,
            RunEvent::NodeStarted { execution, .. } => {
                self.active.insert(Running::Execution(*execution));
            }
            RunEvent::NodeCompleted { execution, .. }
            | RunEvent::ExecutionVoided { execution, .. } => {
                self.settle(&Running::Execution(*execution));
            }
            RunEvent::GapNodeStarted { node, visit, .. } => {
                self.active.insert(Running::GapBody(node.clone(), *visit));
            }
            RunEvent::GapNodeSettled { node, visit, .. } => {
                self.settle(&Running::GapBody(node.clone(), *visit));
            }
            RunEvent::ForceStopRequested {} => self.phase = Phase::Stopping,
            RunEvent::Terminal { result } => {
                self.phase = Phase::Finished;
                self.terminal = Some(result.clone());
            }
            RunEvent::ControllerAttached { .. }
            | RunEvent::TokenUsage { .. }
            | RunEvent::WorkerProcess { .. }
            | RunEvent::GapEvent { .. }
            | RunEvent::CheckpointTaken { .. } => {}
        }
        Some(WatchEvent {
            run_id: self.run_id.clone(),
            title: self.title.clone(),
            cursor: stored.cursor,
            event: stored.event.kind_name(),
            status: self.status(),
            counts: self.counts(),
        })
    }
}

/// Follows one run's events from a cursor: each call returns the next page of selected
/// events, waiting up to a timeout when there are none yet. Done once the run is finished
/// and every event has been scanned.
pub struct EventFollower<'s> {
    store: &'s dyn RunStore,
    run_id: RunId,
    filter: EventFilter,
    page_size: usize,
    /// Every event up to here has been scanned (returned, or skipped by the filter).
    scanned: Cursor,
    done: bool,
}

impl<'s> EventFollower<'s> {
    /// A follower of `run_id` from just after `after`.
    pub fn new(
        store: &'s dyn RunStore,
        run_id: RunId,
        after: Cursor,
        filter: EventFilter,
    ) -> Result<Self, LedgerError> {
        let latest = store.latest_cursor(&run_id)?;
        if after > latest {
            return Err(cursor_ahead(&run_id, after, latest));
        }
        Ok(Self {
            store,
            run_id,
            filter,
            page_size: 1000,
            scanned: after,
            done: false,
        })
    }

    /// The cursor to resume from later.
    pub fn cursor(&self) -> Cursor {
        self.scanned
    }

    /// Whether the run is finished and everything has been returned.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next selected events, oldest first; empty when `timeout` passed without any or
    /// when the follower is done.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Vec<StoredEvent>, LedgerError> {
        if self.done {
            return Ok(Vec::new());
        }
        let mut head = self.store.head(&self.run_id)?;
        if head.cursor <= self.scanned {
            if head.is_finished() {
                self.done = true;
                return Ok(Vec::new());
            }
            self.store
                .wait_for_change(&self.run_id, self.scanned, timeout)?;
            head = self.store.head(&self.run_id)?;
        }
        let page =
            self.store
                .events_after(&self.run_id, self.scanned, self.page_size, self.filter)?;
        let last_returned = page.last().map_or(self.scanned, |s| s.cursor);
        // A short page means nothing selected exists past it, so everything up to the head
        // read before the query has been scanned too.
        self.scanned = if page.len() < self.page_size {
            last_returned.max(head.cursor)
        } else {
            last_returned
        };
        if head.is_finished() && self.scanned >= head.cursor {
            self.done = true;
        }
        Ok(page)
    }
}
