//! Runs a GaP workflow in this process while recording it in the ledger, so `status`, `watch`
//! and `logs` work on GaP runs like on GraphSpec runs.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_gap::{ExecuteOptions, ExecutionResult, RunEvent as GapEvent, RunObserver, Workflow};
use trellis_ledger::{
    Admission, LogLevel, LogStream, NewRun, RunEvent, RunId, RunKind, RunStore, TerminalResult,
};

use crate::error::RuntimeError;
use crate::home::{Lease, LeaseAttempt, TrellisHome};

/// Most events one ledger transaction carries; keeps batches well under the ledger's bound.
const BATCH_EVENTS: usize = 512;

/// What the caller asks of a GaP run.
pub struct GapRun {
    pub workflow: Workflow,
    pub workflow_path: PathBuf,
    pub title: String,
    pub submission_key: Option<String>,
    pub options: ExecuteOptions,
}

/// Feeds executor events to the caller and, batched, to the ledger.
struct LedgerObserver<'a> {
    ledger: Mutex<Sender<RunEvent>>,
    forward: &'a (dyn Fn(&GapEvent) + Send + Sync),
}

impl RunObserver for LedgerObserver<'_> {
    fn on_event(&self, event: &GapEvent) {
        (self.forward)(event);
        let recorded = match event {
            GapEvent::Log {
                node_id,
                stream,
                line,
            } => RunEvent::Log {
                execution: None,
                stream: if stream == "stderr" {
                    LogStream::Error
                } else {
                    LogStream::Output
                },
                level: if stream == "stderr" {
                    LogLevel::Error
                } else {
                    LogLevel::Info
                },
                message: match node_id {
                    Some(node) => format!("[{node}] {line}"),
                    None => line.clone(),
                },
                timestamp_ms: trellis_ledger::store::now_ms(),
            },
            // The final result is recorded as the terminal event.
            GapEvent::RunFinished { .. } => return,
            other => RunEvent::GapEvent {
                payload: serde_json::to_value(other).unwrap_or(Value::Null),
            },
        };
        if let Ok(sender) = self.ledger.lock() {
            let _ = sender.send(recorded);
        }
    }
}

/// Appends queued events in batches until the queue closes; returns the first ledger error.
fn spawn_writer(
    store: Arc<dyn RunStore>,
    run_id: RunId,
    queue: Receiver<RunEvent>,
) -> JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        let mut failure = None;
        loop {
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

/// Executes the workflow as a recorded run. `forward` sees every progress event as it happens.
pub fn run_gap(
    store: Arc<dyn RunStore>,
    home: &TrellisHome,
    run: GapRun,
    forward: &(dyn Fn(&GapEvent) + Send + Sync),
) -> Result<(RunId, ExecutionResult), RuntimeError> {
    let run_id = RunId::generate();
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot create the run directory", e))?;
    let LeaseAttempt::Acquired(lease) = Lease::try_acquire(&lease_path)
        .map_err(|e| RuntimeError::io("cannot take the run lease", e))?
    else {
        return Err(RuntimeError::Invalid(
            "a fresh run id is already leased".into(),
        ));
    };
    let inputs = Value::Object(run.options.inputs.clone());
    let submission = json!({
        "workflow": run.workflow_path.display().to_string(),
        "inputs": inputs,
        "traceDir": run.options.trace_dir.as_ref().map(|p| p.display().to_string()),
        "maxWorkers": run.options.max_workers,
    });
    let key = run
        .submission_key
        .clone()
        .unwrap_or_else(|| format!("gap-{}", run_id.as_str()));
    let new_run = NewRun::new(
        run_id.clone(),
        key,
        run.title.clone(),
        RunKind::Gap,
        submission,
    );
    let (record, admission) = store.create_or_get(new_run)?;
    if admission == Admission::Existing {
        return Err(RuntimeError::Invalid(format!(
            "submission key already used by run {}",
            record.run_id.as_str()
        )));
    }
    let _ = lease.describe(&format!(
        "gap run {} pid {}",
        run_id.as_str(),
        std::process::id()
    ));
    store.append(&run_id, &[RunEvent::RunStarted {}, controller_attached()])?;

    let (sender, queue) = mpsc::channel();
    let writer = spawn_writer(store.clone(), run_id.clone(), queue);
    let observer = LedgerObserver {
        ledger: Mutex::new(sender),
        forward,
    };
    let result = trellis_gap::execute(&run.workflow, run.options, &observer);
    drop(observer);
    let write_failure = writer.join().ok().flatten();

    let terminal = if result.is_success() {
        TerminalResult::Succeeded {
            output: serde_json::to_value(&result).unwrap_or(Value::Null),
        }
    } else {
        TerminalResult::Failed {
            reason: "workflow_failed".to_owned(),
        }
    };
    let mut closing = Vec::new();
    if let Some(error) = &result.error {
        closing.push(RunEvent::Log {
            execution: None,
            stream: LogStream::System,
            level: LogLevel::Error,
            message: format!("workflow failed: {error}"),
            timestamp_ms: trellis_ledger::store::now_ms(),
        });
    }
    closing.push(RunEvent::Terminal { result: terminal });
    store.append(&run_id, &closing)?;
    drop(lease);
    if let Some(failure) = write_failure {
        return Err(RuntimeError::Invalid(format!(
            "the workflow ran but some progress events were not recorded: {failure}"
        )));
    }
    Ok((run_id, result))
}

/// The `controller_attached` event describing this process.
pub fn controller_attached() -> RunEvent {
    RunEvent::ControllerAttached {
        pid: std::process::id(),
        started_at_ms: trellis_ledger::store::now_ms(),
        host: hostname(),
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_owned()),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}
