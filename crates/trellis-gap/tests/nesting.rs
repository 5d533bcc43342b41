//! Issue 19 #4: subgraphs that reference each other (self, cycle, thousands deep) are rejected
//! by the validator with a rule id and the cycle path, and never overflow a stack; legal deep
//! nesting runs.

use serde_json::{Value, json};
use std::path::PathBuf;
use trellis_gap::{
    ExecuteOptions, Issue, MAX_SUBGRAPH_NESTING, NullObserver, ValidateOptions, execute,
    parse_workflow, validate,
};

/// A top-level call of `sg_0`, where `sg_i` calls `sg_{i+1}` and the last one only exits.
fn chain(depth: usize) -> Value {
    let mut subgraphs = serde_json::Map::new();
    for level in 0..depth {
        let mut nodes = json!({"ok": {"type": "noop"}});
        let mut edges = vec![json!(["ok", "END"])];
        if level + 1 < depth {
            nodes["inner"] = json!({"type": "subgraph", "ref": format!("sg_{}", level + 1)});
            edges.push(json!(["START", "inner"]));
            edges.push(json!(["inner", "ok"]));
        } else {
            edges.push(json!(["START", "ok"]));
        }
        subgraphs.insert(
            format!("sg_{level}"),
            json!({"skill": "generic", "inputs": {}, "outputs": {}, "nodes": nodes, "edges": edges,
                   "exit": {"router_field": null, "success_values": ["ok"]}}),
        );
    }
    json!({
        "version": 3,
        "nodes": {"call": {"type": "subgraph", "ref": "sg_0"}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "call"]],
        "conditional_edges": {"call": {"router_field": "exit", "mapping": {"ok": "done"}}},
        "subgraphs": subgraphs
    })
}

fn issues_of(document: &Value) -> Vec<Issue> {
    let workflow = parse_workflow(document, PathBuf::from(".")).expect("loads");
    validate(&workflow, &ValidateOptions::default())
}

#[test]
fn a_subgraph_containing_itself_is_a_w9_cycle() {
    let mut document = chain(1);
    let sg = &mut document["subgraphs"]["sg_0"];
    sg["nodes"]["again"] = json!({"type": "subgraph", "ref": "sg_0"});
    sg["edges"] = json!([["START", "again"], ["again", "ok"], ["ok", "END"]]);
    let issues = issues_of(&document);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].node_id, "subgraphs.sg_0.nodes.again");
    assert_eq!(
        issues[0].message,
        "subgraph node 'again' references 'sg_0', closing the subgraph cycle sg_0 → sg_0; \
         a subgraph cannot contain itself (W9)"
    );
    assert_eq!(issues[0].rule(), Some("W9"));
}

#[test]
fn a_cycle_through_three_subgraphs_names_its_path_once() {
    let mut document = chain(3);
    let last = &mut document["subgraphs"]["sg_2"];
    last["nodes"]["back"] = json!({"type": "subgraph", "ref": "sg_0"});
    last["edges"] = json!([["START", "back"], ["back", "ok"], ["ok", "END"]]);
    let issues = issues_of(&document);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].node_id, "subgraphs.sg_2.nodes.back");
    assert!(
        issues[0]
            .message
            .contains("closing the subgraph cycle sg_0 → sg_1 → sg_2 → sg_0;"),
        "{}",
        issues[0].message
    );
}

#[test]
fn a_chain_thousands_deep_is_rejected_and_never_run() {
    let document = chain(1930);
    let issues = issues_of(&document);
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].node_id, "subgraphs.sg_0");
    assert_eq!(
        issues[0].message,
        format!(
            "subgraph 'sg_0' nests subgraph calls 1930 levels deep; at most {MAX_SUBGRAPH_NESTING} levels can run (W10)"
        )
    );
    let workflow = parse_workflow(&document, PathBuf::from(".")).unwrap();
    let result = execute(&workflow, ExecuteOptions::default(), &NullObserver);
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("Graph validation failed (1 issues)")),
        "{result:?}"
    );
}

#[test]
fn a_self_cycle_run_fails_validation_instead_of_overflowing() {
    let mut document = chain(1);
    let sg = &mut document["subgraphs"]["sg_0"];
    sg["nodes"]["again"] = json!({"type": "subgraph", "ref": "sg_0"});
    sg["edges"] = json!([["START", "again"], ["again", "ok"], ["ok", "END"]]);
    let workflow = parse_workflow(&document, PathBuf::from(".")).unwrap();
    let result = execute(&workflow, ExecuteOptions::default(), &NullObserver);
    assert!(
        result.error.as_deref().is_some_and(|e| e.contains("(W9)")),
        "{result:?}"
    );
}

#[test]
fn the_deepest_legal_chain_validates_and_runs_on_a_small_stack() {
    let document = chain(MAX_SUBGRAPH_NESTING);
    assert_eq!(issues_of(&document), vec![]);
    let too_deep = chain(MAX_SUBGRAPH_NESTING + 1);
    assert_eq!(issues_of(&too_deep).len(), 1);
    // Run on a thread with a deliberately small stack: nesting must not depend on it.
    let handle = std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            let workflow = parse_workflow(&document, PathBuf::from(".")).unwrap();
            execute(&workflow, ExecuteOptions::default(), &NullObserver)
        })
        .unwrap();
    let result = handle.join().expect("no stack overflow");
    assert!(result.is_success(), "{result:?}");
    assert_eq!(result.end_node.as_deref(), Some("done"));
    assert_eq!(result.outputs.len(), MAX_SUBGRAPH_NESTING);
}
