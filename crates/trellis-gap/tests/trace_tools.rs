//! Revisit-aware traces (`visits`, per-visit files, one close per visit) and `trace diff`'s
//! first divergence: node, visit and the first differing status, input or output.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use trellis_gap::{ExecuteOptions, NullObserver, ToolRegistry, diff_traces, execute};

/// `step` (a counter) loops through `decide` until it reports 3 or more.
fn loop_workflow() -> Value {
    json!({"version": 3, "nodes": {
        "step": {"type": "tool", "tool": "count", "inputs": {"label": {"$ref": "in.label"}}},
        "decide": {"type": "router", "script": "scripts/decide.py", "inputs": {"n": {"$ref": "step.n"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "step"], ["step", "decide"]],
        "conditional_edges": {"decide": {"router_field": null, "mapping": {"loop": "step", "done": "done"}}}})
}

/// Runs the loop with a counter whose values are `counts`, tracing into a fresh directory.
fn traced_run(counts: &'static [u64], label: &str) -> tempfile::TempDir {
    let scratch = Scratch::new(&loop_workflow());
    let calls = Arc::new(AtomicU64::new(0));
    let mut tools = ToolRegistry::new();
    tools.register_fn("count", move |_, _| {
        let call = calls.fetch_add(1, Ordering::SeqCst) as usize;
        Ok(json!({"n": counts[call.min(counts.len() - 1)]}))
    });
    let trace = tempfile::tempdir().unwrap();
    let mut inputs = serde_json::Map::new();
    inputs.insert("label".into(), json!(label));
    let options = ExecuteOptions {
        tool_registry: Arc::new(tools),
        trace_dir: Some(trace.path().to_path_buf()),
        inputs,
        ..ExecuteOptions::default()
    };
    let result = execute(&scratch.load(), options, &NullObserver);
    assert!(result.is_success(), "{result:?}");
    trace
}

#[test]
fn a_loop_node_has_one_record_with_its_visits_and_a_file_per_visit() {
    let trace = traced_run(&[1, 2, 3], "a");
    let dag: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("dag_trace.json")).unwrap(),
    )
    .unwrap();
    let step = dag["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "step")
        .unwrap();
    assert_eq!(step["visits"], 3);
    assert_eq!(step["status"], "ok");
    assert!(step["checkpoints"].as_array().unwrap().is_empty());
    let finished: Vec<&str> = dag["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "node_finished" && e["node_name"] == "step")
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(finished, ["ok", "ok", "ok"]);
    for (visit, n) in [(0, 1), (1, 2), (2, 3)] {
        let file = trace
            .path()
            .join(format!("node_data/step/iters/{visit:03}/output.json"));
        let output: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(output, json!({"n": n}));
    }
}

#[test]
fn identical_runs_agree() {
    let (a, b) = (traced_run(&[1, 2, 3], "x"), traced_run(&[1, 2, 3], "x"));
    let diff = diff_traces(a.path(), b.path()).unwrap();
    assert_eq!(diff.first_divergence, None, "{}", diff.render());
    assert_eq!(diff.exit_code(), 0);
    assert_eq!(diff.verdict_agreement_rate, 1.0);
    assert_eq!(diff.matched_count, 3);
}

#[test]
fn the_first_divergence_is_a_later_visit_output() {
    let (a, b) = (traced_run(&[1, 2, 3], "x"), traced_run(&[1, 2, 4], "x"));
    let diff = diff_traces(a.path(), b.path()).unwrap();
    let divergence = diff.first_divergence.clone().expect("diverges");
    assert_eq!(
        (
            divergence.node.as_str(),
            divergence.visit,
            divergence.kind.as_str()
        ),
        ("step", 2, "outputs")
    );
    assert_eq!(divergence.path.as_deref(), Some("$.n"));
    assert_eq!(
        (divergence.a, divergence.b),
        (Some(json!(3)), Some(json!(4)))
    );
    assert_eq!(diff.exit_code(), 1);
    assert!(
        diff.render()
            .contains("first divergence: step visit 3 (outputs) at $.n")
    );
}

#[test]
fn differing_inputs_and_extra_visits_are_found() {
    let (a, b) = (traced_run(&[1, 2, 3], "x"), traced_run(&[1, 2, 3], "y"));
    let divergence = diff_traces(a.path(), b.path())
        .unwrap()
        .first_divergence
        .unwrap();
    assert_eq!(
        (
            divergence.node.as_str(),
            divergence.visit,
            divergence.kind.as_str()
        ),
        ("step", 0, "inputs")
    );
    assert_eq!(divergence.path.as_deref(), Some("$.label"));
    let (short, long) = (traced_run(&[3], "x"), traced_run(&[1, 3], "x"));
    let divergence = diff_traces(short.path(), long.path())
        .unwrap()
        .first_divergence
        .unwrap();
    // Visit 0 already differs in its output; the loop's extra visit comes after.
    assert_eq!(
        (divergence.node.as_str(), divergence.kind.as_str()),
        ("step", "outputs")
    );
    let divergence = diff_traces(long.path(), short.path())
        .unwrap()
        .first_divergence
        .unwrap();
    assert_eq!((divergence.node.as_str(), divergence.visit), ("step", 0));
}

#[test]
fn a_directory_without_a_trace_is_an_error() {
    let empty = tempfile::tempdir().unwrap();
    let err = diff_traces(empty.path(), empty.path()).unwrap_err();
    assert!(err.to_string().starts_with("dag_trace.json not found at"));
}
