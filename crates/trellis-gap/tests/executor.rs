//! Executor behaviour: chains, parallel failure, visit cap, loops, scripts, routing, streaming, recovery.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use trellis_gap::{
    CollectingObserver, ExecuteOptions, ExecutionResult, RunEvent, ToolError, ToolRegistry, execute,
};

fn run(
    doc: &Value,
    registry: ToolRegistry,
    tweak: impl FnOnce(&mut ExecuteOptions),
) -> (ExecutionResult, Vec<RunEvent>, Scratch) {
    let scratch = Scratch::new(doc);
    let mut options = ExecuteOptions {
        tool_registry: Arc::new(registry),
        cancel_grace: Duration::from_millis(300),
        ..ExecuteOptions::default()
    };
    tweak(&mut options);
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options, &observer);
    (result, observer.events(), scratch)
}

fn finished(events: &[RunEvent], id: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, RunEvent::NodeFinished { node_id, .. } if node_id == id))
        .count()
}

#[test]
fn linear_tool_chain_passes_refs_and_writes_a_trace() {
    let doc = json!({"version": 3, "nodes": {
        "first": {"type": "tool", "tool": "stub.const", "inputs": {"value": 21}},
        "second": {"type": "tool", "tool": "stub.double", "inputs": {"x": {"$ref": "first.value"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "first"], ["first", "second"], ["second", "done"]]});
    let doubled = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::with_builtin_stubs();
    let seen = Arc::clone(&doubled);
    registry.register_fn("stub.double", move |_, args| {
        seen.lock().unwrap().push(args["x"].clone());
        Ok(json!({"value": args["x"].as_i64().unwrap() * 2}))
    });
    let trace = tempfile::tempdir().unwrap();
    let trace_dir = trace.path().join("run");
    let (result, _, _) = run(&doc, registry, |o| o.trace_dir = Some(trace_dir.clone()));
    assert!(result.is_success(), "{result:?}");
    assert_eq!(*doubled.lock().unwrap(), vec![json!(21)]);
    let dag: Value =
        serde_json::from_str(&std::fs::read_to_string(trace_dir.join("dag_trace.json")).unwrap())
            .unwrap();
    let second = dag["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "second")
        .unwrap();
    assert_eq!(second["status"], "ok");
    assert_eq!(second["visits"], 1);
    let output: Value = serde_json::from_str(
        &std::fs::read_to_string(trace_dir.join("node_data/second/output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(output, json!({"value": 42}));
    assert!(
        trace_dir
            .join("node_data/second/iters/000/resolved_inputs.json")
            .is_file()
    );
    assert!(
        trace_dir.join("workflow.json").is_file(),
        "workflow copied beside the trace"
    );
}

fn parallel_doc() -> Value {
    let mut nodes = serde_json::Map::new();
    let mut edges = vec![];
    nodes.insert(
        "boom".into(),
        json!({"type": "tool", "tool": "stub.fail", "inputs": {"message": "kaput"}}),
    );
    edges.push(json!(["START", "boom"]));
    edges.push(json!(["boom", "done"]));
    for i in 0..5 {
        let name = format!("s{i}");
        nodes.insert(name.clone(), json!({"type": "tool", "tool": "stub.sleepy"}));
        edges.push(json!(["START", name]));
        edges.push(json!([name, "done"]));
    }
    nodes.insert("done".into(), json!({"type": "end", "status": "success"}));
    json!({"version": 3, "nodes": nodes, "edges": edges})
}

#[test]
fn parallel_failure_cancels_unstarted_siblings_and_names_the_node() {
    let started = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::with_builtin_stubs();
    let count = Arc::clone(&started);
    registry.register_fn("stub.sleepy", move |ctx, _| {
        count.fetch_add(1, Ordering::SeqCst);
        ctx.wait_cancelled(Duration::from_millis(300));
        Ok(json!({}))
    });
    let (result, events, _) = run(&parallel_doc(), registry, |o| o.max_workers = 2);
    let error = result.error.unwrap();
    assert_eq!(error, "Node 'boom' failed: RuntimeError: kaput");
    assert!(
        started.load(Ordering::SeqCst) < 5,
        "some siblings must not start"
    );
    let cancelled = events
        .iter()
        .filter(|e| matches!(e, RunEvent::NodeCancelled { .. }))
        .count();
    assert_eq!(cancelled + started.load(Ordering::SeqCst), 5);
}

#[test]
fn visit_cap_stops_long_scopes() {
    let doc = json!({"version": 3, "nodes": {
        "n0": {"type": "tool", "tool": "stub.noop"}, "n1": {"type": "tool", "tool": "stub.noop"},
        "n2": {"type": "tool", "tool": "stub.noop"}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "n0"], ["n0", "n1"], ["n1", "n2"], ["n2", "done"]]});
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |o| {
        o.node_visit_cap = 2
    });
    assert!(result.error.unwrap().contains("super-step cap"));
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |o| {
        o.node_visit_cap = 10
    });
    assert!(result.is_success());
}

fn loop_doc(script: &str) -> Value {
    json!({"version": 3, "nodes": {
        "step": {"type": "tool", "tool": "stub.counter"},
        "decide": {"type": "router", "script": script, "inputs": {"n": {"$ref": "step.n"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "step"], ["step", "decide"]],
        "conditional_edges": {"decide": {"router_field": null, "mapping": {"loop": "step", "done": "done"}}}})
}

#[test]
fn conditional_back_edge_loops_three_rounds_in_one_scope() {
    let (result, events, _) = run(
        &loop_doc("scripts/decide.py"),
        ToolRegistry::with_builtin_stubs(),
        |_| {},
    );
    assert!(result.is_success(), "{result:?}");
    assert_eq!(finished(&events, "step"), 3);
    assert_eq!(finished(&events, "decide"), 3);
}

#[test]
fn endless_loop_hits_the_cap() {
    let mut doc = loop_doc("scripts/decide.py");
    doc["nodes"]["decide"]["inputs"]["n"] = json!(0);
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |o| {
        o.node_visit_cap = 5
    });
    assert!(result.error.unwrap().contains("super-step cap"));
}

#[test]
fn script_inputs_are_filtered_by_the_run_signature() {
    let doc = json!({"version": 3, "nodes": {
        "compute": {"type": "script", "script": "scripts/compute.py", "inputs": {"x": 5, "unused": 1}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "compute"], ["compute", "done"]]});
    let trace = tempfile::tempdir().unwrap();
    let (result, events, _) = run(&doc, ToolRegistry::new(), |o| {
        o.trace_dir = Some(trace.path().to_path_buf())
    });
    assert!(result.is_success(), "{result:?}");
    let output =
        std::fs::read_to_string(trace.path().join("node_data/compute/output.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&output).unwrap(),
        json!({"y": 15})
    );
    let logs: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Log {
                node_id: Some(id),
                stream,
                line,
            } if id == "compute" => Some((stream.clone(), line.clone())),
            _ => None,
        })
        .collect();
    assert!(
        logs.contains(&("stdout".to_string(), "computing 5".to_string())),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|(s, l)| s == "warning" && l.contains("['unused']")),
        "{logs:?}"
    );
}

#[test]
fn ctx_tool_calls_cross_the_bridge_and_are_recorded() {
    let doc = json!({"version": 3, "nodes": {
        "calc": {"type": "script", "script": "scripts/calls_tool.py", "inputs": {"x": 4}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "calc"], ["calc", "done"]]});
    let trace = tempfile::tempdir().unwrap();
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |o| {
        o.trace_dir = Some(trace.path().to_path_buf())
    });
    assert!(result.is_success(), "{result:?}");
    let out: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("node_data/calc/output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(out, json!({"doubled": 8}));
    let response = std::fs::read_to_string(
        trace
            .path()
            .join("node_data/calc/calls/000_double/response.json"),
    )
    .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&response).unwrap(),
        json!({"value": 8})
    );
}

fn flag_doc(value: Value) -> Value {
    json!({"version": 3, "nodes": {
        "check": {"type": "script", "script": "scripts/route_value.py", "inputs": {"value": value}},
        "yes": {"type": "end", "status": "success"},
        "no": {"type": "end", "status": "failure"},
        "none": {"type": "end", "status": "failure"}},
        "edges": [["START", "check"]],
        "conditional_edges": {"check": {"router_field": "flag", "mapping": {"True": "yes", "False": "no", "None": "none", "1.0": "yes"}}}})
}

#[test]
fn non_string_route_values_use_python_str() {
    for (value, end) in [
        (json!(true), "yes"),
        (json!(false), "no"),
        (json!(null), "none"),
        (json!(1.0), "yes"),
    ] {
        let (result, _, _) = run(&flag_doc(value.clone()), ToolRegistry::new(), |_| {});
        assert_eq!(
            result.end_node.as_deref(),
            Some(end),
            "value {value}: {result:?}"
        );
    }
    let (result, _, _) = run(&flag_doc(json!(3)), ToolRegistry::new(), |_| {});
    assert_eq!(
        result.error.unwrap(),
        "conditional_edges from 'check': value '3' not in mapping ['True', 'False', 'None', '1.0']"
    );
}

#[test]
fn router_with_non_string_route_fails_clearly() {
    let mut doc = loop_doc("scripts/route_value.py");
    doc["nodes"]["decide"]["inputs"] = json!({"value": 1});
    // route_value.py returns {"flag": 1}: no "route" key at all.
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |_| {});
    assert!(
        result
            .error
            .unwrap()
            .contains("router 'decide' must return a dict with a 'route' key")
    );
}

fn streaming_doc(producer: Value) -> Value {
    json!({"version": 3, "nodes": {
        "sg": {"type": "subgraph", "ref": "s"}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "sg"]],
        "conditional_edges": {"sg": {"router_field": "exit", "mapping": {"ok": "done"}}},
        "subgraphs": {"s": {"skill": "x", "outputs": {"tick": {"$ref": "use.tick"}},
            "nodes": {"producer": producer,
                      "use": {"type": "tool", "tool": "stub.echo", "inputs": {"tick": {"$ref": "producer.tick"}}},
                      "ok": {"type": "noop"}},
            "edges": [["START", "producer"], ["START", "use"], ["use", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}}}})
}

#[test]
fn streaming_producer_is_cancelled_at_scope_exit() {
    let doc = streaming_doc(
        json!({"type": "tool", "tool": "stub.ticker", "streaming": true, "inputs": {"interval_ms": 1}}),
    );
    let (result, events, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |_| {});
    assert!(result.is_success(), "{result:?}");
    assert!(result.outputs["s"]["tick"].as_u64().is_some());
    assert_eq!(
        finished(&events, "s.producer"),
        1,
        "ticker returned after cancellation"
    );
    let finished_at = events
        .iter()
        .position(
            |e| matches!(e, RunEvent::NodeFinished { node_id, .. } if node_id == "s.producer"),
        )
        .unwrap();
    let exited_at = events
        .iter()
        .position(|e| matches!(e, RunEvent::SubgraphExited { .. }))
        .unwrap();
    assert!(
        finished_at < exited_at,
        "the producer stopped before the subgraph exited"
    );
}

#[test]
fn streaming_script_ignoring_cancellation_is_abandoned_after_the_grace_period() {
    let doc =
        streaming_doc(json!({"type": "script", "script": "scripts/forever.py", "streaming": true}));
    let mut doc = doc;
    doc["subgraphs"]["s"]["nodes"]["use"]["inputs"] = json!({"tick": 1});
    let (result, events, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |o| {
        o.cancel_grace = Duration::from_millis(100)
    });
    assert!(result.is_success(), "{result:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::NodeCancelled { node_id } if node_id == "s.producer")),
        "{events:#?}"
    );
}

#[test]
fn failing_recovery_calls_do_not_stop_later_ones() {
    let doc = json!({"version": 3, "nodes": {
        "a": {"type": "tool", "tool": "stub.noop"},
        "done": {"type": "end", "status": "success", "recovery": [
            {"tool": "stub.fail", "inputs": {"message": "first"}},
            {"tool": "no.such.tool"},
            {"tool": "stub.echo", "inputs": {"k": 1}}]}},
        "edges": [["START", "a"], ["a", "done"]]});
    let (result, events, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |_| {});
    assert!(
        result.is_success(),
        "recovery failures are logged, not fatal: {result:?}"
    );
    let calls: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::RecoveryCall { tool, error, .. } => Some((tool.clone(), error.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("stub.fail".into(), true),
            ("no.such.tool".into(), true),
            ("stub.echo".into(), false)
        ]
    );
}

#[test]
fn guard_limits_trip_and_bypass_on_error() {
    let doc = json!({"version": 3, "nodes": {
        "sg": {"type": "subgraph", "ref": "s"}, "done": {"type": "end", "status": "success"},
        "failed": {"type": "end", "status": "failure"}},
        "edges": [["START", "sg"]],
        "conditional_edges": {"sg": {"router_field": "exit", "mapping": {"ok": "done", "err": "failed"}}},
        "subgraphs": {"s": {"nodes": {"p1": {"type": "tool", "tool": "see"}, "p2": {"type": "tool", "tool": "see"}, "ok": {"type": "noop"}},
            "edges": [["START", "p1"], ["p1", "p2"], ["p2", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}, "on_error": "err"}}});
    let mut registry = ToolRegistry::new();
    registry
        .register(
            trellis_gap::ToolDescriptor::new("see").with_tags(&["perception"]),
            Arc::new(|_: &trellis_gap::NodeContext<'_>, _| Ok::<_, ToolError>(json!({}))),
        )
        .unwrap();
    let (result, _, _) = run(&doc, registry.clone(), |o| {
        o.guard_limits.perception = Some(1)
    });
    let error = result.error.unwrap();
    assert!(
        error.starts_with("GuardLimitExceeded: perception call limit exceeded (2/1)"),
        "{error}"
    );
    assert_eq!(
        result.end_node, None,
        "guard trips are not routed through on_error"
    );
    let (result, _, _) = run(&doc, registry, |o| o.guard_limits.perception = Some(2));
    assert!(result.is_success());
}

#[test]
fn call_site_inputs_bind_subgraph_inputs() {
    let doc = json!({"version": 3, "nodes": {
        "src": {"type": "tool", "tool": "stub.const", "inputs": {"value": 5}},
        "sg": {"type": "subgraph", "ref": "s", "inputs": {"arm": {"$ref": "src.value"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "src"], ["src", "sg"]],
        "conditional_edges": {"sg": {"router_field": "exit", "mapping": {"ok": "done"}}},
        "subgraphs": {"s": {"inputs": {"arm": "int"}, "outputs": {"got": {"$ref": "echo.arm"}},
            "nodes": {"echo": {"type": "tool", "tool": "stub.echo", "inputs": {"arm": {"$ref": "in.arm"}}}, "ok": {"type": "noop"}},
            "edges": [["START", "echo"], ["echo", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}}}});
    let (result, _, _) = run(&doc, ToolRegistry::with_builtin_stubs(), |_| {});
    assert!(result.is_success(), "{result:?}");
    assert_eq!(result.outputs["s"]["got"], json!(5));
}
