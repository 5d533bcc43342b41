//! Applying one event to a run's state: every validation rule of the event vocabulary lives here,
//! shared by the storage backends and by the reference fold so they cannot disagree. The phase
//! an event may occur in and the phase it leads to come from [`crate::transitions`]; the rules
//! below come on top.
//!
//! | event | accepted when (besides its phase) | effect |
//! |---|---|---|
//! | `controller_attached` | pid > 0, host 1..=255 printable bytes | controller recorded |
//! | `node_started` | execution, node instance, attempt > 0; execution id never used in this run; ≤ 64 map indices; worker 1..=256 printable bytes; < 65,536 started and < 1,024 active | execution active |
//! | `node_completed` / `execution_voided` | the execution is active | execution settled |
//! | `log` | its execution, if named, exists; message ≤ 16 KiB after sanitizing | |
//! | `worker_process` | its execution is active | process group recorded |
//! | `token_usage` | its execution exists; cost finite and ≥ 0 | totals grow |
//! | `force_stop_requested` | | stop requested |
//! | `terminal` | no active execution; a failure reason is a label ≤ 128 bytes | result recorded |
//! | `gap_event` | the run is a GaP run | |
//! | `gap_node_started`, `gap_node_settled` | the run is a GaP run; node id 1..=512 printable bytes, node type 1..=32 | |
//!
//! `log`, `token_usage`, `gap_event`, `gap_node_*` and `controller_attached` count towards the
//! per-run bound of auxiliary events; settling executions never do, so a run can always finish
//! (a GaP run's end needs no `gap_node_settled`).

use std::collections::BTreeMap;

use crate::admission::RunRecord;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{RunEvent, StoredEvent, TerminalResult};
use crate::ids::RunKind;
use crate::limits::{
    MAX_ACTIVE_EXECUTIONS, MAX_AUXILIARY_EVENTS_PER_RUN, MAX_BOOT_ID_BYTES, MAX_EXECUTIONS_PER_RUN,
    MAX_FAIL_REASON_BYTES, MAX_GAP_NODE_ID_BYTES, MAX_HOST_BYTES, MAX_LOG_MESSAGE_BYTES,
    MAX_MAP_INDICES, MAX_SEQUENCE, MAX_WORKER_BYTES,
};
use crate::snapshot::{
    ControllerInfo, ExecutionSnapshot, ExecutionState, RunHead, RunProgress, RunSnapshot,
};
use crate::transitions::transition;

/// Why applying an event failed: the event broke a rule, or storage failed underneath.
#[derive(Debug)]
pub(crate) enum ApplyError {
    Rejected(String),
    Ledger(LedgerError),
}

impl From<LedgerError> for ApplyError {
    fn from(error: LedgerError) -> Self {
        Self::Ledger(error)
    }
}

impl ApplyError {
    /// The ledger error for the event at `index` of a batch.
    pub(crate) fn at_index(self, index: usize) -> LedgerError {
        match self {
            Self::Rejected(reason) => LedgerError::InvalidEvent { index, reason },
            Self::Ledger(error) => error,
        }
    }
}

fn reject<T>(reason: impl Into<String>) -> Result<T, ApplyError> {
    Err(ApplyError::Rejected(reason.into()))
}

/// Where executions live while events are applied: a map in memory, or rows in a database
/// behind a write-back cache. Only what validation needs is asked for.
pub(crate) trait ExecutionTable {
    fn contains(&mut self, execution: u64) -> Result<bool, LedgerError>;
    fn insert(&mut self, execution: u64, snapshot: ExecutionSnapshot) -> Result<(), LedgerError>;
    /// Changes an execution that must exist.
    fn modify(
        &mut self,
        execution: u64,
        change: &mut dyn FnMut(&mut ExecutionSnapshot),
    ) -> Result<(), LedgerError>;
}

impl ExecutionTable for BTreeMap<u64, ExecutionSnapshot> {
    fn contains(&mut self, execution: u64) -> Result<bool, LedgerError> {
        Ok(self.contains_key(&execution))
    }

    fn insert(&mut self, execution: u64, snapshot: ExecutionSnapshot) -> Result<(), LedgerError> {
        BTreeMap::insert(self, execution, snapshot);
        Ok(())
    }

    fn modify(
        &mut self,
        execution: u64,
        change: &mut dyn FnMut(&mut ExecutionSnapshot),
    ) -> Result<(), LedgerError> {
        let snapshot = self.get_mut(&execution).ok_or_else(|| {
            LedgerError::corrupt(format!(
                "execution {execution} is missing from the snapshot"
            ))
        })?;
        change(snapshot);
        Ok(())
    }
}

/// Checks `event` against the run's state at `cursor - 1` and applies it.
pub(crate) fn apply_event(
    progress: &mut RunProgress,
    kind: RunKind,
    executions: &mut dyn ExecutionTable,
    cursor: Cursor,
    recorded_at_ms: u64,
    event: &RunEvent,
) -> Result<(), ApplyError> {
    let next = transition(progress.phase, event.kind()).or_else(reject)?;
    match event {
        RunEvent::RunStarted {} => {
            progress.started_at_ms = Some(recorded_at_ms);
        }
        RunEvent::ControllerAttached {
            pid,
            started_at_ms,
            host,
            boot_id,
        } => {
            if *pid == 0 {
                return reject("controller pid must be positive");
            }
            check_label("controller host", host, MAX_HOST_BYTES)?;
            if let Some(boot_id) = boot_id {
                check_label("controller boot id", boot_id, MAX_BOOT_ID_BYTES)?;
            }
            count_auxiliary(progress)?;
            progress.controller = Some(ControllerInfo {
                pid: *pid,
                started_at_ms: *started_at_ms,
                host: host.clone(),
                boot_id: boot_id.clone(),
                attached_at: cursor,
            });
        }
        RunEvent::NodeStarted {
            execution,
            node_instance,
            node,
            map_indices,
            attempt,
            input,
            worker,
        } => {
            if *execution == 0 || *node_instance == 0 || *attempt == 0 {
                return reject("execution, node instance and attempt must be positive");
            }
            if *execution > MAX_SEQUENCE || *node_instance > MAX_SEQUENCE {
                return reject(format!(
                    "execution and node instance ids are at most {MAX_SEQUENCE}"
                ));
            }
            if map_indices.len() > MAX_MAP_INDICES {
                return reject(format!(
                    "a node occurrence has at most {MAX_MAP_INDICES} map indices"
                ));
            }
            check_label("worker", worker, MAX_WORKER_BYTES)?;
            if progress.executions_started >= MAX_EXECUTIONS_PER_RUN {
                return reject(format!(
                    "a run starts at most {MAX_EXECUTIONS_PER_RUN} executions"
                ));
            }
            if progress.active_executions.len() >= MAX_ACTIVE_EXECUTIONS {
                return reject(format!(
                    "a run has at most {MAX_ACTIVE_EXECUTIONS} active executions"
                ));
            }
            if executions.contains(*execution)? {
                return reject(format!("execution {execution} was already started"));
            }
            executions.insert(
                *execution,
                ExecutionSnapshot {
                    node: node.clone(),
                    node_instance: *node_instance,
                    map_indices: map_indices.clone(),
                    attempt: *attempt,
                    input: input.clone(),
                    worker: worker.clone(),
                    started_at: cursor,
                    started_at_ms: recorded_at_ms,
                    token_usage: None,
                    process_group: None,
                    state: ExecutionState::Active {},
                },
            )?;
            progress.active_executions.insert(*execution, node.clone());
            progress.executions_started += 1;
        }
        RunEvent::NodeCompleted {
            execution,
            outcome,
            reused_from,
            settled_by,
        } => {
            settle(progress, *execution, "node_completed")?;
            let mut state = Some(ExecutionState::Completed {
                at: cursor,
                at_ms: recorded_at_ms,
                outcome: Box::new(outcome.clone()),
                reused_from: reused_from.clone(),
                settled_by: *settled_by,
            });
            executions.modify(*execution, &mut |snapshot| {
                if let Some(state) = state.take() {
                    snapshot.state = state;
                }
            })?;
        }
        RunEvent::ExecutionVoided { execution, reason } => {
            settle(progress, *execution, "execution_voided")?;
            let reason = *reason;
            executions.modify(*execution, &mut |snapshot| {
                snapshot.state = ExecutionState::Voided {
                    at: cursor,
                    at_ms: recorded_at_ms,
                    reason,
                };
            })?;
        }
        RunEvent::Log {
            execution, message, ..
        } => {
            if message.len() > MAX_LOG_MESSAGE_BYTES {
                return reject(format!(
                    "log messages are at most {MAX_LOG_MESSAGE_BYTES} bytes"
                ));
            }
            if let Some(execution) = execution
                && !executions.contains(*execution)?
            {
                return reject(format!("log names unknown execution {execution}"));
            }
            count_auxiliary(progress)?;
        }
        RunEvent::WorkerProcess {
            execution,
            process_group,
        } => {
            if !progress.active_executions.contains_key(execution) {
                return reject(format!(
                    "worker process names inactive execution {execution}"
                ));
            }
            count_auxiliary(progress)?;
            let group = *process_group;
            executions.modify(*execution, &mut |snapshot| {
                snapshot.process_group = Some(group);
            })?;
        }
        RunEvent::TokenUsage { execution, usage } => {
            if usage
                .cost_usd
                .is_some_and(|cost| !cost.is_finite() || cost < 0.0)
            {
                return reject("token cost must be a finite, non-negative number");
            }
            if !executions.contains(*execution)? {
                return reject(format!("token usage names unknown execution {execution}"));
            }
            count_auxiliary(progress)?;
            progress.token_usage.add(usage);
            executions.modify(*execution, &mut |snapshot| {
                snapshot.token_usage.get_or_insert_default().add(usage);
            })?;
        }
        RunEvent::ForceStopRequested {} => {
            if progress.force_stop_requested {
                return reject("force stop was already requested");
            }
            progress.force_stop_requested = true;
        }
        RunEvent::Terminal { result } => {
            if !progress.active_executions.is_empty() {
                return reject("a run cannot finish while executions are active");
            }
            if let TerminalResult::Failed { reason } = result {
                check_reason(reason)?;
            }
            progress.terminal = Some(result.clone());
            progress.finished_at_ms = Some(recorded_at_ms);
        }
        RunEvent::CheckpointTaken {
            number,
            commit,
            tree,
            next_execution,
            ..
        } => {
            if kind != RunKind::Graphspec {
                return reject("checkpoint_taken is only valid in GraphSpec runs");
            }
            if *number == 0 || *next_execution == 0 || *next_execution > MAX_SEQUENCE {
                return reject("checkpoint number and next execution must be positive");
            }
            if !progress.active_executions.is_empty() {
                return reject("a checkpoint is taken only while no execution is active");
            }
            for (what, id) in [("commit", commit), ("tree", tree)] {
                check_object_id(what, id)?;
            }
            count_auxiliary(progress)?;
        }
        RunEvent::GapEvent { .. } => {
            if kind != RunKind::Gap {
                return reject("gap_event is only valid in GaP runs");
            }
            count_auxiliary(progress)?;
        }
        RunEvent::GapNodeStarted {
            node, node_type, ..
        } => {
            if kind != RunKind::Gap {
                return reject("gap_node_started is only valid in GaP runs");
            }
            check_label("GaP node id", node, MAX_GAP_NODE_ID_BYTES)?;
            check_label("GaP node type", node_type, 32)?;
            count_auxiliary(progress)?;
        }
        RunEvent::GapNodeSettled { node, .. } => {
            if kind != RunKind::Gap {
                return reject("gap_node_settled is only valid in GaP runs");
            }
            check_label("GaP node id", node, MAX_GAP_NODE_ID_BYTES)?;
            count_auxiliary(progress)?;
        }
    }
    progress.phase = next;
    Ok(())
}

/// Removes a settling execution from the active set, checking it was active.
fn settle(progress: &mut RunProgress, execution: u64, kind: &str) -> Result<(), ApplyError> {
    if progress.active_executions.remove(&execution).is_none() {
        return reject(format!(
            "{kind} names execution {execution}, which is not active"
        ));
    }
    Ok(())
}

fn count_auxiliary(progress: &mut RunProgress) -> Result<(), ApplyError> {
    if progress.auxiliary_events >= MAX_AUXILIARY_EVENTS_PER_RUN {
        return reject(format!(
            "a run holds at most {MAX_AUXILIARY_EVENTS_PER_RUN} log, usage and progress events"
        ));
    }
    progress.auxiliary_events += 1;
    Ok(())
}

/// A git object id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
fn check_object_id(what: &str, id: &str) -> Result<(), ApplyError> {
    let hex = id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if hex && (id.len() == 40 || id.len() == 64) {
        Ok(())
    } else {
        reject(format!("{what} must be a git object id"))
    }
}

/// A short printable label: non-empty, bounded, no control characters.
fn check_label(what: &str, text: &str, max_bytes: usize) -> Result<(), ApplyError> {
    if text.is_empty() || text.len() > max_bytes || text.chars().any(char::is_control) {
        return reject(format!(
            "{what} must be 1..={max_bytes} bytes without control characters"
        ));
    }
    Ok(())
}

/// Failure reasons are labels like `worker_failed`: a letter, then letters, digits, `_-.:`.
fn check_reason(reason: &str) -> Result<(), ApplyError> {
    let mut chars = reason.chars();
    let shaped = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if !shaped || reason.len() > MAX_FAIL_REASON_BYTES {
        return reject(format!(
            "a failure reason is a label of at most {MAX_FAIL_REASON_BYTES} bytes \
             (a letter, then letters, digits, '_', '-', '.', ':')"
        ));
    }
    Ok(())
}

/// The reference fold: the snapshot that `events` produce from the admission `record`.
/// Storage backends keep a materialized snapshot; tests check it equals this fold.
pub fn fold_snapshot(
    record: &RunRecord,
    events: &[StoredEvent],
) -> Result<RunSnapshot, LedgerError> {
    let mut progress = RunProgress::admitted();
    let mut executions = BTreeMap::new();
    let mut cursor = Cursor::START;
    for (index, stored) in events.iter().enumerate() {
        let expected = cursor.next()?;
        if stored.cursor != expected {
            return Err(LedgerError::corrupt(format!(
                "event {index} is at {}, expected {expected}",
                stored.cursor
            )));
        }
        apply_event(
            &mut progress,
            record.kind,
            &mut executions,
            stored.cursor,
            stored.recorded_at_ms,
            &stored.event,
        )
        .map_err(|e| e.at_index(index))?;
        cursor = expected;
    }
    Ok(RunSnapshot {
        head: RunHead::new(record, cursor, progress),
        executions,
    })
}
