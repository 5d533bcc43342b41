//! The supervisor in-process, with scripted harnesses: a force-stop, an exhausted budget, a
//! join that cancels its losing branch, a worker that panics, and a resumed run that reuses its
//! predecessor's settled work. Each test drives a real ledger file and checks what it records.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, HarnessEvent, SecretEnv,
    TokenUsage,
};
use trellis_graph::{GraphSpec, JsonPath, WorkerErrorCode, WorkerOutcome};
use trellis_ledger::{
    Cursor, EventFilter, ExecutionState, LogLevel, NewRun, RunEvent, RunId, RunKind, RunSnapshot,
    RunStore, SettledBy, SqliteStore, TerminalResult, VoidReason,
};
use trellis_runtime::testing::{Harnesses, ReuseIndex, RunContext, RuntimePlan, Supervisor};

/// What a scripted node does when it runs.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Settles `verified` with a `null` output at once.
    Succeed,
    /// Panics on its first call, succeeds on later ones.
    PanicOnce,
    /// Reports `tokens` input tokens, then waits to be cancelled.
    Spend(u64),
    /// Waits to be cancelled (then settles `refusal`, as harnesses do).
    Hang,
    /// Answers `verified` after this many milliseconds, whatever its deadline (as a harness
    /// whose own timer a loaded machine delayed).
    Late(u64),
}

/// Runs each node by its script, counting calls and noting cancellations.
struct Scripted {
    script: HashMap<String, Behaviour>,
    calls: Mutex<HashMap<String, u64>>,
    cancelled: AtomicU64,
    /// Told every time an execution starts, so a test can act while it runs.
    started: tokio::sync::mpsc::UnboundedSender<String>,
}

impl Scripted {
    fn calls(&self, node: &str) -> u64 {
        self.calls.lock().unwrap().get(node).copied().unwrap_or(0)
    }
}

fn verified() -> WorkerOutcome {
    WorkerOutcome::Verified {
        output: Value::Null,
        artifacts: vec![],
    }
}

impl Harness for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async move {
            let node = request.node.to_string();
            let call = {
                let mut calls = self.calls.lock().unwrap();
                let count = calls.entry(node.clone()).or_default();
                *count += 1;
                *count
            };
            let _ = self.started.send(node.clone());
            let behaviour = self
                .script
                .get(&node)
                .copied()
                .unwrap_or(Behaviour::Succeed);
            let usage = TokenUsage::default();
            let hang = async {
                cancel.cancelled().await;
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                ExecutionResult {
                    outcome: WorkerOutcome::failure(WorkerErrorCode::Refusal),
                    usage,
                    killed_from_outside: None,
                    worker_lost: false,
                }
            };
            match behaviour {
                Behaviour::Succeed => ExecutionResult {
                    outcome: verified(),
                    usage,
                    killed_from_outside: None,
                    worker_lost: false,
                },
                Behaviour::PanicOnce if call == 1 => panic!("scripted worker bug in {node}"),
                Behaviour::PanicOnce => ExecutionResult {
                    outcome: verified(),
                    usage,
                    killed_from_outside: None,
                    worker_lost: false,
                },
                Behaviour::Spend(tokens) => {
                    let spent = TokenUsage {
                        input_tokens: tokens,
                        ..TokenUsage::default()
                    };
                    let _ = events.send(HarnessEvent::Usage(spent)).await;
                    hang.await
                }
                Behaviour::Hang => hang.await,
                Behaviour::Late(ms) => {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    ExecutionResult {
                        outcome: verified(),
                        usage,
                        killed_from_outside: None,
                        worker_lost: false,
                    }
                }
            }
        })
    }
}

fn nothing() -> Value {
    json!({"kind": "null"})
}

fn step(name: &str, attempts: u32) -> Value {
    json!({"kind": "step", "name": name, "worker": format!("command.{name}@1"),
           "input": nothing(), "output": nothing(), "inputBindings": [], "writeBindings": [],
           "timeoutMs": 60_000, "attempts": attempts})
}

/// `root = seq[children…, succeed]`.
fn graph(children: Vec<Value>) -> GraphSpec {
    let mut children = children;
    children.push(json!({"kind": "succeed", "name": "done", "output": nothing(), "bindings": []}));
    let document = json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": nothing(),
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": nothing(), "promotedStatePaths": [],
                 "children": children},
    });
    let spec = GraphSpec::parse(&document, &JsonPath::root()).unwrap();
    assert!(matches!(
        trellis_verify::verify_builtin(&spec),
        trellis_verify::Verification::Verified(_)
    ));
    spec
}

/// A run of `graph` in a fresh ledger file, and the harness that executes it.
struct Fixture {
    dir: tempfile::TempDir,
    store: Arc<dyn RunStore>,
    harness: Arc<Scripted>,
    started: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Fixture {
    fn new(script: &[(&str, Behaviour)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("ledger.sqlite3")).unwrap();
        let (sender, started) = tokio::sync::mpsc::unbounded_channel();
        let harness = Arc::new(Scripted {
            script: script.iter().map(|(n, b)| ((*n).to_owned(), *b)).collect(),
            calls: Mutex::new(HashMap::new()),
            cancelled: AtomicU64::new(0),
            started: sender,
        });
        Self {
            dir,
            store: Arc::new(store),
            harness,
            started,
        }
    }

    /// Creates and starts a run (resuming `predecessor` when given) and its supervisor context.
    fn context(
        &self,
        graph: &GraphSpec,
        budget: Option<Value>,
        predecessor: Option<&RunId>,
    ) -> RunContext {
        let run_id = RunId::generate();
        let mut run = NewRun::new(
            run_id.clone(),
            run_id.as_str(),
            "control",
            RunKind::Graphspec,
            json!({}),
        );
        let mut reuse = ReuseIndex::default();
        if let Some(previous) = predecessor {
            run = run.with_predecessor(previous.clone());
            reuse = ReuseIndex::from_lineage(&[self.store.snapshot(previous).unwrap()]);
        }
        self.store.create_or_get(run).unwrap();
        self.store
            .append(&run_id, &[RunEvent::RunStarted {}])
            .unwrap();
        let mut plan = json!({"kind": "command", "command": ["true"]});
        if let Some(budget) = budget {
            plan["budget"] = budget;
        }
        let plan = RuntimePlan::uniform(&plan, graph).unwrap();
        let harness: Arc<dyn Harness> = self.harness.clone();
        RunContext {
            store: self.store.clone(),
            run_id,
            graph: trellis_engine::RunnableGraph::verify_builtin(graph.clone())
                .expect("the graph verifies")
                .0,
            input: Value::Null,
            plan,
            harnesses: Harnesses {
                command: harness.clone(),
                agent: None,
                delivery: harness,
            },
            workspace: self.dir.path().to_path_buf(),
            scratch: self.dir.path().join("scratch"),
            secrets: SecretEnv::new(Default::default()),
            base_env: vec![],
            reuse,
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn snapshot(&self, run_id: &RunId) -> RunSnapshot {
        self.store.snapshot(run_id).unwrap()
    }

    fn events(&self, run_id: &RunId) -> Vec<RunEvent> {
        self.store
            .events_after(run_id, Cursor::START, 10_000, EventFilter::All)
            .unwrap()
            .into_iter()
            .map(|stored| stored.event)
            .collect()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn terminal(snapshot: &RunSnapshot) -> TerminalResult {
    snapshot.head.progress.terminal.clone().expect("finished")
}

fn failed(reason: &str) -> TerminalResult {
    TerminalResult::Failed {
        reason: reason.to_owned(),
    }
}

fn succeeded() -> TerminalResult {
    TerminalResult::Succeeded {
        output: Value::Null,
    }
}

/// The states of `node`'s executions, in dispatch order.
fn states_of<'s>(snapshot: &'s RunSnapshot, node: &str) -> Vec<&'s ExecutionState> {
    snapshot
        .executions
        .values()
        .filter(|e| e.node.as_str() == node)
        .map(|e| &e.state)
        .collect()
}

fn settled_by(state: &ExecutionState) -> Option<SettledBy> {
    match state {
        ExecutionState::Completed { settled_by, .. } => *settled_by,
        _ => None,
    }
}

#[test]
fn a_force_stop_cancels_the_running_worker_and_ends_the_run_force_stopped() {
    let mut fixture = Fixture::new(&[("slow", Behaviour::Hang)]);
    let spec = graph(vec![step("first", 1), step("slow", 1), step("never", 1)]);
    let context = fixture.context(&spec, None, None);
    let run_id = context.run_id.clone();
    let wake = context.wake.clone();
    runtime().block_on(async {
        let run = tokio::spawn(Supervisor::new(context).unwrap().run());
        while fixture.started.recv().await.as_deref() != Some("slow") {}
        fixture.store.request_force_stop(&run_id).unwrap();
        wake.notify_one();
        run.await.unwrap().unwrap();
    });
    let snapshot = fixture.snapshot(&run_id);
    assert_eq!(terminal(&snapshot), failed("force_stopped"));
    assert_eq!(fixture.harness.cancelled.load(Ordering::SeqCst), 1);
    let slow = states_of(&snapshot, "slow");
    assert_eq!(slow.len(), 1);
    assert_eq!(settled_by(slow[0]), Some(SettledBy::ForceStop));
    assert_eq!(
        fixture.harness.calls("never"),
        0,
        "nothing starts after a stop"
    );
}

#[test]
fn an_answer_after_timeout_ms_settles_timeout_by_the_supervisors_clock() {
    let fixture = Fixture::new(&[("late", Behaviour::Late(30))]);
    let mut late = step("late", 1);
    late["timeoutMs"] = json!(1);
    let spec = graph(vec![late, step("after", 1)]);
    let context = fixture.context(&spec, None, None);
    let run_id = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .unwrap();
    let snapshot = fixture.snapshot(&run_id);
    let late = states_of(&snapshot, "late");
    let ExecutionState::Completed { outcome, .. } = late[0] else {
        panic!("late did not settle: {late:?}");
    };
    assert_eq!(outcome.error_code(), Some(WorkerErrorCode::Timeout));
    let logged = fixture.events(&run_id).iter().any(|event| {
        matches!(event, RunEvent::Log { message, .. }
                 if message.contains("passed before the outcome arrived"))
    });
    assert!(logged, "the log says why");
}

#[test]
fn spending_over_the_budget_ends_the_run_budget_exhausted() {
    let fixture = Fixture::new(&[("spender", Behaviour::Spend(500))]);
    let spec = graph(vec![step("spender", 1), step("never", 1)]);
    let context = fixture.context(&spec, Some(json!({"inputTokens": 100})), None);
    let run_id = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .unwrap();
    let snapshot = fixture.snapshot(&run_id);
    assert_eq!(terminal(&snapshot), failed("budget_exhausted"));
    assert_eq!(snapshot.head.progress.token_usage.input_tokens, 500);
    let spender = states_of(&snapshot, "spender");
    assert_eq!(settled_by(spender[0]), Some(SettledBy::BudgetExhausted));
    assert_eq!(fixture.harness.calls("never"), 0);
}

#[test]
fn a_join_cancels_and_voids_the_losing_branch_and_the_run_goes_on() {
    let fixture = Fixture::new(&[("slow", Behaviour::Hang)]);
    let race = json!({"kind": "par", "name": "race", "state": nothing(), "join": {"kind": "any"},
                      "branches": [step("fast", 1), step("slow", 1)], "promotedStatePaths": []});
    let spec = graph(vec![race, step("after", 1)]);
    let context = fixture.context(&spec, None, None);
    let run_id = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .unwrap();
    let snapshot = fixture.snapshot(&run_id);
    assert_eq!(terminal(&snapshot), succeeded());
    let slow = states_of(&snapshot, "slow");
    assert!(
        matches!(
            slow[..],
            [ExecutionState::Voided {
                reason: VoidReason::ParallelJoin,
                ..
            }]
        ),
        "{slow:?}"
    );
    assert_eq!(
        fixture.harness.cancelled.load(Ordering::SeqCst),
        1,
        "the loser's worker was told to stop"
    );
    assert_eq!(fixture.harness.calls("after"), 1);
}

#[test]
fn a_panicking_worker_settles_its_execution_crash_and_the_graph_retries_it() {
    let fixture = Fixture::new(&[("flaky", Behaviour::PanicOnce)]);
    let spec = graph(vec![step("flaky", 2), step("after", 1)]);
    let context = fixture.context(&spec, None, None);
    let run_id = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .expect("a panic does not end the run");
    let snapshot = fixture.snapshot(&run_id);
    assert_eq!(terminal(&snapshot), succeeded());
    let flaky = states_of(&snapshot, "flaky");
    assert_eq!(flaky.len(), 2, "crash, then the retry");
    let outcomes: Vec<Option<WorkerErrorCode>> = flaky
        .iter()
        .map(|s| match s {
            ExecutionState::Completed { outcome, .. } => outcome.error_code(),
            other => panic!("not completed: {other:?}"),
        })
        .collect();
    assert_eq!(outcomes, [Some(WorkerErrorCode::Crash), None]);
    let diagnostic = fixture.events(&run_id).into_iter().find_map(|e| match e {
        RunEvent::Log {
            execution: Some(1),
            level: LogLevel::Error,
            message,
            ..
        } => Some(message),
        _ => None,
    });
    let diagnostic = diagnostic.expect("the panic is in the logs");
    assert!(
        diagnostic.contains("panicked") && diagnostic.contains("scripted worker bug in flaky"),
        "{diagnostic}"
    );
    assert_eq!(fixture.harness.calls("after"), 1);
}

#[test]
fn a_panic_on_the_last_attempt_leaves_the_node_failed_and_the_graph_goes_on() {
    let fixture = Fixture::new(&[("flaky", Behaviour::PanicOnce)]);
    let spec = graph(vec![step("flaky", 1), step("after", 1)]);
    let context = fixture.context(&spec, None, None);
    let run_id = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .expect("a panic does not end the supervisor");
    let snapshot = fixture.snapshot(&run_id);
    let flaky = states_of(&snapshot, "flaky");
    assert!(
        matches!(
            flaky[..],
            [ExecutionState::Completed { outcome, settled_by: None, .. }]
                if outcome.error_code() == Some(WorkerErrorCode::Crash)
        ),
        "{flaky:?}"
    );
    // A sequence does not route on its children's errors: the next step runs and the run
    // reaches its terminal, exactly as for a worker that crashed on its own.
    assert_eq!(fixture.harness.calls("after"), 1);
    assert_eq!(terminal(&snapshot), succeeded());
}

#[test]
fn a_resumed_run_reuses_settled_work_and_runs_only_what_never_settled() {
    let mut fixture = Fixture::new(&[("second", Behaviour::Hang)]);
    let spec = graph(vec![step("first", 1), step("second", 1)]);
    let context = fixture.context(&spec, None, None);
    let first_run = context.run_id.clone();
    let wake = context.wake.clone();
    runtime().block_on(async {
        let run = tokio::spawn(Supervisor::new(context).unwrap().run());
        while fixture.started.recv().await.as_deref() != Some("second") {}
        fixture.store.request_force_stop(&first_run).unwrap();
        wake.notify_one();
        run.await.unwrap().unwrap();
    });
    assert_eq!(
        terminal(&fixture.snapshot(&first_run)),
        failed("force_stopped")
    );

    // The successor runs `second` for real this time.
    let mut fixture = Fixture {
        harness: Arc::new(Scripted {
            script: HashMap::new(),
            calls: Mutex::new(HashMap::new()),
            cancelled: AtomicU64::new(0),
            started: tokio::sync::mpsc::unbounded_channel().0,
        }),
        ..fixture
    };
    fixture.started = tokio::sync::mpsc::unbounded_channel().1;
    let context = fixture.context(&spec, None, Some(&first_run));
    let second_run = context.run_id.clone();
    runtime()
        .block_on(Supervisor::new(context).unwrap().run())
        .unwrap();
    let snapshot = fixture.snapshot(&second_run);
    assert_eq!(terminal(&snapshot), succeeded());
    assert_eq!(fixture.harness.calls("first"), 0, "settled work is reused");
    assert_eq!(
        fixture.harness.calls("second"),
        1,
        "unsettled work runs again"
    );
    let reused = states_of(&snapshot, "first");
    assert!(
        matches!(
            reused[..],
            [ExecutionState::Completed {
                reused_from: Some(from),
                ..
            }] if from.run_id == first_run
        ),
        "{reused:?}"
    );
}
