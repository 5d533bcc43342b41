//! Criterion benchmarks: scheduler overhead per node, Python script round trip, chain scaling.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use trellis_gap::{ExecuteOptions, NullObserver, ToolRegistry, Workflow, execute, parse_workflow};

/// A chain START -> n0 -> … -> n{len-1} -> done of nodes built by `node`.
fn chain(len: usize, node: impl Fn(usize) -> Value) -> Value {
    let mut nodes = Map::new();
    let mut edges = vec![json!(["START", "n0"])];
    for i in 0..len {
        nodes.insert(format!("n{i}"), node(i));
        let next = if i + 1 == len {
            "done".to_string()
        } else {
            format!("n{}", i + 1)
        };
        edges.push(json!([format!("n{i}"), next]));
    }
    nodes.insert("done".into(), json!({"type": "end", "status": "success"}));
    json!({"version": 3, "nodes": nodes, "edges": edges})
}

fn tool_chain(len: usize) -> Workflow {
    let doc = chain(len, |_| json!({"type": "tool", "tool": "stub.noop"}));
    parse_workflow(&doc, PathBuf::from(".")).expect("bench chain loads")
}

fn options() -> ExecuteOptions {
    ExecuteOptions {
        tool_registry: Arc::new(ToolRegistry::with_builtin_stubs()),
        ..ExecuteOptions::default()
    }
}

fn run(workflow: &Workflow, options: &ExecuteOptions) {
    let result = execute(workflow, options.clone(), &NullObserver);
    assert!(result.is_success(), "{result:?}");
}

fn scheduler_overhead(c: &mut Criterion) {
    let workflow = tool_chain(100);
    let opts = options();
    let mut group = c.benchmark_group("scheduler");
    group.throughput(Throughput::Elements(100));
    group.bench_function("builtin_tool_chain_100", |b| {
        b.iter(|| run(&workflow, &opts))
    });
    group.finish();
}

fn chain_scaling(c: &mut Criterion) {
    let opts = options();
    let mut group = c.benchmark_group("chain_scaling");
    group.sample_size(20);
    for len in [250usize, 500, 1000] {
        let workflow = tool_chain(len);
        group.throughput(Throughput::Elements(len as u64));
        group.bench_with_input(BenchmarkId::from_parameter(len), &workflow, |b, wf| {
            b.iter(|| run(wf, &opts))
        });
    }
    group.finish();
}

fn python_round_trip(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("trivial.py"),
        "def run(ctx):\n    return {'ok': True}\n",
    )
    .expect("write script");
    let script_chain = |len: usize| {
        let doc = chain(len, |_| json!({"type": "script", "script": "trivial.py"}));
        parse_workflow(&doc, dir.path().to_path_buf()).expect("script chain loads")
    };
    let opts = options();
    let mut group = c.benchmark_group("python_bridge");
    group.sample_size(10);
    for len in [1usize, 101] {
        let workflow = script_chain(len);
        group.bench_with_input(BenchmarkId::new("script_chain", len), &workflow, |b, wf| {
            b.iter(|| run(wf, &opts))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    scheduler_overhead,
    chain_scaling,
    python_round_trip
);
criterion_main!(benches);
