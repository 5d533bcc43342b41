//! Runs a GaP workflow in this process while recording it in the ledger, so `status`, `watch`
//! and `logs` work on GaP runs like on GraphSpec runs, and every node body goes through the
//! ledger's journal so a resumed run replays what settled.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_agents::Redactor;
use trellis_agents::forward::one_line;
use trellis_gap::{CancelToken, RunEvent as GapEvent, RunObserver};
use trellis_ledger::{
    Admission, LogLevel, LogStream, NewRun, RunEvent, RunId, RunKind, RunStore, TerminalResult,
};

use super::admission::{GapOutcome, GapRun};
use super::journal::{LedgerJournal, Lineage, redact_value, secret_redactor};
use crate::control::lease::controller_attached;
use crate::control::recovery::TerminalReason;
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt, TrellisHome};
use crate::shared::log_budget::{LogBudget, RunLogBudget};

/// Largest workflow result or progress payload recorded in one event (the ledger bounds one
/// event to `MAX_EVENT_JSON_BYTES`; the rest is the event's envelope).
const MAX_PAYLOAD_BYTES: usize = trellis_ledger::limits::MAX_EVENT_JSON_BYTES - 64 * 1024;

/// A progress event as recorded: whole, or — when it would not fit one ledger event (a
/// subgraph's many large outputs) — its kind and node with the size that was left out.
fn recorded_payload(event: &GapEvent, redactor: &Redactor) -> Value {
    let payload = redact_value(
        redactor,
        &serde_json::to_value(event).unwrap_or(Value::Null),
    );
    let size = serde_json::to_vec(&payload).map_or(usize::MAX, |bytes| bytes.len());
    if size <= MAX_PAYLOAD_BYTES {
        return payload;
    }
    let field = |name: &str| payload.get(name).cloned().unwrap_or(Value::Null);
    json!({
        "event": field("event"),
        "node_id": field("node_id"),
        "subgraph": field("subgraph"),
        "omitted_bytes": size,
    })
}

/// How the workflow ended, recorded as a `run_finished` progress event just before the run's
/// terminal: the executor's result without its outputs (the terminal holds a success's) and
/// without its error text (logged), plus the node whose failure ended it. A failed run's
/// terminal says only `workflow_failed`, so this is where its end is kept.
fn run_finished_payload(result: &trellis_gap::ExecutionResult) -> Value {
    json!({
        "event": "run_finished",
        "result": {
            "exit_status": result.exit_status,
            "end_node": result.end_node,
            "failed_node": result.failed_node,
        },
    })
}

/// Most events one ledger transaction carries; keeps batches well under the ledger's bound.
const BATCH_EVENTS: usize = 512;

/// How often the run is checked for a force-stop request.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Feeds executor events to the caller and, batched, to the ledger.
struct LedgerObserver<'a> {
    ledger: Mutex<Sender<RunEvent>>,
    forward: &'a (dyn Fn(&GapEvent) + Send + Sync),
    /// Each node's output lines against its log budget (run-level lines under `None`), and
    /// the run's.
    budgets: Mutex<(HashMap<Option<String>, LogBudget>, RunLogBudget)>,
    /// Masks the run's declared secret values in everything recorded.
    redactor: Redactor,
}

impl LedgerObserver<'_> {
    /// Whether a line of `node` still fits its log budget.
    fn admit(&self, node: &Option<String>, bytes: usize) -> bool {
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let (nodes, run) = &mut *budgets;
        nodes
            .entry(node.clone())
            .or_default()
            .admit_within(run, bytes)
    }

    /// One warning per node whose output was cut short by its budget.
    fn dropped_records(&self) -> Vec<RunEvent> {
        let budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        budgets
            .0
            .iter()
            .filter_map(|(node, budget)| {
                let note = budget.dropped_note()?;
                Some(RunEvent::Log {
                    execution: None,
                    stream: LogStream::System,
                    level: LogLevel::Warn,
                    message: match node {
                        Some(node) => format!("[{node}] {note}"),
                        None => note,
                    },
                    timestamp_ms: trellis_ledger::store::now_ms(),
                })
            })
            .collect()
    }
}

impl RunObserver for LedgerObserver<'_> {
    fn on_event(&self, event: &GapEvent) {
        (self.forward)(event);
        let recorded = match event {
            GapEvent::Log {
                node_id,
                stream,
                line,
            } if self.admit(node_id, line.len()) => RunEvent::Log {
                execution: None,
                stream: if stream == "stderr" {
                    LogStream::Error
                } else {
                    LogStream::Output
                },
                // What the line says it is (`INFO …` on stderr is not an error); else what its
                // pipe suggests.
                level: trellis_ledger::declared_level(line).unwrap_or(if stream == "stderr" {
                    LogLevel::Error
                } else {
                    LogLevel::Info
                }),
                // One bounded line, as a harness records it (the ledger refuses longer ones).
                message: one_line(&self.redactor.apply(&match node_id {
                    Some(node) => format!("[{node}] {line}"),
                    None => line.clone(),
                })),
                timestamp_ms: trellis_ledger::store::now_ms(),
            },
            // Past its node's budget; said once at the end of the run.
            GapEvent::Log { .. } => return,
            // The final result is recorded as the terminal event.
            GapEvent::RunFinished { .. } => return,
            other => RunEvent::GapEvent {
                payload: recorded_payload(other, &self.redactor),
            },
        };
        if let Ok(sender) = self.ledger.lock() {
            let _ = sender.send(recorded);
        }
    }
}

/// Appends queued events in batches until the queue closes, and cancels the run once a
/// force-stop is requested; returns the first ledger error.
fn spawn_writer(
    store: Arc<dyn RunStore>,
    run_id: RunId,
    queue: Receiver<RunEvent>,
    cancel: CancelToken,
) -> JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        let mut failure = None;
        let mut stop_checked = Instant::now();
        loop {
            if !cancel.is_set() && stop_checked.elapsed() >= STOP_POLL {
                stop_checked = Instant::now();
                if store
                    .head(&run_id)
                    .is_ok_and(|head| head.progress.force_stop_requested)
                {
                    cancel.cancel();
                }
            }
            let first = match queue.recv_timeout(Duration::from_millis(50)) {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut batch = vec![first];
            while batch.len() < BATCH_EVENTS {
                match queue.try_recv() {
                    Ok(event) => batch.push(event),
                    Err(_) => break,
                }
            }
            if let Err(error) = store.append(&run_id, &batch)
                && failure.is_none()
            {
                failure = Some(error.to_string());
            }
        }
        failure
    })
}

/// Executes the workflow as a new recorded run in this process. `forward` sees every progress
/// event as it happens.
pub(crate) fn run_gap(
    store: Arc<dyn RunStore>,
    home: &TrellisHome,
    run: GapRun,
    forward: &(dyn Fn(&GapEvent) + Send + Sync),
) -> Result<GapOutcome, RuntimeError> {
    let run_id = RunId::generate();
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot create the run directory", e))?;
    let LeaseAttempt::Acquired(lease) = Lease::try_acquire(&lease_path)
        .map_err(|e| RuntimeError::io("cannot take the run lease", e))?
    else {
        return Err(RuntimeError::Internal(
            "a fresh run id is already leased".into(),
        ));
    };
    let key = run
        .submission_key
        .clone()
        .unwrap_or_else(|| format!("gap-{}", run_id.as_str()));
    let new_run = NewRun::new(
        run_id.clone(),
        key,
        run.title.clone(),
        RunKind::Gap,
        run.submission(),
    );
    let (record, admission) = store.create_or_get(new_run)?;
    if admission == Admission::Existing {
        return Err(RuntimeError::KeyInUse(record.run_id.to_string()));
    }
    let _ = lease.describe(&format!(
        "gap run {} pid {}",
        run_id.as_str(),
        std::process::id()
    ));
    let outcome = drive(store, &run_id, run, Lineage::default(), forward);
    drop(lease);
    outcome
}

/// Drives an admitted GaP run to its end on this thread (the caller holds its lease),
/// replaying what `lineage` settled.
pub(crate) fn drive(
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    mut run: GapRun,
    lineage: Lineage,
    forward: &(dyn Fn(&GapEvent) + Send + Sync),
) -> Result<GapOutcome, RuntimeError> {
    let run_id = run_id.clone();
    let mut opening = Vec::new();
    if store.head(&run_id)?.phase() == trellis_ledger::Phase::Admitted {
        opening.push(RunEvent::RunStarted {});
    }
    opening.push(controller_attached());
    let reusable = lineage.reusable();
    if reusable > 0 {
        opening.push(RunEvent::Log {
            execution: None,
            stream: LogStream::System,
            level: LogLevel::Info,
            message: format!(
                "resuming: {reusable} settled node result(s) of earlier runs are reused, not run again"
            ),
            timestamp_ms: trellis_ledger::store::now_ms(),
        });
    }
    store.append(&run_id, &opening)?;

    let redactor = secret_redactor(&run.secret_env);
    let journal = Arc::new(LedgerJournal::new(
        store.clone(),
        run_id.clone(),
        lineage,
        &run.workflow.meta,
        redactor.clone(),
    ));
    let shared: Arc<dyn trellis_gap::NodeJournal> = journal.clone();
    run.options.journal = Some(shared);
    let (sender, queue) = mpsc::channel();
    let cancel = run.options.cancel.clone();
    let writer = spawn_writer(store.clone(), run_id.clone(), queue, cancel.clone());
    let observer = LedgerObserver {
        ledger: Mutex::new(sender),
        forward,
        budgets: Mutex::new((HashMap::new(), RunLogBudget::default())),
        redactor: redactor.clone(),
    };
    let result = trellis_gap::execute(&run.workflow, run.options, &observer);
    let mut closing = observer.dropped_records();
    drop(observer);
    let write_failure = writer.join().ok().flatten().or_else(|| journal.failure());

    let error_log = |message: String| RunEvent::Log {
        execution: None,
        stream: LogStream::System,
        level: LogLevel::Error,
        message: one_line(&redactor.apply(&message)),
        timestamp_ms: trellis_ledger::store::now_ms(),
    };
    let stopped = store
        .head(&run_id)
        .is_ok_and(|head| head.progress.force_stop_requested);
    let terminal = if stopped {
        TerminalResult::Failed {
            reason: TerminalReason::ForceStopped.label().to_owned(),
        }
    } else if result.is_success() {
        let output = redact_value(
            &redactor,
            &serde_json::to_value(&result).unwrap_or(Value::Null),
        );
        let size = serde_json::to_vec(&output).map_or(usize::MAX, |bytes| bytes.len());
        if size <= MAX_PAYLOAD_BYTES {
            TerminalResult::Succeeded { output }
        } else {
            closing.push(error_log(format!(
                "the workflow's result is {size} bytes, over the {MAX_PAYLOAD_BYTES} bytes a \
                 run's result may take; it is not recorded"
            )));
            TerminalResult::Failed {
                reason: "workflow_failed".to_owned(),
            }
        }
    } else {
        TerminalResult::Failed {
            reason: "workflow_failed".to_owned(),
        }
    };
    if let Some(error) = &result.error {
        closing.push(error_log(format!("workflow failed: {error}")));
    }
    closing.push(RunEvent::GapEvent {
        payload: run_finished_payload(&result),
    });
    closing.push(RunEvent::Terminal { result: terminal });
    store.append(&run_id, &closing)?;
    if let Some(failure) = write_failure {
        return Err(RuntimeError::Internal(format!(
            "the workflow ran but some progress events were not recorded: {failure}"
        )));
    }
    Ok(GapOutcome { run_id, result })
}
