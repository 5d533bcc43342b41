//! The runner for synchronous callers (the GaP executor): the async runner on a small shared
//! runtime, its lines handed to the calling thread, cancellation asked of the caller.

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::lines::Stream;
use crate::run::{BoxFuture, ProcessObserver, ProcessReport, run_process};
use crate::spec::{ProcessLimits, ProcessSpec};

/// How often a blocking run asks its caller whether to cancel while no line arrives.
pub const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Lines queued for the calling thread; beyond it the child waits for the caller.
const CALLER_QUEUE: usize = 64;

/// The runtime every blocking run uses: one worker thread, started on first use.
fn runtime() -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("trellis-process")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the process runner's runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What the runner tells the calling thread.
enum Note {
    Line(Stream, String),
}

/// Queues lines for the calling thread; delivery waits while the caller is behind.
struct ToCaller {
    tx: mpsc::Sender<Note>,
    pending: VecDeque<Note>,
}

impl ProcessObserver for ToCaller {
    fn line(&mut self, stream: Stream, line: &str) {
        self.pending.push_back(Note::Line(stream, line.to_owned()));
    }

    fn delivered(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            while !self.pending.is_empty() {
                // Reserve first: a cancelled wait loses no line.
                let Ok(permit) = self.tx.reserve().await else {
                    self.pending.clear();
                    return;
                };
                if let Some(note) = self.pending.pop_front() {
                    permit.send(note);
                }
            }
        })
    }
}

/// Runs the process to its end on the calling thread's behalf: `on_line` sees every line on
/// this thread; `is_cancelled` is asked at least every [`CANCEL_POLL`] and, once true, stops
/// the process group like the async runner's cancellation.
pub fn run_blocking(
    spec: &ProcessSpec,
    limits: &ProcessLimits,
    is_cancelled: &dyn Fn() -> bool,
    on_line: &mut dyn FnMut(Stream, &str),
) -> ProcessReport {
    if Handle::try_current().is_ok() {
        return ProcessReport::spawn_failed(
            "the blocking process runner was called from async code; use run_process".into(),
        );
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(message) => return ProcessReport::spawn_failed(message),
    };
    let (tx, mut rx) = mpsc::channel(CALLER_QUEUE);
    let cancel = CancellationToken::new();
    let task = runtime.spawn({
        let spec = spec.clone();
        let limits = limits.clone();
        let cancel = cancel.clone();
        async move {
            let mut observer = ToCaller {
                tx,
                pending: VecDeque::new(),
            };
            run_process(&spec, &limits, &cancel, &mut observer).await
        }
    });
    loop {
        let next = runtime.block_on(async { tokio::time::timeout(CANCEL_POLL, rx.recv()).await });
        match next {
            Ok(Some(Note::Line(stream, line))) => on_line(stream, &line),
            Ok(None) => break,
            Err(_) => {}
        }
        if !cancel.is_cancelled() && is_cancelled() {
            cancel.cancel();
        }
    }
    runtime
        .block_on(task)
        .unwrap_or_else(|e| ProcessReport::spawn_failed(format!("the process runner failed: {e}")))
}
