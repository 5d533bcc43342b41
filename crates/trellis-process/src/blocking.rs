//! The runner for synchronous callers (the GaP executor): the async runner on a small shared
//! runtime, its lines handed to the calling thread, cancellation asked of the caller.

use std::collections::VecDeque;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
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
    Done(ProcessReport),
}

/// Queues lines for the calling thread; delivery waits while the caller is behind.
struct ToCaller {
    tx: std_mpsc::Sender<Note>,
    /// One permit per line the caller may still have queued.
    room: Arc<Semaphore>,
    pending: VecDeque<(Stream, String)>,
}

impl ProcessObserver for ToCaller {
    fn line(&mut self, stream: Stream, line: &str) {
        self.pending.push_back((stream, line.to_owned()));
    }

    fn delivered(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            while !self.pending.is_empty() {
                // Take the room first: a cancelled wait loses no line.
                let Ok(permit) = self.room.acquire().await else {
                    self.pending.clear();
                    return;
                };
                permit.forget();
                if let Some((stream, line)) = self.pending.pop_front()
                    && self.tx.send(Note::Line(stream, line)).is_err()
                {
                    self.pending.clear();
                    return;
                }
            }
        })
    }
}

/// Runs the process to its end on the calling thread's behalf: `on_line` sees every line on
/// this thread; `is_cancelled` is asked at least every [`CANCEL_POLL`] and, once true, stops
/// the process group like the async runner's cancellation. The calling thread only waits on
/// a channel, so it may be any thread (a blocking task of an async runtime included).
pub fn run_blocking(
    spec: &ProcessSpec,
    limits: &ProcessLimits,
    is_cancelled: &dyn Fn() -> bool,
    on_line: &mut dyn FnMut(Stream, &str),
) -> ProcessReport {
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(message) => return ProcessReport::spawn_failed(message),
    };
    let (tx, rx) = std_mpsc::channel();
    let room = Arc::new(Semaphore::new(CALLER_QUEUE));
    let cancel = CancellationToken::new();
    runtime.spawn({
        let spec = spec.clone();
        let limits = limits.clone();
        let cancel = cancel.clone();
        let room = Arc::clone(&room);
        async move {
            let mut observer = ToCaller {
                tx: tx.clone(),
                room,
                pending: VecDeque::new(),
            };
            let report = run_process(&spec, &limits, &cancel, &mut observer).await;
            let _ = tx.send(Note::Done(report));
        }
    });
    loop {
        match rx.recv_timeout(CANCEL_POLL) {
            Ok(Note::Line(stream, line)) => {
                on_line(stream, &line);
                room.add_permits(1);
            }
            Ok(Note::Done(report)) => return report,
            Err(std_mpsc::RecvTimeoutError::Timeout) => {}
            Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                return ProcessReport::spawn_failed(
                    "the process runner stopped without a report".into(),
                );
            }
        }
        if !cancel.is_cancelled() && is_cancelled() {
            cancel.cancel();
        }
    }
}
