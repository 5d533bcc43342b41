//! `command.<name>@N` workers: admitted by the built-in registry without instructions, each
//! reference polymorphic over the contract its nodes declare.

use serde_json::{Value, json};
use trellis_graph::{GraphSpec, JsonPath};
use trellis_verify::{Verification, verify_builtin};

fn step(name: &str, worker: &str, output: Value) -> Value {
    json!({"kind":"step","name":name,"worker":worker,"input":{"kind":"null"},"output":output,
           "inputBindings":[],"writeBindings":[],"attempts":1})
}

fn graph(children: Vec<Value>) -> GraphSpec {
    let mut children = children;
    children.push(json!({"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}));
    GraphSpec::parse(
        &json!({"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},
                "policy":{"policy":"p@1","default":"deny"},
                "root":{"kind":"seq","name":"root","state":{"kind":"null"},"promotedStatePaths":[],
                        "children":children}}),
        &JsonPath::root(),
    )
    .unwrap()
}

#[test]
fn command_workers_need_no_instructions() {
    let g = graph(vec![
        step("lint", "command.lint@1", json!({"kind":"null"})),
        step("tests", "command.tests@1", json!({"kind":"integer"})),
    ]);
    assert!(matches!(verify_builtin(&g), Verification::Verified(_)));
}

#[test]
fn one_command_reference_keeps_one_contract() {
    let g = graph(vec![
        step("a", "command.check@1", json!({"kind":"null"})),
        step("b", "command.check@1", json!({"kind":"integer"})),
    ]);
    let Verification::Rejected(diagnostics) = verify_builtin(&g) else {
        panic!("expected a rejection");
    };
    assert!(
        diagnostics[0]
            .message
            .contains("reused with inconsistent executable declarations")
    );
}

#[test]
fn unknown_references_are_still_not_found() {
    let g = graph(vec![step("x", "acme.lint@1", json!({"kind":"null"}))]);
    let Verification::Rejected(diagnostics) = verify_builtin(&g) else {
        panic!("expected a rejection");
    };
    assert_eq!(
        diagnostics[0].message,
        "worker descriptor not found: acme.lint@1"
    );
}
