//! The controller's side of worker hosts: a harness that queues each execution in the ledger
//! instead of starting it here, and one thread per run that collects the log lines worker
//! hosts push and what they settled, re-queues nothing (an expired claim is lost and settles
//! `crash` with `worker_lost`; the node's attempts decide whether it runs again) and hands
//! both to the waiters: an execution's lines as they come, then its outcome. The collector
//! sleeps on the ledger's notes (`LISTEN/NOTIFY`: a worker's pushed lines or outcome wake it)
//! rather than polling the queue.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, HarnessEvent,
};
use trellis_graph::{WorkerErrorCode, WorkerOutcome};
use trellis_ledger::postgres::dispatch_notes::DispatchNote;
use trellis_ledger::postgres::leases::Dispatch;
use trellis_ledger::postgres::logs::DispatchLog;
use trellis_ledger::{LogLevel, LogStream, RunId, RunStore, TokenUsage};

use crate::dispatch::enqueuer::Enqueuer;
use crate::dispatch::remote_workspace::{apply_result, forget};

/// How often the collector looks whether anything waits, while nothing does.
const COLLECT_EVERY: Duration = Duration::from_millis(50);
/// Longest the collector waits for a worker's note (pushed lines, an outcome) before it looks
/// at the queue anyway: the safety net under `LISTEN/NOTIFY`, and how soon it stops.
const NOTE_WAIT: Duration = Duration::from_millis(100);
/// How often the collector re-queues (or gives up) claims whose worker host went silent.
const REAP_EVERY: Duration = Duration::from_millis(500);
/// Claims an execution may have: one. A lost worker host settles the execution `crash`
/// (`worker_lost`) and a retry is a new execution the ledger records, per the node's attempts.
const MAX_CLAIMS: u32 = 1;

/// What a worker host needs besides the stored submission to run one execution.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DispatchPayload {
    /// The directory the execution works in (a path on the controller's host).
    pub workspace: PathBuf,
    pub node_instance: u64,
    pub attempt: u32,
    pub input: Value,
}

/// What a worker host reports for one execution.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct QueuedOutcome {
    pub outcome: WorkerOutcome,
    pub usage: TokenUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed_from_outside: Option<i32>,
    /// The lines it did not push while the execution ran (same shape as pushed ones).
    #[serde(default)]
    pub logs: Vec<DispatchLog>,
    /// Who ran it (`worker@host:pid`).
    pub worker: String,
    /// The commit holding the workspace the execution left, returned to the serving host
    /// (a worker host without the controller's filesystem whose step changed files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether the worker host fetched the workspace from the serving host (so its start
    /// point, and maybe a result, are references to drop).
    #[serde(default)]
    pub fetched_workspace: bool,
}

/// How an execution left the queue.
enum Finished {
    Settled(String),
    Lost,
}

/// What the collector hands the waiter of one execution, in this order: lines, then its end.
enum Delivery {
    Lines(Vec<DispatchLog>),
    Finished(Finished),
}

#[derive(Default)]
struct Mailbox {
    waiting: HashMap<u64, mpsc::UnboundedSender<Delivery>>,
    /// Taken before anyone waited (an adopted execution, or a fast worker): kept, in order,
    /// for its waiter. Pushed lines are bounded per execution by the worker host.
    early: HashMap<u64, Vec<Delivery>>,
}

impl Mailbox {
    /// Hands `delivery` to the execution's waiter, or keeps it for a waiter to come. The
    /// waiter is gone after its `Finished`: its channel then closes.
    fn deliver(&mut self, execution: u64, delivery: Delivery) {
        let last = matches!(delivery, Delivery::Finished(_));
        let delivery = match self.waiting.get(&execution) {
            Some(waiter) => match waiter.send(delivery) {
                Ok(()) if last => {
                    self.waiting.remove(&execution);
                    return;
                }
                Ok(()) => return,
                // The waiter went away (its execution was cancelled): nobody will read it.
                Err(_) => {
                    self.waiting.remove(&execution);
                    return;
                }
            },
            None => delivery,
        };
        self.early.entry(execution).or_default().push(delivery);
    }
}

/// The run's dispatch queue as seen by its controller: shared by the harnesses of every
/// queued binding kind, collected by one thread.
pub(crate) struct RunQueue {
    store: Arc<dyn RunStore>,
    run_id: RunId,
    token: i64,
    /// The run's directory: scratch space for applying results.
    run_dir: PathBuf,
    mailbox: Arc<Mutex<Mailbox>>,
    /// Puts executions in the ledger's queue, in batches.
    enqueuer: Enqueuer,
    stop: Arc<AtomicBool>,
    collector: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl RunQueue {
    pub(crate) fn start(
        store: Arc<dyn RunStore>,
        run_id: RunId,
        token: i64,
        run_dir: PathBuf,
    ) -> Result<Arc<Self>, crate::shared::error::RuntimeError> {
        let mailbox = Arc::new(Mutex::new(Mailbox::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let collector = {
            let (store, run_id) = (store.clone(), run_id.clone());
            let (mailbox, stop) = (mailbox.clone(), stop.clone());
            std::thread::Builder::new()
                .name("trellis-queue".into())
                .spawn(move || collect(store.as_ref(), &run_id, token, &mailbox, &stop))
                .map_err(|e| {
                    crate::shared::error::RuntimeError::io("cannot start the queue thread", e)
                })?
        };
        let enqueuer = Enqueuer::start(store.clone(), run_id.clone(), token).map_err(|e| {
            crate::shared::error::RuntimeError::io("cannot start the queueing thread", e)
        })?;
        Ok(Arc::new(Self {
            store,
            run_id,
            token,
            run_dir,
            mailbox,
            enqueuer,
            stop,
            collector: Mutex::new(Some(collector)),
        }))
    }

    fn wait_for(&self, execution: u64) -> mpsc::UnboundedReceiver<Delivery> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut mailbox) = self.mailbox.lock() {
            let early = mailbox.early.remove(&execution).unwrap_or_default();
            let finished = early.iter().any(|d| matches!(d, Delivery::Finished(_)));
            for delivery in early {
                let _ = tx.send(delivery);
            }
            if !finished {
                mailbox.waiting.insert(execution, tx);
            }
        }
        rx
    }

    fn forget(&self, execution: u64) {
        if let Ok(mut mailbox) = self.mailbox.lock() {
            mailbox.waiting.remove(&execution);
            mailbox.early.remove(&execution);
        }
    }
}

impl Drop for RunQueue {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(collector) = self.collector.lock().ok().and_then(|mut c| c.take()) {
            let _ = collector.join();
        }
    }
}

fn collect(
    store: &dyn RunStore,
    run_id: &RunId,
    token: i64,
    mailbox: &Mutex<Mailbox>,
    stop: &AtomicBool,
) {
    let Some(postgres) = store.as_postgres() else {
        return;
    };
    // Subscribed before the first look, so a note sent after any look wakes the next wait.
    let waiter = postgres
        .dispatch_waiter(DispatchNote::Dispatch(run_id.clone()))
        .ok();
    let mut last_reap: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let idle = mailbox.lock().map_or(true, |m| m.waiting.is_empty());
        if idle {
            std::thread::sleep(COLLECT_EVERY);
            continue;
        }
        // Errors here are transient or a lost lease; the supervisor's own fenced appends
        // notice the latter and end this controller.
        if last_reap.is_none_or(|at| at.elapsed() >= REAP_EVERY) {
            let _ = postgres.reap_expired(run_id, MAX_CLAIMS);
            last_reap = Some(Instant::now());
        }
        // One transaction takes the finished dispatches and then the lines, so every line an
        // execution pushed before its outcome comes with it, and goes first.
        let Ok(collected) = postgres.take_finished_and_logs(run_id, token) else {
            std::thread::sleep(COLLECT_EVERY);
            continue;
        };
        let Ok(mut mailbox) = mailbox.lock() else {
            return;
        };
        for (execution, lines) in by_execution(collected.logs) {
            mailbox.deliver(execution, Delivery::Lines(lines));
        }
        for (execution, outcome) in collected.finished {
            let finished = outcome.map_or(Finished::Lost, Finished::Settled);
            mailbox.deliver(execution, Delivery::Finished(finished));
        }
        drop(mailbox);
        match &waiter {
            Some(waiter) => {
                // A failed wait (the ledger unreachable) is a poll of the old period.
                if postgres.wait_for_note(waiter, NOTE_WAIT).is_err() {
                    std::thread::sleep(COLLECT_EVERY);
                }
            }
            None => std::thread::sleep(COLLECT_EVERY),
        }
    }
}

/// Lines in the order taken, grouped by execution (each execution's order kept).
fn by_execution(lines: Vec<(u64, DispatchLog)>) -> Vec<(u64, Vec<DispatchLog>)> {
    let mut grouped: Vec<(u64, Vec<DispatchLog>)> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    for (execution, line) in lines {
        match index.get(&execution) {
            Some(&at) => grouped[at].1.push(line),
            None => {
                index.insert(execution, grouped.len());
                grouped.push((execution, vec![line]));
            }
        }
    }
    grouped
}

/// A harness that runs nothing itself: it queues the execution for a worker host of `kind`
/// (`command`, `claude`, …) and waits for its outcome.
pub(crate) struct QueuedHarness {
    queue: Arc<RunQueue>,
    kind: String,
}

impl QueuedHarness {
    pub(crate) fn new(queue: Arc<RunQueue>, kind: &str) -> Self {
        Self {
            queue,
            kind: kind.to_owned(),
        }
    }
}

fn crash_with(message: String, events: &EventSink) -> ExecutionResult {
    let _ = events.try_send(HarnessEvent::Log {
        stream: LogStream::System,
        level: LogLevel::Error,
        message,
    });
    ExecutionResult::settled(
        WorkerOutcome::failure(WorkerErrorCode::Crash),
        TokenUsage::default(),
    )
}

async fn off_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(job).await.ok()
}

impl Harness for QueuedHarness {
    fn name(&self) -> &str {
        "queue"
    }

    fn adopts_active(&self) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async move {
            let execution = request.execution;
            let payload = DispatchPayload {
                workspace: request.workspace.clone(),
                node_instance: request.node_instance,
                attempt: request.attempt,
                input: request.input.clone(),
            };
            let payload_json = match serde_json::to_string(&payload) {
                Ok(json) => json,
                Err(e) => return crash_with(format!("cannot encode the dispatch: {e}"), &events),
            };
            let mut deliveries = self.queue.wait_for(execution);
            let dispatch = Dispatch {
                execution,
                node: request.node.to_string(),
                harness: self.kind.clone(),
                payload_json,
            };
            match self.queue.enqueuer.enqueue(dispatch).await {
                Ok(()) => {}
                Err(error) => {
                    self.queue.forget(execution);
                    return crash_with(format!("cannot queue the execution: {error}"), &events);
                }
            }
            let finished = async {
                loop {
                    match deliveries.recv().await {
                        Some(Delivery::Lines(lines)) => forward(lines, &events).await,
                        Some(Delivery::Finished(finished)) => return Some(finished),
                        None => return None,
                    }
                }
            };
            // Whether the execution may have left transfer references in the repository: only
            // a worker host that fetched the workspace makes any (as far as an outcome says).
            let mut fetched = true;
            let result = tokio::select! {
                finished = finished => match finished {
                    Some(Finished::Settled(json)) => {
                        fetched = serde_json::from_str::<QueuedOutcome>(&json)
                            .map_or(true, |reported| reported.fetched_workspace);
                        settled(&json, &events, self.result_place(&request)).await
                    }
                    Some(Finished::Lost) => lost(&events),
                    None => crash_with("the queue stopped before the execution settled".into(), &events),
                },
                () = cancel.cancelled() => {
                    self.queue.forget(execution);
                    let (store, run_id, token) = (
                        self.queue.store.clone(),
                        self.queue.run_id.clone(),
                        self.queue.token,
                    );
                    // The claim disappears: its worker stops at its next heartbeat.
                    let _ = off_thread(move || {
                        store
                            .as_postgres()
                            .map(|postgres| postgres.withdraw(&run_id, token, vec![execution]))
                    })
                    .await;
                    ExecutionResult::settled(
                        WorkerOutcome::failure(WorkerErrorCode::Refusal),
                        TokenUsage::default(),
                    )
                }
            };
            // Whatever became of it, nothing of the execution stays in the repository.
            if fetched {
                let (workspace, run_id) = (request.workspace.clone(), self.queue.run_id.clone());
                let _ = off_thread(move || forget(&workspace, &run_id, execution)).await;
            }
            result
        })
    }
}

/// Where a returned result is applied: the execution's workspace on this host.
struct ResultPlace {
    workspace: PathBuf,
    run_id: RunId,
    execution: u64,
    run_dir: PathBuf,
}

impl QueuedHarness {
    fn result_place(&self, request: &ExecutionRequest) -> ResultPlace {
        ResultPlace {
            workspace: request.workspace.clone(),
            run_id: self.queue.run_id.clone(),
            execution: request.execution,
            run_dir: self.queue.run_dir.clone(),
        }
    }
}

/// Hands a worker host's lines on as if this harness had produced them.
async fn forward(lines: Vec<DispatchLog>, events: &EventSink) {
    for line in lines {
        let _ = events
            .send(HarnessEvent::Log {
                stream: line.stream,
                level: line.level,
                message: line.message,
            })
            .await;
    }
}

async fn settled(json: &str, events: &EventSink, place: ResultPlace) -> ExecutionResult {
    let reported: QueuedOutcome = match serde_json::from_str(json) {
        Ok(reported) => reported,
        Err(e) => {
            return crash_with(
                format!("a worker host reported an unreadable outcome: {e}"),
                events,
            );
        }
    };
    let _ = events
        .send(HarnessEvent::Log {
            stream: LogStream::System,
            level: LogLevel::Info,
            message: format!("ran on {}", reported.worker),
        })
        .await;
    forward(reported.logs, events).await;
    if let Some(commit) = reported.result.clone() {
        // The step's changes land in the workspace before its outcome is recorded, as a
        // step run here writes them before it answers.
        let applied = off_thread(move || {
            apply_result(
                &place.workspace,
                &place.run_id,
                place.execution,
                &commit,
                &place.run_dir,
            )
        })
        .await;
        match applied {
            Some(Ok(changed)) => {
                let _ = events
                    .send(HarnessEvent::Log {
                        stream: LogStream::System,
                        level: LogLevel::Info,
                        message: format!(
                            "applied the worker host's result: {changed} path(s) changed"
                        ),
                    })
                    .await;
            }
            Some(Err(error)) => {
                return crash_with(
                    format!("cannot apply the worker host's result: {error}"),
                    events,
                );
            }
            None => return crash_with("the applying thread failed".into(), events),
        }
    }
    if reported.usage != TokenUsage::default() {
        let _ = events.send(HarnessEvent::Usage(reported.usage)).await;
    }
    ExecutionResult {
        outcome: reported.outcome,
        usage: reported.usage,
        killed_from_outside: reported.killed_from_outside,
        worker_lost: false,
    }
}

fn lost(events: &EventSink) -> ExecutionResult {
    let _ = events.try_send(HarnessEvent::Log {
        stream: LogStream::System,
        level: LogLevel::Warn,
        message: "the worker host running this execution stopped renewing its claim; it \
                  settles as crash (worker_lost)"
            .into(),
    });
    ExecutionResult {
        worker_lost: true,
        ..ExecutionResult::settled(
            WorkerOutcome::failure(WorkerErrorCode::Crash),
            TokenUsage::default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str) -> DispatchLog {
        DispatchLog {
            stream: LogStream::Output,
            level: LogLevel::Info,
            message: message.to_owned(),
        }
    }

    fn lines_of(delivery: Option<Delivery>) -> Vec<String> {
        match delivery {
            Some(Delivery::Lines(lines)) => lines.into_iter().map(|l| l.message).collect(),
            Some(Delivery::Finished(_)) => panic!("an outcome before the lines"),
            None => panic!("nothing delivered"),
        }
    }

    #[test]
    fn lines_taken_before_anyone_waits_reach_the_waiter_before_the_outcome() {
        let queue = Mutex::new(Mailbox::default());
        let mut mailbox = queue.lock().unwrap();
        mailbox.deliver(7, Delivery::Lines(vec![line("a"), line("b")]));
        mailbox.deliver(7, Delivery::Lines(vec![line("c")]));
        mailbox.deliver(7, Delivery::Finished(Finished::Lost));
        drop(mailbox);
        let store: Arc<dyn RunStore> =
            Arc::new(trellis_ledger::SqliteStore::open_in_memory().unwrap());
        let run_id = RunId::new("run-1").unwrap();
        let run_queue = RunQueue {
            enqueuer: Enqueuer::start(store.clone(), run_id.clone(), 1).unwrap(),
            store,
            run_id,
            token: 1,
            run_dir: PathBuf::new(),
            mailbox: Arc::new(queue),
            stop: Arc::new(AtomicBool::new(true)),
            collector: Mutex::new(None),
        };
        let mut deliveries = run_queue.wait_for(7);
        assert_eq!(lines_of(deliveries.try_recv().ok()), ["a", "b"]);
        assert_eq!(lines_of(deliveries.try_recv().ok()), ["c"]);
        assert!(matches!(
            deliveries.try_recv(),
            Ok(Delivery::Finished(Finished::Lost))
        ));
        // Nothing more will come: the channel is closed, not waiting.
        assert!(matches!(
            deliveries.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(run_queue.mailbox.lock().unwrap().waiting.is_empty());
    }

    #[test]
    fn a_waiter_gets_lines_as_they_come_and_is_let_go_after_its_outcome() {
        let mut mailbox = Mailbox::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        mailbox.waiting.insert(3, tx);
        mailbox.deliver(3, Delivery::Lines(vec![line("live")]));
        assert_eq!(lines_of(rx.try_recv().ok()), ["live"]);
        assert!(mailbox.waiting.contains_key(&3));
        mailbox.deliver(3, Delivery::Finished(Finished::Settled("{}".into())));
        assert!(mailbox.waiting.is_empty() && mailbox.early.is_empty());
        assert!(matches!(
            rx.try_recv(),
            Ok(Delivery::Finished(Finished::Settled(_)))
        ));
    }

    #[test]
    fn lines_are_grouped_by_execution_in_their_order() {
        let grouped = by_execution(vec![
            (2, line("2a")),
            (1, line("1a")),
            (2, line("2b")),
            (1, line("1b")),
        ]);
        let messages: Vec<(u64, Vec<String>)> = grouped
            .into_iter()
            .map(|(execution, lines)| (execution, lines.into_iter().map(|l| l.message).collect()))
            .collect();
        assert_eq!(
            messages,
            vec![
                (2, vec!["2a".to_owned(), "2b".to_owned()]),
                (1, vec!["1a".to_owned(), "1b".to_owned()]),
            ]
        );
    }
}
