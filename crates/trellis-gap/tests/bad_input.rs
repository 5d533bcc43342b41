//! Bad input never panics or hangs: each case ends with a clear error naming the node.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use trellis_gap::{
    CollectingObserver, ExecuteOptions, ExecutionResult, LoadError, PythonConfig, ToolRegistry,
    execute, load_workflow_str,
};

fn single(node: Value) -> Value {
    json!({"version": 3, "nodes": {"x": node, "done": {"type": "end", "status": "success"}},
           "edges": [["START", "x"], ["x", "done"]]})
}

fn run_with(doc: &Value, tweak: impl FnOnce(&mut ExecuteOptions)) -> ExecutionResult {
    let scratch = Scratch::new(doc);
    let mut options = ExecuteOptions {
        tool_registry: Arc::new(ToolRegistry::with_builtin_stubs()),
        cancel_grace: Duration::from_millis(200),
        ..ExecuteOptions::default()
    };
    tweak(&mut options);
    execute(&scratch.load(), options, &CollectingObserver::default())
}

fn script(path: &str) -> Value {
    single(json!({"type": "script", "script": path}))
}

fn error_of(result: &ExecutionResult) -> String {
    assert!(!result.is_success());
    result.error.clone().expect("an error")
}

#[test]
fn truncated_json_and_unknown_keys_are_load_errors() {
    let text = single(json!({"type": "tool", "tool": "stub.noop"})).to_string();
    for cut in [1, text.len() / 3, text.len() - 1] {
        let err = load_workflow_str(&text[..cut], PathBuf::from(".")).unwrap_err();
        assert!(matches!(err, LoadError::Json { .. }), "{err}");
    }
    let mut doc = single(json!({"type": "tool", "tool": "stub.noop"}));
    doc["nodes"]["x"]["timeout"] = json!(3);
    let err = trellis_gap::parse_workflow(&doc, PathBuf::from(".")).unwrap_err();
    assert!(
        err.to_string()
            .contains("workflow.nodes.x has unknown fields ['timeout']")
    );
}

#[test]
fn ref_to_a_missing_node_names_the_node() {
    let doc = single(
        json!({"type": "tool", "tool": "stub.echo", "inputs": {"v": {"$ref": "ghost.value"}}}),
    );
    let error = error_of(&run_with(&doc, |_| {}));
    assert!(
        error.starts_with("Node 'x' failed: WorkflowValidationError: "),
        "{error}"
    );
    assert!(error.contains("unknown node 'ghost' in current scope"));
}

#[test]
fn missing_script_file() {
    let error = error_of(&run_with(&script("scripts/does_not_exist.py"), |_| {}));
    assert!(
        error.starts_with("Node 'x' failed: FileNotFoundError: script file not found"),
        "{error}"
    );
}

#[test]
fn script_raising_at_import_keeps_its_traceback() {
    let result = run_with(&script("scripts/import_error.py"), |_| {});
    assert_eq!(
        error_of(&result),
        "Node 'x' failed: RuntimeError: broken at import"
    );
    assert!(result.traceback.unwrap().contains("import_error.py"));
}

#[test]
fn script_raising_in_run_keeps_its_traceback() {
    let result = run_with(&script("scripts/raises.py"), |_| {});
    assert_eq!(
        error_of(&result),
        "Node 'x' failed: ValueError: bad value in helper"
    );
    let traceback = result.traceback.unwrap();
    assert!(traceback.contains("in helper"), "{traceback}");
}

#[test]
fn script_without_run_and_with_missing_output_key() {
    let error = error_of(&run_with(&script("scripts/no_run.py"), |_| {}));
    assert_eq!(
        error,
        "Node 'x' failed: WorkflowValidationError: Script 'scripts/no_run.py' missing run() function"
    );
    let error = error_of(&run_with(&script("scripts/bad_output.py"), |_| {}));
    assert!(
        error.contains("Script output missing declared key 'y'"),
        "{error}"
    );
}

#[test]
fn script_that_never_returns_is_cancelled_by_the_caller() {
    let cancel = trellis_gap::CancelToken::new();
    let trigger = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        trigger.cancel();
    });
    let result = run_with(&script("scripts/forever.py"), |o| o.cancel = cancel);
    canceller.join().unwrap();
    let error = error_of(&result);
    assert!(error.starts_with("cancelled: node 'x'"), "{error}");
    assert_eq!(result.exit_status, None);
}

#[test]
fn killed_bridge_fails_the_node_and_a_fresh_bridge_serves_the_next_one() {
    let doc = json!({"version": 3, "nodes": {
        "sg": {"type": "subgraph", "ref": "s"},
        "after": {"type": "script", "script": "scripts/compute.py", "inputs": {"x": 2}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "sg"], ["after", "done"]],
        "conditional_edges": {"sg": {"router_field": "exit", "mapping": {"ok": "done", "crashed": "after"}}},
        "subgraphs": {"s": {"nodes": {"die": {"type": "script", "script": "scripts/suicide.py"}, "ok": {"type": "noop"}},
            "edges": [["START", "die"], ["die", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}, "on_error": "crashed"}}});
    let scratch = Scratch::new(&doc);
    let observer = CollectingObserver::default();
    let options = ExecuteOptions {
        tool_registry: Arc::new(ToolRegistry::new()),
        ..ExecuteOptions::default()
    };
    let result = execute(&scratch.load(), options, &observer);
    assert!(
        result.is_success(),
        "the run continues after the crash via on_error: {result:?}"
    );
    let failure = observer.events().into_iter().find_map(|e| match e {
        trellis_gap::RunEvent::NodeFailed { node_id, error, .. } if node_id == "s.die" => {
            Some(error)
        }
        _ => None,
    });
    let failure = failure.expect("the crashed node is reported");
    assert!(
        failure.starts_with("Node 's.die' failed: BridgeError: python bridge exited unexpectedly"),
        "{failure}"
    );
}

#[test]
fn unusable_interpreter_is_a_node_error() {
    let result = run_with(&script("scripts/compute.py"), |o| {
        o.python = PythonConfig {
            interpreter: PathBuf::from("/nonexistent/python"),
            extra_env: vec![],
            containment: None,
        };
    });
    let error = error_of(&result);
    assert!(
        error.starts_with(
            "Node 'x' failed: BridgeError: cannot start python bridge (/nonexistent/python)"
        ),
        "{error}"
    );
}

#[test]
fn unknown_tool_and_extra_arguments() {
    let error = error_of(&run_with(
        &single(json!({"type": "tool", "tool": "no.such"})),
        |_| {},
    ));
    assert!(
        error.starts_with("Node 'x' failed: KeyError: Tool 'no.such' not found"),
        "{error}"
    );
    let error = error_of(&run_with(
        &single(json!({"type": "tool", "tool": "stub.const", "inputs": {"value": 1, "extra": 2}})),
        |_| {},
    ));
    assert!(
        error.contains("ToolArgumentError: tool 'stub.const' got extraneous arguments ['extra']"),
        "{error}"
    );
}

#[test]
fn validation_errors_stop_execution_before_any_node_runs() {
    let doc = json!({"version": 3, "nodes": {"x": {"type": "tool", "tool": "stub.noop"}}, "edges": [["START", "x"]]});
    let error = error_of(&run_with(&doc, |_| {}));
    assert!(
        error.starts_with("Graph validation failed (2 issues): [error] workflow.nodes.x:"),
        "{error}"
    );
}
