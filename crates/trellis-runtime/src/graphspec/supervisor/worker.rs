//! One worker's run as a future the supervisor polls: its harness events forwarded to the
//! shared queue before its result, its scratch space removed afterwards, a panic inside the
//! harness turned into that one execution's `crash` (with a diagnostic in the logs) rather
//! than the end of the whole run, and `timeoutMs` judged by the supervisor's own clock (less
//! any time the controller itself was stopped).

use std::any::Any;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    // A worker host judges the deadline of a queued execution itself, from when it starts it:
    // time spent waiting in the queue is not the worker's.
    let deadline = request.deadline.filter(|_| !harness.adopts_active());
    let started = Instant::now();
    let stalls_before = super::stall::mark();
    let stopped = cancel.clone();
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
        // The time the supervisor could watch: a controller that was itself stopped past the
        // deadline does not turn a worker that finished in time into a timeout.
        let elapsed = started
            .elapsed()
            .saturating_sub(super::stall::stalled_between(
                stalls_before,
                super::stall::mark(),
            ));
        let (result, overrode) = judge_deadline(result, deadline, elapsed, stopped.is_cancelled());
        if let (true, Some(deadline)) = (overrode, deadline) {
            let note = HarnessEvent::Log {
                stream: LogStream::System,
                level: LogLevel::Warn,
                message: format!(
                    "deadline (timeoutMs {} ms) passed before the outcome arrived ({} ms); \
                     settled timeout",
                    deadline.as_millis(),
                    elapsed.as_millis()
                ),
            };
            let _ = shared.send((execution, note)).await;
        }
        if let Some(scratch) = scratch {
            let _ = std::fs::remove_dir_all(&scratch);
        }
        (execution, result)
    })
}

/// A worker whose `timeoutMs` passed before its outcome reached the supervisor settles
/// `timeout`, whatever it answered: the budget is judged by the supervisor's clock from the
/// dispatch, as the reference does, not by whether the process happened to finish before the
/// harness's own timer fired (which a loaded machine delays). Executions the supervisor
/// cancelled itself and lost workers keep their outcome. Also says whether it changed the
/// outcome.
fn judge_deadline(
    mut result: ExecutionResult,
    deadline: Option<Duration>,
    elapsed: Duration,
    cancelled: bool,
) -> (ExecutionResult, bool) {
    let overran = deadline.is_some_and(|deadline| elapsed >= deadline);
    let timed_out = result.outcome.error_code() == Some(WorkerErrorCode::Timeout);
    if !overran || timed_out || cancelled || result.worker_lost {
        return (result, false);
    }
    result.outcome = WorkerOutcome::failure(WorkerErrorCode::Timeout);
    result.killed_from_outside = None;
    (result, true)
}

/// The message a panic carried, when it was text.
fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn verified() -> ExecutionResult {
        ExecutionResult {
            outcome: WorkerOutcome::Verified {
                output: Value::Null,
                artifacts: Vec::new(),
            },
            usage: TokenUsage::default(),
            killed_from_outside: None,
            worker_lost: false,
        }
    }

    #[test]
    fn an_answer_after_the_deadline_settles_timeout() {
        let ms = Duration::from_millis;
        let late = |cancelled| judge_deadline(verified(), Some(ms(1)), ms(5), cancelled);
        let (result, overrode) = late(false);
        assert!(overrode);
        assert_eq!(result.outcome.error_code(), Some(WorkerErrorCode::Timeout));
        // In time, without a deadline, cancelled by the supervisor, or a lost worker: kept.
        assert!(!judge_deadline(verified(), Some(ms(10)), ms(5), false).1);
        assert!(!judge_deadline(verified(), None, ms(5), false).1);
        assert!(!late(true).1);
        let mut lost = verified();
        lost.worker_lost = true;
        assert!(!judge_deadline(lost, Some(ms(1)), ms(5), false).1);
    }
}
