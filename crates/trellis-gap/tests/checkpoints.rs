//! Subgraph checkpoints: `checkpoints/<subgraph>.py` judged against the connector's world
//! snapshot after a success-path exit; `warn` records failures, `strict` fails the run, the
//! `on_error` path is never checked, and results land in the result and the trace per visit.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::sync::Arc;
use trellis_gap::{
    CheckpointMode, CollectingObserver, Connector, ExecuteOptions, ExecutionResult, RunEvent,
    ToolRegistry, execute,
};

struct World;

impl Connector for World {
    fn get_observation(&self) -> Result<Value, String> {
        Ok(json!({}))
    }
    fn world_snapshot(&self) -> Result<Option<Value>, String> {
        Ok(Some(
            json!({"gripper": {"open": true}, "cube": {"z": 0.12}}),
        ))
    }
}

const SIDECAR: &str = r#"
def cube_lifted(world, outputs):
    return world.cube.z > 0.1 and outputs["result"] == 7

def gripper_closed(world):
    return world["gripper"]["open"] is False

CHECKPOINTS = [
    Checkpoint(name="cube_lifted", predicate=cube_lifted),
    {"name": "gripper_closed", "predicate": gripper_closed,
     "diagnostics": lambda world: {"open": world.gripper.open}},
    {"name": "probe_only", "predicate": lambda world: False, "validate": False},
]
"#;

/// `run_sg` calls `sg_work` (tool `stub.const` → 7); `on_error` routes to the failure end.
fn workflow(tool: &str) -> Value {
    json!({
        "version": 3,
        "nodes": {"run_sg": {"type": "subgraph", "ref": "sg_work"},
                  "done": {"type": "end", "status": "success"},
                  "failed": {"type": "end", "status": "failure"}},
        "edges": [["START", "run_sg"]],
        "conditional_edges": {"run_sg": {"router_field": "exit", "mapping": {"ok": "done", "boom": "failed"}}},
        "subgraphs": {"sg_work": {
            "skill": "generic", "inputs": {}, "outputs": {"result": {"$ref": "work.value"}},
            "nodes": {"work": {"type": "tool", "tool": tool, "inputs": {"value": 7}}, "ok": {"type": "noop"}},
            "edges": [["START", "work"], ["work", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}, "on_error": "boom"}}
    })
}

fn run(
    tool: &str,
    mode: CheckpointMode,
    connector: Option<Arc<dyn Connector>>,
    trace: Option<&std::path::Path>,
) -> (ExecutionResult, Vec<RunEvent>) {
    let scratch = Scratch::new(&workflow(tool));
    std::fs::create_dir_all(scratch.path().join("checkpoints")).unwrap();
    std::fs::write(scratch.path().join("checkpoints/sg_work.py"), SIDECAR).unwrap();
    let mut tools = ToolRegistry::with_builtin_stubs();
    tools.register_fn("stub.broken", |_, _| {
        Err(trellis_gap::ToolError::failed(
            "stub.broken",
            "RuntimeError",
            "no",
        ))
    });
    let options = ExecuteOptions {
        tool_registry: Arc::new(tools),
        checkpoints: mode,
        connector,
        trace_dir: trace.map(std::path::Path::to_path_buf),
        ..ExecuteOptions::default()
    };
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options, &observer);
    (result, observer.events())
}

fn world() -> Option<Arc<dyn Connector>> {
    Some(Arc::new(World))
}

#[test]
fn warn_succeeds_and_records_the_failure() {
    let trace = tempfile::tempdir().unwrap();
    let (result, events) = run(
        "stub.const",
        CheckpointMode::Warn,
        world(),
        Some(trace.path()),
    );
    assert!(result.is_success(), "{result:?}");
    let summary: Vec<(&str, bool, u32)> = result
        .checkpoints
        .iter()
        .map(|c| (c.name.as_str(), c.passed, c.visit))
        .collect();
    // The validate=False probe is not evaluated.
    assert_eq!(
        summary,
        vec![("cube_lifted", true, 0), ("gripper_closed", false, 0)]
    );
    assert_eq!(
        result.checkpoints[1].diagnostics,
        Some(json!({"open": true}))
    );
    assert!(events.iter().any(|e| matches!(e, RunEvent::Log { line, .. }
        if line == "checkpoint(s) failed after subgraph 'sg_work' (visit 1): gripper_closed")));
    let serialized = serde_json::to_value(&result).unwrap();
    assert_eq!(serialized["checkpoints"][1]["name"], "gripper_closed");
    // The trace keeps the results on the call site's record, per visit.
    let dag: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("dag_trace.json")).unwrap(),
    )
    .unwrap();
    let call_site = dag["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "run_sg")
        .unwrap();
    assert_eq!(call_site["visits"], 1);
    let recorded: Vec<(&str, bool, u64)> = call_site["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["passed"].as_bool().unwrap(),
                c["visit"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        vec![("cube_lifted", true, 0), ("gripper_closed", false, 0)]
    );
}

#[test]
fn strict_fails_the_run_without_routing_through_on_error() {
    let (result, _) = run("stub.const", CheckpointMode::Strict, world(), None);
    assert!(!result.is_success());
    assert_eq!(
        result.end_node, None,
        "on_error must not route a verification failure"
    );
    assert_eq!(
        result.error.as_deref(),
        Some(
            "VerificationFailed: checkpoint(s) failed after subgraph 'sg_work' (visit 1): gripper_closed"
        )
    );
    assert_eq!(result.checkpoints.len(), 2);
}

#[test]
fn the_on_error_path_is_never_checked() {
    let (result, _) = run("stub.broken", CheckpointMode::Strict, world(), None);
    assert_eq!(result.end_node.as_deref(), Some("failed"));
    assert!(result.checkpoints.is_empty());
}

#[test]
fn off_ignores_the_sidecar_and_no_snapshot_warns_once() {
    let (result, _) = run("stub.const", CheckpointMode::Off, world(), None);
    assert!(result.is_success() && result.checkpoints.is_empty());
    let (result, events) = run("stub.const", CheckpointMode::Strict, None, None);
    assert!(
        result.is_success() && result.checkpoints.is_empty(),
        "{result:?}"
    );
    let warnings = events
        .iter()
        .filter(|e| matches!(e, RunEvent::Log { line, .. } if line.contains("no connector provides a world snapshot")))
        .count();
    assert_eq!(warnings, 1);
}

#[test]
fn a_broken_sidecar_fails_strict_and_warns_otherwise() {
    let scratch = Scratch::new(&workflow("stub.const"));
    std::fs::create_dir_all(scratch.path().join("checkpoints")).unwrap();
    std::fs::write(
        scratch.path().join("checkpoints/sg_work.py"),
        "CHECKPOINTS = 3\n",
    )
    .unwrap();
    for (mode, fails) in [
        (CheckpointMode::Warn, false),
        (CheckpointMode::Strict, true),
    ] {
        let options = ExecuteOptions {
            tool_registry: Arc::new(ToolRegistry::with_builtin_stubs()),
            checkpoints: mode,
            connector: world(),
            ..ExecuteOptions::default()
        };
        let result = execute(&scratch.load(), options, &trellis_gap::NullObserver);
        assert_eq!(!result.is_success(), fails, "{result:?}");
        if fails {
            assert!(
                result
                    .error
                    .as_deref()
                    .unwrap()
                    .contains("did not export CHECKPOINTS as a list")
            );
        }
    }
}
