//! Running a skill bundle's subgraph: the canonical script comes from the bundle, imports under
//! `gap_skills.skills.<bundle>.scripts`, reads its prompt with `load_prompt`, and calls a tool of
//! the bundle's `tools.py`.

mod common;

use common::fixtures;
use serde_json::json;
use std::sync::Arc;
use trellis_gap::{
    ExecuteOptions, NullObserver, SkillRegistry, ToolRegistry, execute, parse_workflow,
};

#[test]
fn a_bundle_subgraph_runs_its_canonical_script_under_the_bundle_package() {
    let mut skills = SkillRegistry::new();
    skills.load_dir(&fixtures().join("bundles")).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register_bundle_tools(&skills).unwrap();
    assert!(tools.contains("greeter.shout"));
    let document = json!({
        "version": 3,
        "nodes": {"greet": {"type": "subgraph", "ref": "greet_sg"},
                  "done": {"type": "end", "status": "success"},
                  "abort": {"type": "end", "status": "failure"}},
        "edges": [["START", "greet"]],
        "conditional_edges": {"greet": {"router_field": "exit", "mapping": {"greeted": "done", "failed": "abort"}}},
        "subgraphs": {"greet_sg": {
            "skill": "greeter", "inputs": {}, "outputs": {"text": {"$ref": "say.text"}, "module": {"$ref": "say.module"}},
            "nodes": {"say": {"type": "script", "script": "scripts/say.py", "inputs": {"who": "arm"}},
                      "greeted": {"type": "noop"}},
            "edges": [["START", "say"], ["say", "greeted"], ["greeted", "END"]],
            "exit": {"router_field": null, "success_values": ["greeted"]}, "on_error": "failed"}}
    });
    // The workflow directory has no scripts: the bundle's canonical script runs.
    let dir = tempfile::tempdir().unwrap();
    let workflow = parse_workflow(&document, dir.path().to_path_buf()).unwrap();
    let options = ExecuteOptions {
        tool_registry: Arc::new(tools),
        skill_registry: Arc::new(skills),
        ..ExecuteOptions::default()
    };
    let result = execute(&workflow, options, &NullObserver);
    assert!(result.is_success(), "{result:?}");
    let outputs = &result.outputs["greet_sg"];
    assert_eq!(outputs["text"], json!("HELLO ARM!"));
    assert_eq!(
        outputs["module"],
        json!("gap_skills.skills.greeter.scripts.say")
    );
}
