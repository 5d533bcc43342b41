//! Conformance: the example graphs load and validate cleanly; every §6.4 mutation yields exactly its issues.

mod common;

use common::{conformance_gap_dir, conformance_json, shape, triple};
use serde_json::{Value, json};
use std::path::PathBuf;
use trellis_gap::{
    Issue, SkillBundle, SkillRegistry, ToolRegistry, ValidateOptions, parse_workflow, validate,
};

fn validate_doc(document: &Value) -> Vec<Issue> {
    validate_with(document, &ValidateOptions::default())
}

fn validate_with(document: &Value, options: &ValidateOptions<'_>) -> Vec<Issue> {
    let workflow = parse_workflow(document, PathBuf::from(".")).expect("mutation still loads");
    validate(&workflow, options)
}

fn minimal() -> Option<Value> {
    conformance_gap_dir().map(|dir| conformance_json(&dir, "test_minimal_v3.json"))
}

fn sg(doc: &mut Value) -> &mut Value {
    &mut doc["subgraphs"]["sg_def"]
}

#[test]
fn example_and_test_graphs_load_and_validate_without_errors() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let workflow = trellis_gap::load_workflow(&path)
            .unwrap_or_else(|e| panic!("{} failed to load: {e}", path.display()));
        let errors: Vec<Issue> = validate(&workflow, &ValidateOptions::default())
            .into_iter()
            .filter(Issue::is_error)
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        checked += 1;
    }
    assert_eq!(checked, 8, "expected the eight gap conformance documents");
}

#[test]
fn minimal_workflow_has_zero_issues() {
    let Some(doc) = minimal() else { return };
    assert_eq!(validate_doc(&doc), vec![]);
}

#[test]
fn orphan_node_is_unreachable_and_a_dead_end() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["nodes"]["orphan"] = json!({"type": "tool", "tool": "robot.go_home"});
    let issues = validate_doc(&doc);
    let at = "subgraphs.sg_def.nodes.orphan";
    assert_eq!(
        shape(&issues),
        vec![triple("error", at, Some("S2")), triple("error", at, None)]
    );
    assert!(issues[0].message.contains("unreachable"));
    assert!(
        issues[1]
            .message
            .contains("has no outgoing edge or conditional dispatch")
    );
}

#[test]
fn streaming_node_with_outgoing_edge_violates_s3() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["nodes"]["tracker"] =
        json!({"type": "tool", "tool": "robot.track", "streaming": true});
    // The START edge keeps the tracker reachable so that only the purity rule fires.
    let edges = sg(&mut doc)["edges"].as_array_mut().unwrap();
    edges.push(json!(["START", "tracker"]));
    edges.push(json!(["tracker", "step"]));
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple("error", "subgraphs.sg_def.edges", Some("S3"))]
    );
    assert!(issues[0].message.contains("pure sources"));
}

#[test]
fn edge_to_undeclared_target_is_s5_only() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["step", "nonexistent"]));
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple("error", "subgraphs.sg_def.edges", Some("S5"))]
    );
    assert_eq!(
        issues[0].message,
        "edge target 'nonexistent' not declared (S5)"
    );
}

#[test]
fn non_router_conditional_edge_needs_router_field() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["conditional_edges"]["step"] =
        json!({"router_field": null, "mapping": {"x": "ok"}});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.conditional_edges.step",
            Some("S8")
        )]
    );
    assert!(issues[0].message.contains("router_field"));
}

#[test]
fn empty_success_values_is_s7() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["exit"]["success_values"] = json!([]);
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple("error", "subgraphs.sg_def.exit", Some("S7"))]
    );
    assert!(issues[0].message.contains("success_values"));
}

#[test]
fn on_error_naming_a_node_is_s9() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["nodes"]["failed"] = json!({"type": "noop"});
    let edges = sg(&mut doc)["edges"].as_array_mut().unwrap();
    edges.push(json!(["step", "failed"]));
    edges.push(json!(["failed", "END"]));
    sg(&mut doc)["on_error"] = json!("failed");
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple("error", "subgraphs.sg_def.on_error", Some("S9"))]
    );
}

#[test]
fn on_error_as_conditional_target_is_s5_then_s10() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["conditional_edges"]["step"] =
        json!({"router_field": "outcome", "mapping": {"good": "ok", "bad": "failed"}});
    sg(&mut doc)["on_error"] = json!("failed");
    let issues = validate_doc(&doc);
    let at = "subgraphs.sg_def.conditional_edges.step.mapping.bad";
    assert_eq!(
        shape(&issues),
        vec![
            triple("error", at, Some("S5")),
            triple("error", at, Some("S10"))
        ]
    );
    assert_eq!(issues[0].message, "target 'failed' not declared (S5)");
}

#[test]
fn success_value_must_be_a_declared_noop() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["exit"]["success_values"] = json!(["ok", "ghost"]);
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.exit.success_values",
            Some("S11")
        )]
    );
    assert!(issues[0].message.contains("'ghost'"));
}

#[test]
fn success_value_colliding_with_node_under_router_field_is_s11() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["exit"] = json!({"router_field": "status", "success_values": ["step"]});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.exit.success_values",
            Some("S11")
        )]
    );
    assert!(issues[0].message.contains("'step'"));
}

#[test]
fn unknown_input_type_is_reported_then_w8() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["inputs"] = json!({"cloud": "NotARealType"});
    let issues = validate_doc(&doc);
    let at = "subgraphs.sg_def.inputs.cloud";
    assert_eq!(
        shape(&issues),
        vec![triple("error", at, None), triple("error", at, Some("W8"))]
    );
    assert!(
        issues[0]
            .message
            .starts_with("unknown type name 'NotARealType' in graph declaration; known types: [")
    );
}

#[test]
fn unbound_known_type_input_is_w8_only() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["inputs"] = json!({"target_pose": "Se3Pose"});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.inputs.target_pose",
            Some("W8")
        )]
    );
    assert!(issues[0].message.contains("call site 'sg'"));
}

#[test]
fn any_and_dict_are_not_registered_types() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["inputs"] = json!({"a": "Any", "b": "dict"});
    doc["nodes"]["sg"]["inputs"] = json!({"a": 1, "b": {}});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![
            triple("error", "subgraphs.sg_def.inputs.a", None),
            triple("error", "subgraphs.sg_def.inputs.b", None)
        ]
    );
}

#[test]
fn tool_registry_warns_only_for_unregistered_tools() {
    let Some(doc) = minimal() else { return };
    let mut without = ToolRegistry::new();
    without.register_fn("robot.open_gripper", |_, _| Ok(json!({})));
    let issues = validate_with(
        &doc,
        &ValidateOptions {
            tool_registry: Some(&without),
            ..Default::default()
        },
    );
    assert_eq!(
        shape(&issues),
        vec![triple("warning", "subgraphs.sg_def.nodes.step", None)]
    );
    assert!(issues[0].message.contains("is not registered"));
    assert!(
        issues[0]
            .message
            .contains("Available tools: robot.open_gripper")
    );

    let mut with = ToolRegistry::new();
    with.register_fn("robot.go_home", |_, _| Ok(json!({})));
    let issues = validate_with(
        &doc,
        &ValidateOptions {
            tool_registry: Some(&with),
            ..Default::default()
        },
    );
    assert_eq!(issues, vec![]);
}

#[test]
fn s4_streaming_must_match_the_skill_contract() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["nodes"]["track_object"] =
        json!({"type": "tool", "tool": "track_object", "streaming": true});
    sg(&mut doc)["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["START", "track_object"]));
    let registry = |streaming| -> SkillRegistry {
        let mut registry = SkillRegistry::new();
        registry
            .insert(SkillBundle::new("track_object").with_streaming(streaming))
            .unwrap();
        registry
    };
    let at = "subgraphs.sg_def.nodes.track_object";
    let non_streaming = registry(false);
    let issues = validate_with(
        &doc,
        &ValidateOptions {
            skill_registry: Some(&non_streaming),
            ..Default::default()
        },
    );
    assert_eq!(shape(&issues), vec![triple("error", at, Some("S4"))]);
    let streaming = registry(true);
    assert_eq!(
        validate_with(
            &doc,
            &ValidateOptions {
                skill_registry: Some(&streaming),
                ..Default::default()
            }
        ),
        vec![]
    );
    sg(&mut doc)["nodes"]["track_object"]["streaming"] = json!(false);
    sg(&mut doc)["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["track_object", "ok"]));
    let issues = validate_with(
        &doc,
        &ValidateOptions {
            skill_registry: Some(&streaming),
            ..Default::default()
        },
    );
    assert_eq!(shape(&issues), vec![triple("error", at, Some("S4"))]);
}

fn with_arm_input(doc: &mut Value) {
    sg(doc)["inputs"] = json!({"arm_id": "int"});
}

fn add_producer(doc: &mut Value) {
    doc["subgraphs"]["prod_def"] = json!({
        "skill": "generic", "inputs": {}, "outputs": {"arm_id": {"$ref": "pick.arm"}},
        "nodes": {"pick": {"type": "tool", "tool": "robot.pick"}, "ok": {"type": "noop"}},
        "edges": [["START", "pick"], ["pick", "ok"], ["ok", "END"]],
        "conditional_edges": {}, "exit": {"router_field": null, "success_values": ["ok"]}
    });
    doc["nodes"]["prod"] = json!({"type": "subgraph", "ref": "prod_def"});
}

#[test]
fn w8_call_site_inputs_satisfy_declared_inputs() {
    let Some(mut doc) = minimal() else { return };
    with_arm_input(&mut doc);
    doc["nodes"]["sg"]["inputs"] = json!({"arm_id": 0});
    assert_eq!(validate_doc(&doc), vec![]);
}

#[test]
fn w8_self_production_does_not_count() {
    let Some(mut doc) = minimal() else { return };
    with_arm_input(&mut doc);
    sg(&mut doc)["outputs"] = json!({"arm_id": {"$ref": "step.arm"}});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.inputs.arm_id",
            Some("W8")
        )]
    );
}

#[test]
fn w8_producer_after_consumer_does_not_count() {
    let Some(mut doc) = minimal() else { return };
    with_arm_input(&mut doc);
    add_producer(&mut doc);
    doc["conditional_edges"]["sg"]["mapping"]["ok"] = json!("prod");
    doc["conditional_edges"]["prod"] = json!({"router_field": "exit", "mapping": {"ok": "done"}});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![triple(
            "error",
            "subgraphs.sg_def.inputs.arm_id",
            Some("W8")
        )]
    );
}

#[test]
fn w8_producer_before_consumer_counts() {
    let Some(mut doc) = minimal() else { return };
    with_arm_input(&mut doc);
    add_producer(&mut doc);
    doc["edges"] = json!([["START", "prod"]]);
    doc["conditional_edges"]["prod"] = json!({"router_field": "exit", "mapping": {"ok": "sg"}});
    assert_eq!(validate_doc(&doc), vec![]);
}

#[test]
fn workflow_level_rules_come_in_reference_order() {
    let Some(mut doc) = minimal() else { return };
    doc["edges"] = json!([["sg", "ghost"]]);
    doc["nodes"]["bad_ref"] = json!({"type": "subgraph", "ref": "missing"});
    doc["conditional_edges"]["nowhere"] = json!({"router_field": "exit", "mapping": {"x": "void"}});
    doc["nodes"]["done"] = json!({"type": "noop"});
    let issues = validate_doc(&doc);
    assert_eq!(
        shape(&issues),
        vec![
            triple("error", "workflow.edges", Some("W2")),
            triple("error", "workflow.edges", Some("W3")),
            triple("error", "workflow.nodes.bad_ref", Some("W7")),
            triple("error", "workflow.conditional_edges.nowhere", Some("W6")),
            triple(
                "error",
                "workflow.conditional_edges.nowhere.mapping.x",
                Some("W6")
            ),
            triple("error", "workflow.nodes.sg", Some("W4")),
            triple("error", "workflow.nodes.done", Some("W4")),
            triple("error", "workflow.nodes.bad_ref", Some("W4")),
            triple("error", "workflow.nodes.done", Some("W5")),
            triple("error", "workflow.nodes.bad_ref", Some("W5")),
            triple("error", "workflow.nodes", None),
        ]
    );
}

#[test]
fn subgraph_ref_rules_s5_s6_s12() {
    let Some(mut doc) = minimal() else { return };
    sg(&mut doc)["inputs"] = json!({"pose": "Pose"});
    doc["nodes"]["sg"]["inputs"] = json!({"pose": {"x": 1}});
    sg(&mut doc)["outputs"] = json!({"o": {"$ref": "ghost.v"}});
    sg(&mut doc)["nodes"]["use"] = json!({"type": "tool", "tool": "t", "inputs": {
        "a": {"$ref": "in"}, "b": {"$ref": "in.nope"}, "c": {"$ref": "in.pose"},
        "d": {"$ref": "in.observation_stream"}, "e": {"$ref": "nothere.x"}, "f": {"$ref": "step.v"}
    }});
    let edges = sg(&mut doc)["edges"].as_array_mut().unwrap();
    edges.push(json!(["START", "use"]));
    edges.push(json!(["use", "ok"]));
    let issues = validate_doc(&doc);
    let node = "subgraphs.sg_def.nodes.use";
    assert_eq!(
        shape(&issues),
        vec![
            triple("error", "subgraphs.sg_def.outputs.o", Some("S6")),
            triple("error", node, Some("S12")),
            triple("error", "subgraphs.sg_def.nodes.use.inputs.a", Some("S5")),
            triple("error", "subgraphs.sg_def.nodes.use.inputs.b", Some("S5")),
            triple("error", "subgraphs.sg_def.nodes.use.inputs.e", Some("S5")),
        ]
    );
    assert!(issues[1].message.contains("START-entry"));
}
