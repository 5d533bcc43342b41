//! Conformance: the four executable test workflows behave as the conformance README describes.

mod common;

use common::{Scratch, conformance_gap_dir, conformance_json, fixtures};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use trellis_gap::{
    CollectingObserver, ExecuteOptions, ExitStatus, RunEvent, ToolRegistry, execute,
};

fn options(registry: ToolRegistry) -> ExecuteOptions {
    ExecuteOptions {
        tool_registry: Arc::new(registry),
        ..ExecuteOptions::default()
    }
}

fn stub_tools() -> std::path::PathBuf {
    fixtures().join("tools/stub_tools.py")
}

fn recovery_registry(work_function: &str) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register_python("stub.work", stub_tools(), work_function)
        .unwrap();
    registry
        .register_python("robot.recover_a", stub_tools(), "recover_a")
        .unwrap();
    registry
        .register_python("robot.recover_b", stub_tools(), "recover_b")
        .unwrap();
    registry
}

#[test]
fn on_error_recovery_success_path_binds_the_output() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_sg_on_error_recovery.json"));
    let observer = CollectingObserver::default();
    let result = execute(
        &scratch.load(),
        options(recovery_registry("work_ok")),
        &observer,
    );
    assert!(result.is_success(), "{result:?}");
    assert_eq!(result.end_node.as_deref(), Some("done"));
    assert_eq!(result.outputs["sg_work"]["result"], json!(7));
}

#[test]
fn on_error_recovery_failure_path_runs_every_recovery_call() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_sg_on_error_recovery.json"));
    let log = scratch.path().join("recovery.log");
    let mut opts = options(recovery_registry("work_fail"));
    opts.python.extra_env.push((
        "TRELLIS_TEST_RECOVERY_LOG".into(),
        log.to_string_lossy().into_owned(),
    ));
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), opts, &observer);
    assert_eq!(result.exit_status, Some(ExitStatus::Failure));
    assert_eq!(result.end_node.as_deref(), Some("failed"));
    let error = result.error.clone().unwrap();
    assert!(
        error.starts_with(
            "workflow terminated at end node 'failed' (failure); first node error -- sg_work.work: "
        ),
        "{error}"
    );
    assert!(error.contains("work exploded"));
    assert_eq!(
        result.outputs["sg_work"],
        serde_json::Map::new(),
        "nothing bound on the error path"
    );
    let events = observer.events();
    let exited: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::SubgraphExited {
                exit_value,
                error_path,
                ..
            } => Some((exit_value.clone(), *error_path)),
            _ => None,
        })
        .collect();
    assert_eq!(exited, vec![("boom".to_string(), true)]);
    let recovery: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::RecoveryCall { tool, error, .. } => Some((tool.clone(), error.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(recovery.len(), 2);
    assert_eq!(recovery[0].0, "robot.recover_a");
    assert!(
        recovery[0]
            .1
            .as_deref()
            .unwrap_or("")
            .contains("recover_a failed at speed 2")
    );
    assert_eq!(recovery[1], ("robot.recover_b".to_string(), None));
    assert_eq!(std::fs::read_to_string(log).unwrap(), "recover_b\n");
}

#[test]
fn streaming_consumer_reads_the_latest_tick() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_streaming_consumer.json"));
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options(ToolRegistry::new()), &observer);
    assert!(result.is_success(), "{result:?}");
    let tick = result.outputs["sg_stream"]["tick"].as_i64().unwrap();
    assert!(tick >= 0);
    let events = observer.events();
    assert!(events.iter().any(
        |e| matches!(e, RunEvent::Published { node_id, .. } if node_id == "sg_stream.tracker")
    ));
    // The tracker stops on cancellation within the grace period rather than being abandoned.
    assert!(
        !events.iter().any(
            |e| matches!(e, RunEvent::Log { line, .. } if line.contains("ignored cancellation"))
        )
    );
}

#[test]
fn send_fanout_records_zero_one_two() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_send_fanout.json"));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    let seen = Arc::clone(&calls);
    registry.register_fn("stub.record", move |_, args| {
        seen.lock().unwrap().push(args["x"].as_i64().unwrap());
        Ok(json!({"x": args["x"]}))
    });
    let trace = tempfile::tempdir().unwrap();
    let mut opts = options(registry);
    opts.trace_dir = Some(trace.path().to_path_buf());
    let result = execute(&scratch.load(), opts, &CollectingObserver::default());
    assert!(result.is_success(), "{result:?}");
    let mut recorded = calls.lock().unwrap().clone();
    recorded.sort_unstable();
    assert_eq!(recorded, vec![0, 1, 2]);
    assert!(
        trace
            .path()
            .join("node_data/<send>.worker#0/output.json")
            .is_file()
    );
}

#[test]
fn subgraph_back_edge_loop_bumps_three_times() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_subgraph_back_edge_loop.json"));
    let mut registry = ToolRegistry::new();
    registry
        .register_python("stub.bump", stub_tools(), "bump")
        .unwrap();
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options(registry), &observer);
    assert!(result.is_success(), "{result:?}");
    assert_eq!(result.outputs["step_sg"]["count"], json!(3));
    let bumps = observer
        .events()
        .iter()
        .filter(
            |e| matches!(e, RunEvent::NodeFinished { node_id, .. } if node_id == "step_sg.bump"),
        )
        .count();
    assert_eq!(bumps, 3);
}

#[test]
fn execution_result_serializes_in_the_cli_shape() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let scratch = Scratch::new(&conformance_json(&dir, "test_sg_on_error_recovery.json"));
    let result = execute(
        &scratch.load(),
        options(recovery_registry("work_ok")),
        &CollectingObserver::default(),
    );
    let value: Value = serde_json::to_value(&result).unwrap();
    assert_eq!(
        value,
        json!({"exit_status": "success", "end_node": "done", "outputs": {"sg_work": {"result": 7}}, "error": null})
    );
}
