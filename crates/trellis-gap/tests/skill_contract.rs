//! Skill bundles: S4 and SK1–SK4 with the reference's exact issues and order, the exit
//! reconciliation of `--strict`, and the example graphs against a registry built for them.

mod common;

use common::{conformance_gap_dir, fixtures};
use serde_json::{Value, json};
use std::path::Path;
use trellis_gap::{
    Issue, PythonConfig, PythonIntrospector, Severity, SkillBundle, SkillRegistry, ValidateOptions,
    load_workflow, validate,
};

const BUNDLE: &str = "test-mating-sk";
const SKILL_MD: &str = r#"---
name: test-mating-sk
description: Execute a supplied mating plan for a held object.
metadata: {category: testing, tags: [fixture]}
gap:
  allowed_tools: [robot.get_ee_pose]
  exit_conditions:
    seated: The plan completed.
    blocked: A waypoint was refused.
  required_inputs: {plan: dict}
  canonical_scripts:
    - execute: scripts/execute.py
  streaming: false
---

# test-mating-sk
"#;
const SCRIPT: &str = r#"from typing import Any, TypedDict


class Out(TypedDict):
    final_pose: dict[str, Any]


def run(ctx, plan: dict[str, Any], retries: int = 1) -> Out:
    return {"final_pose": {}}
"#;

/// A scratch registry root holding the one bundle, and the loaded registry.
fn registry() -> (tempfile::TempDir, SkillRegistry) {
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("skills").join(BUNDLE);
    std::fs::create_dir_all(bundle.join("scripts")).unwrap();
    std::fs::write(bundle.join("SKILL.md"), SKILL_MD).unwrap();
    std::fs::write(bundle.join("scripts/execute.py"), SCRIPT).unwrap();
    let mut registry = SkillRegistry::new();
    registry.load_dir(root.path()).unwrap();
    (root, registry)
}

struct Shape<'a> {
    success: &'a [&'a str],
    on_error: &'a str,
    inputs: Value,
    script: &'a str,
    outputs: Value,
    router_field: Option<&'a str>,
}

impl Default for Shape<'_> {
    fn default() -> Self {
        Shape {
            success: &["seated"],
            on_error: "blocked",
            inputs: json!({"plan": {}}),
            script: "scripts/execute.py",
            outputs: json!({"final_pose": {"$ref": "execute.final_pose"}}),
            router_field: None,
        }
    }
}

fn workflow(shape: &Shape<'_>) -> Value {
    let mut nodes =
        json!({"execute": {"type": "script", "script": shape.script, "inputs": shape.inputs}});
    let edges = if shape.router_field.is_none() {
        let mut edges = vec![
            json!(["START", "execute"]),
            json!(["execute", shape.success[0]]),
        ];
        for value in shape.success {
            nodes[*value] = json!({"type": "noop"});
            edges.push(json!([value, "END"]));
        }
        edges
    } else {
        vec![json!(["START", "execute"]), json!(["execute", "END"])]
    };
    let mut mapping = serde_json::Map::new();
    for value in shape.success {
        mapping.insert(value.to_string(), json!("done"));
    }
    mapping.insert(shape.on_error.to_string(), json!("abort"));
    json!({
        "version": 3, "meta": {},
        "nodes": {"mate": {"type": "subgraph", "ref": "mate_sg"},
                  "done": {"type": "end", "status": "success"},
                  "abort": {"type": "end", "status": "failure"}},
        "edges": [["START", "mate"]],
        "conditional_edges": {"mate": {"router_field": "exit", "mapping": mapping}},
        "subgraphs": {"mate_sg": {
            "skill": BUNDLE, "inputs": {}, "outputs": shape.outputs, "nodes": nodes, "edges": edges,
            "conditional_edges": {},
            "exit": {"router_field": shape.router_field, "success_values": shape.success},
            "on_error": shape.on_error}}
    })
}

/// Validates `document` written into `dir` with the registry and a Python introspector.
fn check(dir: &Path, document: &Value, registry: &SkillRegistry, strict: bool) -> Vec<Issue> {
    std::fs::write(dir.join("workflow.json"), document.to_string()).unwrap();
    let workflow = load_workflow(dir).unwrap();
    let introspector = PythonIntrospector::new(PythonConfig::from_env());
    validate(
        &workflow,
        &ValidateOptions {
            skill_registry: Some(registry),
            script_introspector: Some(&introspector),
            reconcile_exits: strict,
            ..ValidateOptions::default()
        },
    )
}

/// Issues without the "could not introspect schema" warnings of scripts not beside the graph.
fn contract_issues(issues: Vec<Issue>) -> Vec<(Severity, String, String)> {
    issues
        .into_iter()
        .filter(|i| !i.message.starts_with("could not introspect schema"))
        .map(|i| (i.severity, i.node_id, i.message))
        .collect()
}

fn error(at: &str, message: &str) -> (Severity, String, String) {
    (Severity::Error, at.to_string(), message.to_string())
}

fn warning(at: &str, message: &str) -> (Severity, String, String) {
    (Severity::Warning, at.to_string(), message.to_string())
}

#[test]
fn a_well_wired_bundle_subgraph_is_clean_with_the_script_only_in_the_bundle() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    let issues = check(dir.path(), &workflow(&Shape::default()), &registry, true);
    // The only issue: the script is not beside the graph, so its schema cannot be read there.
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].severity, Severity::Warning);
    assert!(
        issues[0]
            .message
            .starts_with("could not introspect schema: script file not found")
    );
}

#[test]
fn sk3_missing_and_unaccepted_inputs_are_errors_in_that_order() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    let missing = Shape {
        inputs: json!({"target": {}}),
        ..Shape::default()
    };
    let at = "subgraphs.mate_sg.nodes.execute.inputs";
    assert_eq!(
        contract_issues(check(dir.path(), &workflow(&missing), &registry, false)),
        vec![
            error(
                at,
                "node runs 'test-mating-sk''s canonical script 'execute.py' but does not bind its required input(s) ['plan'] (run() requires ['plan']) (SK3)"
            ),
            error(
                at,
                "node binds ['target'], which 'test-mating-sk''s canonical script 'execute.py' does not accept (run() accepts ['plan', 'retries']) (SK3)"
            ),
        ]
    );
    let optional_left_out = Shape::default();
    assert_eq!(
        contract_issues(check(
            dir.path(),
            &workflow(&optional_left_out),
            &registry,
            false
        )),
        vec![]
    );
}

#[test]
fn sk1_returned_exit_is_an_error_terminal_name_and_on_error_are_warnings() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    let by_field = Shape {
        success: &["done"],
        router_field: Some("status"),
        ..Shape::default()
    };
    assert_eq!(
        contract_issues(check(dir.path(), &workflow(&by_field), &registry, false)),
        vec![error(
            "subgraphs.mate_sg.exit.success_values",
            "success value 'done' is not an exit skill 'test-mating-sk' declares (exit_conditions: ['blocked', 'seated']) (SK1)"
        )]
    );
    let by_node = Shape {
        success: &["done"],
        on_error: "errored",
        ..Shape::default()
    };
    assert_eq!(
        contract_issues(check(dir.path(), &workflow(&by_node), &registry, false)),
        vec![
            warning(
                "subgraphs.mate_sg.exit.success_values",
                "success value 'done' is not an exit skill 'test-mating-sk' declares (exit_conditions: ['blocked', 'seated']); a terminal node named outside the bundle's vocabulary, which the parent's mapping must route (SK1)"
            ),
            warning(
                "subgraphs.mate_sg.on_error",
                "on_error='errored' is not an exit skill 'test-mating-sk' declares (exit_conditions: ['blocked', 'seated']); the parent's mapping must route it (SK1)"
            ),
        ]
    );
}

#[test]
fn sk2_a_label_without_a_canonical_script_node_is_an_error() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(
        dir.path().join("scripts/own.py"),
        "def run(ctx, plan: dict) -> None:\n    return None\n",
    )
    .unwrap();
    let own = Shape {
        script: "scripts/own.py",
        outputs: json!({}),
        ..Shape::default()
    };
    assert_eq!(
        contract_issues(check(dir.path(), &workflow(&own), &registry, false)),
        vec![error(
            "subgraphs.mate_sg",
            "subgraph names skill 'test-mating-sk' but no script node runs one of its canonical scripts (['execute.py']) (SK2)"
        )]
    );
}

#[test]
fn sk4_an_output_naming_an_unreturned_field_is_an_error() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    let shape = Shape {
        outputs: json!({"pose": {"$ref": "execute.pose"}}),
        ..Shape::default()
    };
    assert_eq!(
        contract_issues(check(dir.path(), &workflow(&shape), &registry, false)),
        vec![error(
            "subgraphs.mate_sg.outputs.pose",
            "output binding 'execute.pose' names 'pose', which 'test-mating-sk''s canonical script 'execute.py' does not return (returns ['final_pose']) (SK4)"
        )]
    );
}

#[test]
fn a_script_beside_the_graph_is_the_contract_that_binds() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    std::fs::write(
        dir.path().join("scripts/execute.py"),
        "from typing import TypedDict\n\nclass Out(TypedDict):\n    pose: dict\n\n\
         def run(ctx, target: dict) -> Out:\n    return {'pose': {}}\n",
    )
    .unwrap();
    let local = Shape {
        inputs: json!({"target": {}}),
        outputs: json!({"pose": {"$ref": "execute.pose"}}),
        ..Shape::default()
    };
    assert_eq!(
        check(dir.path(), &workflow(&local), &registry, false),
        vec![]
    );
    let bundle_shaped = Shape::default();
    let issues = contract_issues(check(
        dir.path(),
        &workflow(&bundle_shaped),
        &registry,
        false,
    ));
    let rules: Vec<&str> = issues.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(issues.len(), 3, "{rules:#?}");
    assert!(rules[0].contains("required input(s) ['target']") && rules[0].ends_with("(SK3)"));
    assert!(rules[1].starts_with("node binds ['plan']") && rules[1].ends_with("(SK3)"));
    assert!(rules[2].contains("names 'final_pose'") && rules[2].ends_with("(SK4)"));
}

#[test]
fn a_generic_subgraph_gets_no_contract_check() {
    let (_root, registry) = registry();
    let dir = tempfile::tempdir().unwrap();
    let mut document = workflow(&Shape {
        success: &["done"],
        inputs: json!({}),
        ..Shape::default()
    });
    document["subgraphs"]["mate_sg"]["skill"] = json!("generic");
    let issues = contract_issues(check(dir.path(), &document, &registry, true));
    assert_eq!(issues, vec![]);
}

#[test]
fn strict_reconciles_exits_and_orders_every_rule_family() {
    let (_root, mut registry) = registry();
    registry
        .insert(SkillBundle::new("track_object").with_streaming(true))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut document = workflow(&Shape {
        on_error: "errored",
        inputs: json!({}),
        outputs: json!({"pose": {"$ref": "execute.pose"}}),
        ..Shape::default()
    });
    // A tool node of a streaming bundle that does not stream: S4 comes first.
    let sg = &mut document["subgraphs"]["mate_sg"];
    sg["nodes"]["track"] = json!({"type": "tool", "tool": "track_object"});
    sg["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["execute", "track"]));
    sg["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["track", "seated"]));
    let issues = contract_issues(check(dir.path(), &document, &registry, true));
    assert_eq!(
        issues,
        vec![
            error(
                "subgraphs.mate_sg.nodes.track",
                "skill 'track_object''s contract has streaming=true but the node does not declare streaming=true (S4)"
            ),
            error(
                "subgraphs.mate_sg.exit",
                "missing exit condition 'blocked' declared in test-mating-sk.exit_conditions"
            ),
            error(
                "subgraphs.mate_sg.exit",
                "unexpected exit condition 'errored' not in test-mating-sk.exit_conditions"
            ),
            warning(
                "subgraphs.mate_sg.on_error",
                "on_error='errored' is not an exit skill 'test-mating-sk' declares (exit_conditions: ['blocked', 'seated']); the parent's mapping must route it (SK1)"
            ),
            error(
                "subgraphs.mate_sg.nodes.execute.inputs",
                "node runs 'test-mating-sk''s canonical script 'execute.py' but does not bind its required input(s) ['plan'] (run() requires ['plan']) (SK3)"
            ),
            error(
                "subgraphs.mate_sg.outputs.pose",
                "output binding 'execute.pose' names 'pose', which 'test-mating-sk''s canonical script 'execute.py' does not return (returns ['final_pose']) (SK4)"
            ),
        ]
    );
    // Without --strict the reconciliation errors are gone and nothing else changes.
    let relaxed = contract_issues(check(dir.path(), &document, &registry, false));
    assert_eq!(relaxed.len(), 4);
    assert!(
        relaxed
            .iter()
            .all(|(_, _, m)| !m.contains("exit condition '"))
    );
}

#[test]
fn s4_streaming_node_against_a_non_streaming_bundle() {
    let (_root, mut registry) = registry();
    registry.insert(SkillBundle::new("probe")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut document = workflow(&Shape::default());
    let sg = &mut document["subgraphs"]["mate_sg"];
    sg["nodes"]["probe"] = json!({"type": "tool", "tool": "probe", "streaming": true});
    sg["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!(["START", "probe"]));
    assert_eq!(
        contract_issues(check(dir.path(), &document, &registry, false)),
        vec![error(
            "subgraphs.mate_sg.nodes.probe",
            "node has streaming=true but skill 'probe''s contract has streaming=false (S4)"
        )]
    );
}

#[test]
fn example_graphs_validate_clean_with_and_without_their_skill_registry() {
    let Some(dir) = conformance_gap_dir() else {
        return;
    };
    let mut registry = SkillRegistry::new();
    registry.load_dir(&fixtures().join("skills")).unwrap();
    assert_eq!(registry.len(), 15);
    let introspector = PythonIntrospector::new(PythonConfig::from_env());
    for name in [
        "grocery_packing.json",
        "steered_policy_graph_loop.json",
        "tape_handover_yam.json",
    ] {
        let workflow = load_workflow(&dir.join(name)).unwrap();
        assert_eq!(
            validate(&workflow, &ValidateOptions::default()),
            vec![],
            "{name}"
        );
        let with_registry = validate(
            &workflow,
            &ValidateOptions {
                skill_registry: Some(&registry),
                script_introspector: Some(&introspector),
                ..ValidateOptions::default()
            },
        );
        // Scripts are not beside the example graphs, so only their schema warnings remain.
        let others: Vec<&Issue> = with_registry
            .iter()
            .filter(|i| {
                !i.message
                    .starts_with("could not introspect schema: script file not found")
            })
            .collect();
        assert_eq!(others, Vec::<&Issue>::new(), "{name}");
    }
}

#[test]
fn registry_layouts_and_bad_bundles() {
    // One folder per skill, no tools/ or skills/ root.
    let root = tempfile::tempdir().unwrap();
    let bundle = root.path().join("alpha");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(
        bundle.join("SKILL.md"),
        "---\nname: alpha\ndescription: a\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.path().join("_ignored")).unwrap();
    let mut registry = SkillRegistry::new();
    registry.load_dir(root.path()).unwrap();
    assert!(registry.contains("alpha"));
    // A declared canonical script that is missing is refused with the bundle's path.
    std::fs::write(
        bundle.join("SKILL.md"),
        "---\nname: alpha\ndescription: a\ngap:\n  canonical_scripts: {run: scripts/run.py}\n---\n",
    )
    .unwrap();
    let err = SkillRegistry::new()
        .load_dir(root.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("canonical script 'run' is declared at scripts/run.py"),
        "{err}"
    );
    // The same bundle twice is a collision.
    let mut twice = SkillRegistry::new();
    twice.insert(SkillBundle::new("x")).unwrap();
    assert!(
        twice
            .insert(SkillBundle::new("x"))
            .unwrap_err()
            .to_string()
            .contains("collision")
    );
}
