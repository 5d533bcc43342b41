//! Reducer cost per node execution for whole runs driven change by change: maps of 64 and
//! 1,024 items and loops of 10 and 100 rounds with the incremental reducer, plus the full
//! replay after every change on the small map for comparison.

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use trellis_engine::{
    ExecutionId, ExecutionRecord, ExecutionState, History, Reducer, RunnableGraph, reduce,
};
use trellis_graph::{GraphSpec, JsonPath, WorkerOutcome};
use trellis_run_model::Cursor;

/// The benchmark graphs verify (checked once, outside the timed code).
fn runnable(graph: GraphSpec) -> RunnableGraph {
    RunnableGraph::verify_builtin(graph)
        .expect("bench graph verifies")
        .0
}

fn spec(initial_input: Value, root: Value) -> GraphSpec {
    let doc = json!({"profile": "openengine.graph.full/v1",
                     "initialInput": initial_input,
                     "policy": {"policy": "policy.bench@1", "default": "deny"}, "root": root});
    GraphSpec::parse(&doc, &JsonPath::root()).expect("bench graph parses")
}

/// A record type; each field is `(name, type, required)`.
fn record(fields: &[(&str, Value, bool)]) -> Value {
    let fields: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, ty, required)| {
            (
                (*name).to_owned(),
                json!({"type": ty, "required": required}),
            )
        })
        .collect();
    json!({"kind": "record", "fields": fields})
}

/// map(items)[ seq[ work(item.id) → results[i], choice(work error → fail, else record) ] ]
/// → succeed(results)
fn map_graph() -> GraphSpec {
    let integer = json!({"kind": "integer"});
    let results = json!({"kind": "array", "items": integer});
    let item = record(&[("id", integer.clone(), true)]);
    let state = record(&[
        ("items", json!({"kind": "array", "items": item}), true),
        ("results", results.clone(), false),
    ]);
    let work = json!({"kind": "step", "name": "work", "worker": "command.work@1",
        "input": record(&[("id", integer.clone(), true)]),
        "output": record(&[("size", integer.clone(), true)]),
        "inputBindings": [{"target": ["id"], "value": {"source": "item", "path": ["id"]}}],
        "writeBindings": [{"target": ["results"], "value": {"node": "work", "channel": "out", "path": ["size"]}}],
        "attempts": 1});
    let guard = json!({"kind": "in", "value": {"name": "work", "source": "error", "field": null},
                       "labels": ["crash", "malformed", "refusal", "timeout"]});
    let body = json!({"kind": "seq", "name": "item", "state": state, "promotedStatePaths": [["results"]],
        "children": [work, {"kind": "choice", "name": "route", "state": state, "promotedStatePaths": [],
            "branches": [{"when": guard, "node": {"kind": "fail", "name": "item_failed", "reason": "item_failed"}}],
            // The verifier wants every outcome covered: a success records the item.
            "otherwise": {"kind": "step", "name": "record", "worker": "command.record@1",
                          "input": {"kind": "null"}, "output": {"kind": "null"},
                          "inputBindings": [], "writeBindings": [], "attempts": 1}}]});
    spec(
        state.clone(),
        json!({"kind": "seq", "name": "run", "state": state, "promotedStatePaths": [],
        "children": [
            {"kind": "map", "name": "each", "state": state, "body": body, "maxItems": 1024,
             "over": {"source": "state", "path": ["items"]}, "promotedStatePaths": [["results"]]},
            {"kind": "succeed", "name": "done", "output": record(&[("results", results, false)]),
             "bindings": [{"target": ["results"], "value": {"source": "state", "path": ["results"]}}]}]}),
    )
}

/// loop(rounds, until accepted)[ seq[ worker(feedback), check → feedback ] ], never accepted.
fn loop_graph(rounds: u64) -> GraphSpec {
    let string = json!({"kind": "string"});
    let state = record(&[("feedback", string.clone(), true)]);
    let worker = json!({"kind": "step", "name": "worker", "worker": "command.worker@1",
        "input": record(&[("feedback", string.clone(), true)]), "output": {"kind": "null"},
        "inputBindings": [{"target": ["feedback"], "value": {"source": "state", "path": ["feedback"]}}],
        "writeBindings": [], "attempts": 1});
    let check = json!({"kind": "verifier", "name": "check", "worker": "command.check@1",
        "input": {"kind": "null"}, "output": {"kind": "null"}, "inputBindings": [],
        "writeBindings": [{"target": ["feedback"], "value": {"node": "check", "channel": "diagnostic", "path": ["message"]}}],
        "attempts": 2, "signals": {"verdict": ["accepted", "rejected"]},
        "diagnostic": record(&[("message", string, true)])});
    let until = json!({"kind": "in", "value": {"name": "check", "source": "signal", "field": "verdict"},
                       "labels": ["accepted"]});
    spec(
        state.clone(),
        json!({"kind": "seq", "name": "run", "state": state, "promotedStatePaths": [],
        "children": [
            {"kind": "loop", "name": "rounds", "state": state, "maxIterations": rounds, "until": until,
             "promotedStatePaths": [["feedback"]],
             "body": {"kind": "seq", "name": "round", "state": state,
                      "promotedStatePaths": [["feedback"]], "children": [worker, check]}},
            {"kind": "succeed", "name": "done", "output": {"kind": "null"}, "bindings": []}]}),
    )
}

fn outcome(node: &str, round: usize) -> WorkerOutcome {
    let text = match node {
        "work" => json!({"status": "verified", "output": {"size": round}, "artifacts": []}),
        "check" => json!({"status": "verifier", "output": null, "signals": {"verdict": "rejected"},
                          "diagnostic": {"message": format!("fix {round}")}, "artifacts": []}),
        _ => json!({"status": "verified", "output": null, "artifacts": []}),
    };
    WorkerOutcome::parse(&text, &JsonPath::root()).expect("bench outcome")
}

/// Drives a run to its terminal the way the runtime does: record each dispatch batch, then
/// settle the oldest running execution and decide again after every settlement. Returns the
/// number of executions. With `full_replay` the whole history is also reduced after every
/// decision (the quadratic way) and checked against the incremental result.
fn drive(graph: &RunnableGraph, input: &Value, full_replay: bool) -> usize {
    let mut reducer = Reducer::new(graph, input);
    let mut history = History::default();
    let mut index: HashMap<ExecutionId, usize> = HashMap::new();
    let mut running: VecDeque<ExecutionId> = VecDeque::new();
    let mut position = 0;
    let mut settled = 0;
    loop {
        let reduction = reducer.decide().expect("decides");
        if full_replay {
            assert_eq!(reduce(graph, input, &history).expect("replays"), reduction);
        }
        if reduction.terminal.is_some() {
            return settled;
        }
        if !reduction.dispatches.is_empty() {
            for dispatch in reduction.dispatches {
                position += 1;
                let record = ExecutionRecord {
                    execution: dispatch.execution,
                    node_instance: dispatch.node_instance,
                    occurrence: dispatch.occurrence,
                    attempt: dispatch.attempt,
                    input: dispatch.input,
                    dispatched_at: position,
                    state: ExecutionState::Active {},
                };
                reducer.apply(&record).expect("dispatch applies");
                index.insert(record.execution, history.executions.len());
                running.push_back(record.execution);
                history.executions.push(record);
            }
            continue;
        }
        let execution = running.pop_front().expect("something runs");
        position += 1;
        settled += 1;
        let record = &mut history.executions[index[&execution]];
        record.state = ExecutionState::completed(
            Cursor::at(position).expect("position"),
            0,
            outcome(record.occurrence.node.as_str(), settled),
        );
        reducer.apply(record).expect("settlement applies");
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("incremental");
    group.sample_size(20);
    let map = runnable(map_graph());
    for items in [64usize, 1024] {
        let input = json!({"items": (0..items).map(|i| json!({"id": i})).collect::<Vec<_>>()});
        group.throughput(Throughput::Elements(items as u64));
        group.bench_with_input(BenchmarkId::new("map_items", items), &input, |b, input| {
            b.iter(|| black_box(drive(&map, input, false)))
        });
    }
    for rounds in [10u64, 100] {
        let graph = runnable(loop_graph(rounds));
        group.throughput(Throughput::Elements(2 * rounds));
        group.bench_with_input(
            BenchmarkId::new("loop_rounds", rounds),
            &graph,
            |b, graph| b.iter(|| black_box(drive(graph, &json!({"feedback": ""}), false))),
        );
    }
    group.finish();

    let mut reference = c.benchmark_group("full_replay_after_every_change");
    reference.sample_size(10);
    let input = json!({"items": (0..64).map(|i| json!({"id": i})).collect::<Vec<_>>()});
    reference.throughput(Throughput::Elements(64));
    reference.bench_function("map_items/64", |b| {
        b.iter(|| black_box(drive(&map, &input, true)))
    });
    let graph = runnable(loop_graph(10));
    reference.throughput(Throughput::Elements(20));
    reference.bench_function("loop_rounds/10", |b| {
        b.iter(|| black_box(drive(&graph, &json!({"feedback": ""}), true)))
    });
    reference.finish();
}

criterion_group!(reducer_benches, benches);
criterion_main!(reducer_benches);
