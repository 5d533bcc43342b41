//! The supervisor records an outcome and the dispatch it leads to in one commit. These tests
//! put another process's append between the supervisor's own appends and check that the run
//! still agrees with a full replay of its ledger, and that a force-stop requested while a
//! worker runs lets its outcome be recorded but starts nothing new.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, SecretEnv, TokenUsage,
};
use trellis_graph::{GraphSpec, JsonPath, WorkerOutcome};
use trellis_ledger::{
    Cursor, Durability, EventFilter, LogStream, NewRun, RunEvent, RunId, RunKind, RunStore,
    SqliteOptions, SqliteStore, TerminalResult,
};
use trellis_runtime::testing::{
    Harnesses, ReuseIndex, RunContext, RuntimePlan, Supervisor, history_of,
};

/// Each execution announces itself, then waits for a permit before it succeeds with `null`.
struct GatedHarness {
    started: mpsc::UnboundedSender<u64>,
    gate: Arc<Semaphore>,
    calls: AtomicU64,
}

impl Harness for GatedHarness {
    fn name(&self) -> &str {
        "gated"
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        _events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let _ = self.started.send(request.execution);
            let outcome = tokio::select! {
                permit = self.gate.acquire() => {
                    permit.map(|p| p.forget()).ok();
                    WorkerOutcome::Verified { output: Value::Null, artifacts: vec![] }
                }
                () = cancel.cancelled() => {
                    WorkerOutcome::failure(trellis_graph::WorkerErrorCode::Crash)
                }
            };
            ExecutionResult {
                outcome,
                usage: TokenUsage::default(),
                killed_from_outside: None,
                worker_lost: false,
            }
        })
    }
}

/// `root = seq[loop(3 rounds of one no-op step), succeed]`.
fn three_rounds() -> GraphSpec {
    let nothing = json!({"kind": "null"});
    let step = json!({
        "kind": "step", "name": "round", "worker": "command.round@1",
        "input": nothing, "output": nothing, "inputBindings": [], "writeBindings": [],
        "timeoutMs": 60_000, "attempts": 1,
    });
    let document = json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": nothing,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {
            "kind": "seq", "name": "root", "state": nothing, "promotedStatePaths": [],
            "children": [
                {"kind": "loop", "name": "rounds", "state": nothing, "body": step,
                 "maxIterations": 3, "promotedStatePaths": []},
                {"kind": "succeed", "name": "done", "output": nothing, "bindings": []},
            ],
        },
    });
    GraphSpec::parse(&document, &JsonPath::root()).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    run_id: RunId,
    harness: Arc<GatedHarness>,
    started: mpsc::UnboundedReceiver<u64>,
}

fn fixture(graph: &GraphSpec) -> (Fixture, RunContext) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let options = SqliteOptions {
        durability: Durability::Normal,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    let run_id = RunId::generate();
    let run = NewRun::new(
        run_id.clone(),
        run_id.as_str(),
        "batching",
        RunKind::Graphspec,
        json!({}),
    );
    store.create_or_get(run).unwrap();
    store.append(&run_id, &[RunEvent::RunStarted {}]).unwrap();
    let (started_tx, started) = mpsc::unbounded_channel();
    let harness = Arc::new(GatedHarness {
        started: started_tx,
        gate: Arc::new(Semaphore::new(0)),
        calls: AtomicU64::new(0),
    });
    let shared: Arc<dyn Harness> = harness.clone();
    let plan =
        RuntimePlan::uniform(&json!({"kind": "command", "command": ["true"]}), graph).unwrap();
    let context = RunContext {
        store: Arc::new(store),
        run_id: run_id.clone(),
        graph: trellis_engine::RunnableGraph::verify_builtin(graph.clone())
            .expect("the graph verifies")
            .0,
        input: Value::Null,
        plan,
        harnesses: Harnesses {
            command: shared.clone(),
            agent: None,
            delivery: shared,
        },
        workspace: dir.path().to_path_buf(),
        scratch: dir.path().join("scratch"),
        secrets: SecretEnv::new(Default::default()),
        base_env: vec![],
        reuse: ReuseIndex::default(),
        wake: Arc::new(tokio::sync::Notify::new()),
    };
    let fixture = Fixture {
        _dir: dir,
        path,
        run_id,
        harness,
        started,
    };
    (fixture, context)
}

/// A second connection to the same ledger, as another `trellis` process would have.
fn other_process(fixture: &Fixture) -> SqliteStore {
    SqliteStore::open(&fixture.path).unwrap()
}

fn events(store: &SqliteStore, run_id: &RunId) -> Vec<RunEvent> {
    store
        .events_after(run_id, Cursor::START, 10_000, EventFilter::All)
        .unwrap()
        .into_iter()
        .map(|stored| stored.event)
        .collect()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn an_append_by_another_process_between_steps_leaves_the_run_equal_to_its_replay() {
    let graph = three_rounds();
    let (mut fixture, context) = fixture(&graph);
    let runtime = runtime();
    runtime.block_on(async {
        let run = tokio::spawn(Supervisor::new(context).unwrap().run());
        for _round in 0..3 {
            fixture.started.recv().await.unwrap();
            // Another process writes while the step runs: the supervisor's next batch lands
            // one position later than it planned.
            other_process(&fixture)
                .append(
                    &fixture.run_id,
                    &[RunEvent::Log {
                        execution: None,
                        stream: LogStream::System,
                        level: LogStream::System.default_level(),
                        message: "written by another process".into(),
                        timestamp_ms: 1,
                    }],
                )
                .unwrap();
            fixture.harness.gate.add_permits(1);
        }
        run.await.unwrap().unwrap();
    });

    let store = other_process(&fixture);
    let head = store.head(&fixture.run_id).unwrap();
    assert_eq!(
        head.progress.terminal,
        Some(TerminalResult::Succeeded {
            output: Value::Null
        })
    );
    assert_eq!(fixture.harness.calls.load(Ordering::SeqCst), 3);
    let snapshot = store.snapshot(&fixture.run_id).unwrap();
    assert_eq!(snapshot.executions.len(), 3);
    let runnable = trellis_engine::RunnableGraph::verify_builtin(graph.clone())
        .unwrap()
        .0;
    let replay = trellis_engine::reduce(&runnable, &Value::Null, &history_of(&snapshot)).unwrap();
    assert_eq!(
        replay.terminal,
        Some(trellis_engine::TerminalResult::Succeeded {
            output: Value::Null
        })
    );
    // Each round's dispatch follows the previous round's outcome, and the foreign lines sit
    // between them, never inside one batch.
    let kinds: Vec<&str> = events(&store, &fixture.run_id)
        .iter()
        .map(|event| match event {
            RunEvent::NodeStarted { .. } => "started",
            RunEvent::NodeCompleted { .. } => "completed",
            RunEvent::Log { .. } => "log",
            RunEvent::Terminal { .. } => "terminal",
            _ => "other",
        })
        .filter(|kind| *kind != "other")
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "log",
            "completed",
            "started",
            "log",
            "completed",
            "started",
            "log",
            "completed",
            "terminal"
        ]
    );
}

#[test]
fn a_force_stop_requested_while_a_step_runs_records_its_outcome_and_starts_nothing_more() {
    let graph = three_rounds();
    let (mut fixture, context) = fixture(&graph);
    let runtime = runtime();
    runtime.block_on(async {
        let run = tokio::spawn(Supervisor::new(context).unwrap().run());
        fixture.started.recv().await.unwrap();
        other_process(&fixture)
            .request_force_stop(&fixture.run_id)
            .unwrap();
        fixture.harness.gate.add_permits(3);
        run.await.unwrap().unwrap();
    });

    let store = other_process(&fixture);
    let head = store.head(&fixture.run_id).unwrap();
    assert_eq!(
        head.progress.terminal,
        Some(TerminalResult::Failed {
            reason: "force_stopped".into()
        })
    );
    assert_eq!(fixture.harness.calls.load(Ordering::SeqCst), 1);
    let all = events(&store, &fixture.run_id);
    let started = all
        .iter()
        .filter(|e| matches!(e, RunEvent::NodeStarted { .. }))
        .count();
    let completed = all
        .iter()
        .filter(|e| matches!(e, RunEvent::NodeCompleted { .. }))
        .count();
    assert_eq!((started, completed), (1, 1));
}

/// Reports a process, a log line and token usage, then succeeds at once: what a worker says
/// reaches the supervisor together with its outcome.
struct ChattyHarness;

/// Beyond any real pid, so no process group of this machine is ever named.
const FAKE_GROUP: u32 = 2_000_000_000;

impl Harness for ChattyHarness {
    fn name(&self) -> &str {
        "chatty"
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async move {
            let said = [
                trellis_agents::HarnessEvent::Started {
                    process_group: FAKE_GROUP,
                },
                trellis_agents::HarnessEvent::Log {
                    stream: LogStream::Error,
                    level: LogStream::Error.default_level(),
                    message: format!("line of execution {}", request.execution),
                },
                trellis_agents::HarnessEvent::Usage(TokenUsage {
                    output_tokens: 7,
                    ..TokenUsage::default()
                }),
            ];
            for event in said {
                let _ = events.send(event).await;
            }
            ExecutionResult::settled(
                WorkerOutcome::Verified {
                    output: Value::Null,
                    artifacts: vec![],
                },
                TokenUsage::default(),
            )
        })
    }
}

/// Issue 20: what a worker reported before its outcome is committed with that outcome (and the
/// next dispatch) rather than in a commit of its own. Every report of every step is kept, in
/// the order the worker gave it, before its outcome; the run's usage counts each one.
#[test]
fn what_a_worker_said_is_recorded_with_its_outcome_whole_and_in_order() {
    let graph = three_rounds();
    let (fixture, mut context) = fixture(&graph);
    let chatty: Arc<dyn Harness> = Arc::new(ChattyHarness);
    context.harnesses.command = chatty;
    runtime().block_on(async { Supervisor::new(context).unwrap().run().await.unwrap() });

    let store = other_process(&fixture);
    let head = store.head(&fixture.run_id).unwrap();
    assert_eq!(
        head.progress.terminal,
        Some(TerminalResult::Succeeded {
            output: Value::Null
        })
    );
    assert_eq!(head.progress.token_usage.output_tokens, 21);
    let said: Vec<String> = events(&store, &fixture.run_id)
        .iter()
        .filter_map(|event| match event {
            RunEvent::NodeStarted { execution, .. } => Some(format!("started {execution}")),
            RunEvent::WorkerProcess {
                execution,
                process_group,
            } => Some(format!("process {execution} {process_group}")),
            RunEvent::Log {
                execution: Some(execution),
                message,
                ..
            } => Some(format!("log {execution} {message}")),
            RunEvent::TokenUsage { execution, usage } => {
                Some(format!("usage {execution} {}", usage.output_tokens))
            }
            RunEvent::NodeCompleted { execution, .. } => Some(format!("completed {execution}")),
            _ => None,
        })
        .collect();
    let expected: Vec<String> = (1..=3u64)
        .flat_map(|n| {
            [
                format!("started {n}"),
                format!("process {n} {FAKE_GROUP}"),
                format!("log {n} line of execution {n}"),
                format!("usage {n} 7"),
                format!("completed {n}"),
            ]
        })
        .collect();
    assert_eq!(said, expected);
}
