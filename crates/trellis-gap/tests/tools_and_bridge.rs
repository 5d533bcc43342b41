//! Tool sources (Python bundles, command manifests) and the shared bridge under concurrency.

mod common;

use common::{Scratch, fixtures};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use trellis_gap::{
    CollectingObserver, ExecuteOptions, ExecutionResult, PythonConfig, PythonIntrospector,
    RunEvent, ToolRegistry, ValidateOptions, execute, load_command_manifest, validate,
};

fn single_tool(tool: &str, inputs: Value) -> Value {
    json!({"version": 3, "nodes": {"x": {"type": "tool", "tool": tool, "inputs": inputs},
           "done": {"type": "end", "status": "success"}}, "edges": [["START", "x"], ["x", "done"]]})
}

fn run(
    doc: &Value,
    registry: ToolRegistry,
    trace: Option<PathBuf>,
) -> (ExecutionResult, Vec<RunEvent>) {
    let scratch = Scratch::new(doc);
    let options = ExecuteOptions {
        tool_registry: Arc::new(registry),
        trace_dir: trace,
        ..ExecuteOptions::default()
    };
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options, &observer);
    (result, observer.events())
}

fn python_registry() -> ToolRegistry {
    let module = fixtures().join("tools/stub_tools.py");
    let mut registry = ToolRegistry::with_builtin_stubs();
    registry
        .register_python("py.strict", &module, "strict")
        .unwrap();
    registry
        .register_python("py.with_ctx", &module, "with_ctx")
        .unwrap();
    registry
}

#[test]
fn python_tool_rejects_extraneous_arguments() {
    let (result, _) = run(
        &single_tool("py.strict", json!({"a": 1, "b": 2, "extraneous": 3})),
        python_registry(),
        None,
    );
    let error = result.error.unwrap();
    assert!(error.starts_with("Node 'x' failed: ToolArgumentError: tool 'py.strict' got extraneous arguments ['extraneous']; accepted: a, b"), "{error}");
}

#[test]
fn python_tool_gets_ctx_and_calls_back_into_the_host() {
    let trace = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &single_tool("py.with_ctx", json!({"x": 3})),
        python_registry(),
        Some(trace.path().to_path_buf()),
    );
    assert!(result.is_success(), "{result:?}");
    let out: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("node_data/x/output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(out, json!({"node": "x", "doubled": 6}));
}

#[test]
fn registering_a_name_twice_is_a_collision() {
    let mut registry = python_registry();
    let err = registry
        .register_python("py.strict", "other.py", "f")
        .unwrap_err();
    assert!(err.to_string().contains("collision"));
}

#[test]
fn one_bridge_serves_concurrent_script_nodes() {
    let mut nodes = serde_json::Map::new();
    let mut edges = vec![];
    for i in 0..4 {
        nodes.insert(
            format!("c{i}"),
            json!({"type": "script", "script": "scripts/compute.py", "inputs": {"x": i}}),
        );
        edges.push(json!(["START", format!("c{i}")]));
        edges.push(json!([format!("c{i}"), "done"]));
    }
    nodes.insert("done".into(), json!({"type": "end", "status": "success"}));
    let doc = json!({"version": 3, "nodes": nodes, "edges": edges});
    let trace = tempfile::tempdir().unwrap();
    let (result, events) = run(&doc, ToolRegistry::new(), Some(trace.path().to_path_buf()));
    assert!(result.is_success(), "{result:?}");
    for i in 0..4 {
        let out: Value = serde_json::from_str(
            &std::fs::read_to_string(trace.path().join(format!("node_data/c{i}/output.json")))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(out, json!({"y": 3 * i}));
        let line = format!("computing {i}");
        assert!(events.iter().any(|e| matches!(e, RunEvent::Log { node_id: Some(id), line: l, .. } if *id == format!("c{i}") && *l == line)));
    }
}

fn manifest(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("tools.json");
    let manifest = json!({"tools": {
        "cmd.add": {"command": ["python3", "-c", "import sys, json; a = json.load(sys.stdin); print(json.dumps({'sum': a['a'] + a['b']}))"], "tags": ["planning"]},
        "cmd.fail": {"command": ["sh", "-c", "echo oops >&2; exit 3"]},
        "cmd.slow": {"command": ["sleep", "5"], "timeout_s": 0.2}
    }});
    std::fs::write(&path, manifest.to_string()).unwrap();
    path
}

#[test]
fn command_tools_from_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::new();
    load_command_manifest(&mut registry, &manifest(dir.path())).unwrap();
    assert_eq!(
        registry.descriptor("cmd.add").unwrap().tags,
        vec!["planning".to_string()]
    );
    let trace = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &single_tool("cmd.add", json!({"a": 2, "b": 5})),
        registry.clone(),
        Some(trace.path().to_path_buf()),
    );
    assert!(result.is_success(), "{result:?}");
    let out: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("node_data/x/output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(out, json!({"sum": 7}));
    let (result, _) = run(&single_tool("cmd.fail", json!({})), registry.clone(), None);
    let error = result.error.unwrap();
    assert!(
        error.contains("CommandFailed") && error.contains("oops"),
        "{error}"
    );
    let (result, _) = run(&single_tool("cmd.slow", json!({})), registry, None);
    assert!(result.error.unwrap().contains("TimeoutError"));
}

#[test]
fn invalid_manifest_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, r#"{"tools": {"t": {"command": [], "extra": 1}}}"#).unwrap();
    let err = load_command_manifest(&mut ToolRegistry::new(), &path).unwrap_err();
    assert!(
        err.to_string().starts_with("invalid tool manifest"),
        "{err}"
    );
}

#[test]
fn script_introspection_warns_for_unresolvable_scripts() {
    let doc = json!({"version": 3, "nodes": {"sg": {"type": "subgraph", "ref": "s"}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "sg"]], "conditional_edges": {"sg": {"router_field": "exit", "mapping": {"ok": "done"}}},
        "subgraphs": {"s": {"nodes": {
            "good": {"type": "script", "script": "scripts/compute.py"},
            "missing": {"type": "script", "script": "scripts/nope.py"},
            "broken": {"type": "script", "script": "scripts/import_error.py"},
            "norun": {"type": "script", "script": "scripts/no_run.py"},
            "untyped": {"type": "script", "script": "scripts/route_value.py"},
            "ok": {"type": "noop"}},
          "edges": [["START", "good"], ["good", "missing"], ["missing", "broken"], ["broken", "norun"], ["norun", "untyped"], ["untyped", "ok"], ["ok", "END"]],
          "exit": {"router_field": null, "success_values": ["ok"]}}}});
    let scratch = Scratch::new(&doc);
    let introspector = PythonIntrospector::new(PythonConfig::from_env());
    let options = ValidateOptions {
        script_introspector: Some(&introspector),
        ..Default::default()
    };
    let issues = validate(&scratch.load(), &options);
    let warned: Vec<(&str, &str)> = issues
        .iter()
        .map(|i| (i.node_id.as_str(), i.message.as_str()))
        .collect();
    assert_eq!(warned.len(), 4, "{warned:#?}");
    assert!(
        issues
            .iter()
            .all(|i| !i.is_error() && i.message.starts_with("could not introspect schema: "))
    );
    assert!(warned[0].0.ends_with(".missing") && warned[0].1.contains("not found"));
    assert!(warned[1].0.ends_with(".broken") && warned[1].1.contains("broken at import"));
    assert!(warned[2].0.ends_with(".norun") && warned[2].1.contains("run()"));
    assert!(warned[3].0.ends_with(".untyped") && warned[3].1.contains("missing type annotation"));
}

#[test]
fn trace_counts_revisits_of_loop_nodes() {
    let doc = json!({"version": 3, "nodes": {
        "step": {"type": "tool", "tool": "stub.counter"},
        "decide": {"type": "router", "script": "scripts/decide.py", "inputs": {"n": {"$ref": "step.n"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "step"], ["step", "decide"]],
        "conditional_edges": {"decide": {"router_field": null, "mapping": {"loop": "step", "done": "done"}}}});
    let trace = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &doc,
        ToolRegistry::with_builtin_stubs(),
        Some(trace.path().to_path_buf()),
    );
    assert!(result.is_success(), "{result:?}");
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
    assert_eq!(step["id"], "n_0000");
    let keys: Vec<&str> = step
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 18);
    for visit in ["000", "001", "002"] {
        assert!(
            trace
                .path()
                .join(format!("node_data/step/iters/{visit}/output.json"))
                .is_file()
        );
    }
    let last: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("node_data/step/output.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(last, json!({"n": 3}));
    let edge = &dag["edges"][0];
    assert_eq!(
        (edge["from_name"].as_str(), edge["to_name"].as_str()),
        (Some("step"), Some("decide"))
    );
}

#[test]
fn routers_stay_pending_in_the_trace() {
    let doc = json!({"version": 3, "nodes": {
        "step": {"type": "tool", "tool": "stub.counter"},
        "decide": {"type": "router", "script": "scripts/decide.py", "inputs": {"n": 3}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "step"], ["step", "decide"]],
        "conditional_edges": {"decide": {"router_field": null, "mapping": {"loop": "step", "done": "done"}}}});
    let trace = tempfile::tempdir().unwrap();
    let (result, _) = run(
        &doc,
        ToolRegistry::with_builtin_stubs(),
        Some(trace.path().to_path_buf()),
    );
    assert!(result.is_success(), "{result:?}");
    let dag: Value = serde_json::from_str(
        &std::fs::read_to_string(trace.path().join("dag_trace.json")).unwrap(),
    )
    .unwrap();
    let decide = dag["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "decide")
        .unwrap();
    assert_eq!(decide["status"], "pending");
    assert_eq!(decide["visits"], 0);
}
