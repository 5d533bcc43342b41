//! Reducer + ledger cost per node execution: the real `Supervisor` drives a map (64 and 1,024
//! items) and a loop (10 and 100 rounds) whose workers settle at once (an in-process harness),
//! on a file-backed ledger at both durabilities; plus ledger bytes per node execution.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, SecretEnv, TokenUsage,
};
use trellis_graph::{GraphSpec, JsonPath, WorkerOutcome};
use trellis_ledger::{
    Durability, NewRun, RunEvent, RunId, RunKind, RunStore, SqliteOptions, SqliteStore,
    TerminalResult,
};
use trellis_runtime::testing::{Harnesses, ReuseIndex, RunContext, RuntimePlan, Supervisor};
use trellis_verify::{Verification, verify_builtin};

/// The allocator of the `trellis` binary, whose controller process runs the supervisor.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A harness whose every execution succeeds at once with a `null` output.
struct InstantHarness;

impl Harness for InstantHarness {
    fn name(&self) -> &str {
        "instant"
    }

    fn execute<'a>(
        &'a self,
        _request: ExecutionRequest,
        _events: EventSink,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(async {
            ExecutionResult {
                outcome: WorkerOutcome::Verified {
                    output: Value::Null,
                    artifacts: vec![],
                },
                usage: TokenUsage::default(),
                killed_from_outside: None,
                worker_lost: false,
            }
        })
    }
}

fn null_type() -> Value {
    json!({"kind": "null"})
}

fn noop_step(name: &str) -> Value {
    json!({
        "kind": "step", "name": name, "worker": format!("command.{name}@1"),
        "input": null_type(), "output": null_type(), "inputBindings": [], "writeBindings": [],
        "timeoutMs": 60_000, "attempts": 1,
    })
}

fn document(initial_input: Value, first: Value) -> GraphSpec {
    let root = json!({
        "kind": "seq", "name": "root", "state": initial_input, "promotedStatePaths": [],
        "children": [first, {"kind": "succeed", "name": "done", "output": null_type(), "bindings": []}],
    });
    let value = json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": initial_input,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": root,
    });
    let spec = GraphSpec::parse(&value, &JsonPath::root()).expect("graph parses");
    assert!(
        matches!(verify_builtin(&spec), Verification::Verified(_)),
        "benchmark graph verifies"
    );
    spec
}

/// Builds a benchmark graph of a given size, with its input.
type GraphBuilder = fn(u64) -> (GraphSpec, Value);

/// A map of `items` no-op steps, all dispatched at once.
fn map_graph(items: u64) -> (GraphSpec, Value) {
    let item = json!({"kind": "record", "fields": {"value": {"type": {"kind": "integer"}, "required": true}}});
    let state = json!({"kind": "record", "fields": {"items": {"type": {"kind": "array", "items": item}, "required": true}}});
    let map = json!({
        "kind": "map", "name": "fan", "state": state, "body": noop_step("item"),
        "over": {"source": "state", "path": ["items"]}, "maxItems": items, "promotedStatePaths": [],
    });
    let input = json!({"items": (0..items).map(|v| json!({"value": v})).collect::<Vec<_>>()});
    (document(state, map), input)
}

/// A loop of `rounds` rounds of one no-op step, one after another.
fn loop_graph(rounds: u64) -> (GraphSpec, Value) {
    let repeat = json!({
        "kind": "loop", "name": "rounds", "state": null_type(), "body": noop_step("round"),
        "maxIterations": rounds, "promotedStatePaths": [],
    });
    (document(null_type(), repeat), Value::Null)
}

/// A fresh ledger file in `dir` holding one started run, and the context to drive it.
fn prepare(dir: &Path, graph: &GraphSpec, input: &Value, durability: Durability) -> RunContext {
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(dir.join("ledger.sqlite3"), options).expect("open");
    let run_id = RunId::generate();
    let run = NewRun::new(
        run_id.clone(),
        run_id.as_str(),
        "bench",
        RunKind::Graphspec,
        json!({}),
    );
    store.create_or_get(run).expect("create run");
    store
        .append(&run_id, &[RunEvent::RunStarted {}])
        .expect("start run");
    let plan = RuntimePlan::uniform(&json!({"kind": "command", "command": ["true"]}), graph)
        .expect("plan");
    let instant: Arc<dyn Harness> = Arc::new(InstantHarness);
    RunContext {
        store: Arc::new(store),
        run_id,
        graph: trellis_engine::RunnableGraph::verify_builtin(graph.clone())
            .expect("the graph verifies")
            .0,
        input: input.clone(),
        plan,
        harnesses: Harnesses {
            command: instant.clone(),
            agent: None,
            delivery: instant,
        },
        workspace: dir.to_path_buf(),
        scratch: dir.join("scratch"),
        secrets: SecretEnv::new(Default::default()),
        base_env: vec![],
        reuse: ReuseIndex::default(),
        wake: Arc::new(tokio::sync::Notify::new()),
    }
}

/// Drives a prepared run to its end, checks it succeeded, and returns how many events it has.
/// The store is handed back open: closing it checkpoints the write-ahead log, a once-per-run
/// cost that the callers keep out of the per-execution figures.
/// Runs the supervisor to the run's end: the part every figure times.
fn drive(runtime: &tokio::runtime::Runtime, context: RunContext) -> (RunId, Arc<dyn RunStore>) {
    let store = context.store.clone();
    let run_id = context.run_id.clone();
    runtime
        .block_on(Supervisor::new(context).expect("supervisor").run())
        .expect("run");
    (run_id, store)
}

/// Checks, after the clock stopped, that the run succeeded; returns its number of events.
fn succeeded(run_id: &RunId, store: &dyn RunStore) -> u64 {
    let head = store.head(run_id).expect("head");
    assert!(matches!(
        head.progress.terminal,
        Some(TerminalResult::Succeeded { .. })
    ));
    head.cursor.sequence()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Full => "full",
        Durability::Normal => "normal",
    }
}

fn bench_shape(c: &mut Criterion, group_name: &str, sizes: &[u64], build: GraphBuilder) {
    let runtime = runtime();
    let mut group = c.benchmark_group(group_name);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    for durability in [Durability::Full, Durability::Normal] {
        for &size in sizes {
            let (graph, input) = build(size);
            group.throughput(Throughput::Elements(size));
            let id = BenchmarkId::new(durability_name(durability), size);
            group.bench_function(id, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let dir = tempfile::tempdir().expect("temp dir");
                        let context = prepare(dir.path(), &graph, &input, durability);
                        let started = Instant::now();
                        let (run_id, store) = drive(&runtime, context);
                        total += started.elapsed();
                        succeeded(&run_id, store.as_ref());
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

fn map_items(c: &mut Criterion) {
    bench_shape(c, "supervisor_map_items", &[64, 1024], map_graph);
}

fn loop_rounds(c: &mut Criterion) {
    bench_shape(c, "supervisor_loop_rounds", &[10, 100], loop_graph);
}

/// Ledger bytes per node execution after a whole run (database + WAL, checkpointed).
fn ledger_bytes(_c: &mut Criterion) {
    // A probe run (`SUPERVISOR_PROBE`, below) profiles one shape at NORMAL durability only.
    if std::env::var_os("SUPERVISOR_PROBE").is_some() {
        return;
    }
    let runtime = runtime();
    for (label, (graph, input), executions) in [
        ("map of 1024", map_graph(1024), 1024),
        ("loop of 100", loop_graph(100), 100),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let context = prepare(dir.path(), &graph, &input, Durability::Full);
        let (run_id, store) = drive(&runtime, context);
        let events = succeeded(&run_id, store.as_ref());
        drop(store);
        let path = dir.path().join("ledger.sqlite3");
        // Opening and closing the only connection checkpoints the WAL into the database.
        drop(SqliteStore::open(&path).expect("reopen"));
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "ledger bytes, {label}: {bytes} bytes for {executions} executions ({events} events) \
             = {} bytes per execution",
            bytes / executions
        );
    }
}

/// This process's user + system CPU time so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// CPU time and the fastest wall time per node execution at NORMAL durability, over
/// `RUNS` runs of each shape: on a shared machine the CPU time is insensitive to other
/// processes and the fastest run is the least disturbed, so growth with the size of a run
/// shows plainly.
fn cpu_per_execution(_c: &mut Criterion) {
    const RUNS: u32 = 20;
    let runtime = runtime();
    let shapes: [(&str, GraphBuilder, u64); 4] = [
        ("map", map_graph, 64),
        ("map", map_graph, 1024),
        ("loop", loop_graph, 10),
        ("loop", loop_graph, 100),
    ];
    // Criterion's filter does not reach this probe; `SUPERVISOR_PROBE=loop` (or `map`) keeps
    // one shape, e.g. to count its system calls.
    let only = std::env::var("SUPERVISOR_PROBE").ok();
    // The smaller size of each shape, kept to split a run's one-off cost from the per-execution
    // cost: the extra CPU of the larger run over its extra executions.
    let mut smaller: Option<(&str, u64, Duration)> = None;
    for (shape, build, size) in shapes {
        if only.as_deref().is_some_and(|only| only != shape) {
            continue;
        }
        let (graph, input) = build(size);
        let mut spent = Duration::ZERO;
        let mut fastest = Duration::MAX;
        for _ in 0..RUNS {
            let dir = tempfile::tempdir().expect("temp dir");
            let context = prepare(dir.path(), &graph, &input, Durability::Normal);
            let before = cpu_time();
            let started = Instant::now();
            let (run_id, store) = drive(&runtime, context);
            fastest = fastest.min(started.elapsed());
            spent += cpu_time() - before;
            succeeded(&run_id, store.as_ref());
        }
        let executions = u32::try_from(size).expect("size");
        let per_run = spent / RUNS;
        eprintln!(
            "{shape} of {size}, per execution: cpu {:?}, fastest wall {:?}",
            per_run / executions,
            fastest / executions
        );
        if let Some((previous, fewer, their_run)) = smaller
            && previous == shape
            && let Some(extra) = per_run.checked_sub(their_run)
        {
            let marginal = extra / u32::try_from(size - fewer).expect("size");
            let one_off = their_run.saturating_sub(marginal * u32::try_from(fewer).expect("size"));
            eprintln!(
                "{shape}, {fewer} -> {size}: cpu per extra execution {marginal:?}, \
                 one-off cpu per run {one_off:?}"
            );
        }
        smaller = Some((shape, size, per_run));
    }
}

criterion_group!(
    benches,
    map_items,
    loop_rounds,
    ledger_bytes,
    cpu_per_execution
);
criterion_main!(benches);
