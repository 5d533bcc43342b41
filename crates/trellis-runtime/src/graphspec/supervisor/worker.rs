//! One worker's run as a future the supervisor polls: its harness events forwarded to the
//! shared queue before its result, its scratch space removed afterwards, and a panic inside
//! the harness turned into that one execution's `crash` (with a diagnostic in the logs) rather
//! than the end of the whole run.

use std::any::Any;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{ExecutionRequest, ExecutionResult, Harness, HarnessEvent};
use trellis_graph::{WorkerErrorCode, WorkerOutcome};
use trellis_ledger::{LogLevel, LogStream, TokenUsage};

/// One worker's run to its result (a panic already settled as `crash`).
pub(super) type WorkerFuture = Pin<Box<dyn Future<Output = (u64, ExecutionResult)> + Send>>;

/// How many harness events one worker may queue before it waits for the supervisor.
const WORKER_EVENTS: usize = 1024;

/// The future that runs `request` on `harness`; `scratch` is removed when it ends.
pub(super) fn worker_future(
    harness: Arc<dyn Harness>,
    request: ExecutionRequest,
    cancel: CancellationToken,
    shared: mpsc::Sender<(u64, HarnessEvent)>,
    scratch: Option<PathBuf>,
) -> WorkerFuture {
    let execution = request.execution;
    let node = request.node.to_string();
    let forward = shared.clone();
    let run = async move {
        let (tx, mut rx) = mpsc::channel(WORKER_EVENTS);
        let run = harness.execute(request, tx, cancel);
        tokio::pin!(run);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                Some(event) = rx.recv() => { let _ = forward.send((execution, event)).await; }
            }
        };
        // Everything the worker said reaches the shared queue before its outcome does.
        while let Some(event) = rx.recv().await {
            let _ = forward.send((execution, event)).await;
        }
        result
    };
    Box::pin(async move {
        // The harness is code of ours or a plugin's; whatever it does wrong must stay inside
        // this execution.
        let result = match std::panic::AssertUnwindSafe(run).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let message = format!(
                    "the worker of node {node} panicked ({}); the execution settles as crash",
                    panic_text(panic.as_ref())
                );
                let note = HarnessEvent::Log {
                    stream: LogStream::System,
                    level: LogLevel::Error,
                    message,
                };
                let _ = shared.send((execution, note)).await;
                ExecutionResult {
                    outcome: WorkerOutcome::failure(WorkerErrorCode::Crash),
                    usage: TokenUsage::default(),
                    killed_from_outside: None,
                    worker_lost: false,
                }
            }
        };
        if let Some(scratch) = scratch {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        (execution, result)
    })
}

/// The message a panic carried, when it was text.
fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}
