//! Loader behaviour: strict keys, version, per-type fields, legacy migration errors, `$ref` parsing.

mod common;

use serde_json::{Value, json};
use std::path::PathBuf;
use trellis_gap::{
    InputValue, LoadError, NodeType, Ref, is_gap_document, load_workflow, load_workflow_str,
    parse_workflow,
};

fn base() -> Value {
    json!({
        "version": 3,
        "nodes": {"a": {"type": "tool", "tool": "t.x", "inputs": {}}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "a"], ["a", "done"]]
    })
}

fn load_err(doc: &Value) -> String {
    match parse_workflow(doc, PathBuf::from(".")) {
        Ok(_) => panic!("expected a load error for {doc}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn minimal_document_loads_with_key_order_preserved() {
    let wf = parse_workflow(&base(), PathBuf::from("/x")).unwrap();
    assert_eq!(wf.nodes.keys().collect::<Vec<_>>(), ["a", "done"]);
    assert_eq!(wf.nodes["a"].node_type, NodeType::Tool);
    assert_eq!(wf.workflow_dir, PathBuf::from("/x"));
}

#[test]
fn version_three_point_zero_is_accepted_and_recognised() {
    let mut doc = base();
    doc["version"] = json!(3.0);
    assert!(parse_workflow(&doc, PathBuf::from(".")).is_ok());
    assert!(is_gap_document(&doc));
    assert!(!is_gap_document(&json!({"version": 2})));
    assert!(!is_gap_document(&json!({"version": "3"})));
    assert!(!is_gap_document(&json!([3])));
}

#[test]
fn wrong_version_is_rejected() {
    let mut doc = base();
    doc["version"] = json!(2);
    assert_eq!(load_err(&doc), "unsupported workflow version 2, expected 3");
}

#[test]
fn unknown_root_keys_are_checked_before_the_version() {
    let doc = json!({"version": 2, "begin": "x", "nodes": {}});
    let err = load_err(&doc);
    assert!(
        err.starts_with("workflow root has unknown fields ['begin']; allowed: ["),
        "{err}"
    );
    assert!(err.contains("'version'"));
}

#[test]
fn unknown_node_keys_are_rejected_with_location() {
    let mut doc = base();
    doc["nodes"]["a"]["colour"] = json!("red");
    assert!(load_err(&doc).starts_with("workflow.nodes.a has unknown fields ['colour']"));
}

#[test]
fn legacy_and_invalid_types() {
    let mut doc = base();
    doc["nodes"]["a"] = json!({"type": "service", "service": "robot"});
    assert!(load_err(&doc).contains("retired type"));
    doc["nodes"]["a"] = json!({"type": "bogus"});
    assert!(load_err(&doc).contains("invalid type 'bogus'"));
    doc["nodes"]["a"] = json!({});
    assert!(load_err(&doc).contains("invalid type None"));
}

#[test]
fn streaming_only_on_tool_and_script() {
    let mut doc = base();
    doc["nodes"]["a"] = json!({"type": "noop", "streaming": true});
    assert!(load_err(&doc).contains("streaming"));
    doc["nodes"]["a"] = json!({"type": "tool", "tool": "t", "streaming": 1});
    let wf = parse_workflow(&doc, PathBuf::from(".")).unwrap();
    assert!(
        wf.nodes["a"].streaming,
        "truthy values enable streaming, as in the reference"
    );
}

#[test]
fn per_type_required_fields() {
    let mut doc = base();
    doc["nodes"]["a"] = json!({"type": "tool"});
    assert!(load_err(&doc).contains("(type=tool) requires a 'tool' field"));
    doc["nodes"]["a"] = json!({"type": "script"});
    assert!(load_err(&doc).contains("(type=script) requires a 'script' field"));
    doc["nodes"]["a"] = json!({"type": "router", "script": ""});
    assert!(load_err(&doc).contains("(type=router) requires a 'script' field"));
    doc["nodes"]["a"] = json!({"type": "subgraph"});
    assert!(load_err(&doc).contains("(type=subgraph) requires a string 'ref' field"));
    doc["nodes"]["a"] = json!({"type": "end", "status": "ok"});
    assert!(load_err(&doc).contains("requires status 'success' or 'failure', got 'ok'"));
}

#[test]
fn reserved_names() {
    let mut doc = base();
    doc["nodes"]["START"] = json!({"type": "noop"});
    assert!(load_err(&doc).contains("reserved virtual name"));
    let mut doc = base();
    doc["nodes"]["in"] = json!({"type": "noop"});
    assert!(
        parse_workflow(&doc, PathBuf::from(".")).is_ok(),
        "top-level 'in' is allowed"
    );
    let mut doc = base();
    doc["subgraphs"] = json!({"s": {"nodes": {"in": {"type": "noop"}}, "exit": {}}});
    assert!(load_err(&doc).contains("cannot contain a node named 'in'"));
}

#[test]
fn recovery_entries() {
    let mut doc = base();
    doc["nodes"]["done"]["recovery"] = json!([{"service": "robot", "method": "home"}]);
    assert!(load_err(&doc).contains("now name a tool"));
    doc["nodes"]["done"]["recovery"] = json!([{"inputs": {}}]);
    assert!(load_err(&doc).contains("string 'tool'"));
    doc["nodes"]["done"]["recovery"] =
        json!([{"tool": "robot.home", "inputs": {"p": {"$ref": "a.x"}}}]);
    let wf = parse_workflow(&doc, PathBuf::from(".")).unwrap();
    assert_eq!(wf.nodes["done"].recovery[0].tool, "robot.home");
    assert_eq!(
        wf.nodes["done"].recovery[0].inputs["p"],
        json!({"$ref": "a.x"}),
        "recovery inputs stay raw"
    );
}

#[test]
fn legacy_exit_values_key() {
    let mut doc = base();
    doc["subgraphs"] = json!({"s": {"nodes": {"n": {"type": "noop"}}, "exit": {"values": ["ok"]}}});
    let err = load_err(&doc);
    assert!(err.contains("legacy 'values' key"), "{err}");
    assert!(err.contains("--exit-split"));
}

#[test]
fn refs_are_recognised_by_structure_and_inside_lists_only() {
    let mut doc = base();
    doc["nodes"]["a"]["inputs"] = json!({
        "r": {"$ref": "x.y"},
        "not_ref_extra_key": {"$ref": "x", "k": 1},
        "not_ref_number": {"$ref": 5},
        "list": ["a", {"$ref": "x.0"}, [{"$ref": "y"}]],
        "nested_obj": {"pose": {"$ref": "a.b"}}
    });
    let wf = parse_workflow(&doc, PathBuf::from(".")).unwrap();
    let inputs = &wf.nodes["a"].inputs;
    assert_eq!(inputs["r"], InputValue::Ref(Ref { path: "x.y".into() }));
    assert!(matches!(
        inputs["not_ref_extra_key"],
        InputValue::Literal(_)
    ));
    assert!(matches!(inputs["not_ref_number"], InputValue::Literal(_)));
    let InputValue::List(items) = &inputs["list"] else {
        panic!("list not parsed")
    };
    assert_eq!(items[1], InputValue::Ref(Ref { path: "x.0".into() }));
    assert!(
        matches!(&items[2], InputValue::List(inner) if inner[0] == InputValue::Ref(Ref { path: "y".into() }))
    );
    assert!(matches!(inputs["nested_obj"], InputValue::Literal(_)));
}

#[test]
fn edges_and_conditional_edges_shapes() {
    let mut doc = base();
    doc["edges"] = json!([["START", "a", "x"]]);
    assert!(load_err(&doc).contains(
        "workflow.edges[0] must be a [src, dst] pair of strings, got ['START', 'a', 'x']"
    ));
    let mut doc = base();
    doc["conditional_edges"] = json!({"a": {"router_field": "f", "mapping": {}}});
    assert!(load_err(&doc).contains("mapping must be a non-empty object"));
    doc["conditional_edges"] = json!({"a": {"router_field": 3, "mapping": {"k": "done"}}});
    assert!(load_err(&doc).contains("must be a string or null"));
    doc["conditional_edges"] = json!({"a": {"mapping": {"k": 1}}});
    assert!(load_err(&doc).contains("mapping must map string→string"));
}

#[test]
fn file_level_errors() {
    let missing =
        load_workflow(std::path::Path::new("/nonexistent/dir/workflow.json")).unwrap_err();
    assert!(matches!(missing, LoadError::NotFound { .. }));
    assert!(missing.to_string().starts_with("Workflow file not found: "));
    let truncated =
        load_workflow_str("{\"version\": 3, \"nodes\": {", PathBuf::from(".")).unwrap_err();
    assert!(matches!(truncated, LoadError::Json { .. }), "{truncated}");
    let not_object = load_workflow_str("[1]", PathBuf::from(".")).unwrap_err();
    assert_eq!(
        not_object.to_string(),
        "workflow root must be a JSON object"
    );
}

#[test]
fn directory_path_reads_workflow_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("workflow.json"), base().to_string()).unwrap();
    let wf = load_workflow(dir.path()).unwrap();
    assert_eq!(wf.workflow_dir, dir.path());
}

#[test]
fn inputs_file_must_hold_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inputs.json");
    std::fs::write(&path, r#"{"arm_id": 1, "pose": [0, 1]}"#).unwrap();
    let inputs = trellis_gap::read_inputs_file(&path).unwrap();
    assert_eq!(inputs.keys().collect::<Vec<_>>(), ["arm_id", "pose"]);
    std::fs::write(&path, "[1]").unwrap();
    assert!(
        trellis_gap::read_inputs_file(&path)
            .unwrap_err()
            .to_string()
            .contains("must hold a JSON object")
    );
}
