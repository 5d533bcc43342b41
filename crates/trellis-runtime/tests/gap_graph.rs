//! A GaP run read back for drawing through the public surface: its graph comes from the
//! document recorded at admission (so deleting the workflow's folder loses nothing), its
//! input as submitted, and its journaled bodies visit by visit with their outcomes and the
//! cursors that place them on a replay.

use serde_json::{Value, json};
use trellis_runtime::{GapBodyPhase, GapRunRequest, Runtime, RuntimeOptions};

/// `START → make → check → done`: `make` returns 7, `check` fails, routed nowhere.
fn workflow() -> Value {
    json!({
        "version": 3,
        "meta": {},
        "nodes": {
            "make": {"type": "tool", "tool": "stub.const", "inputs": {"value": 7}},
            "check": {"type": "tool", "tool": "stub.fail", "inputs": {"message": "not seven"}},
            "done": {"type": "end", "status": "success"}
        },
        "edges": [["START", "make"], ["make", "check"], ["check", "done"]],
        "conditional_edges": {},
        "subgraphs": {}
    })
}

#[test]
fn a_gap_run_is_drawn_from_the_ledger_after_its_folder_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("flow");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("workflow.json"), workflow().to_string()).unwrap();
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(dir.path().join("home")),
        ..RuntimeOptions::default()
    })
    .expect("the runtime opens");
    let outcome = runtime
        .run_gap(
            GapRunRequest {
                workflow: folder.clone(),
                stub_tools: true,
                title: Some("stubs".into()),
                ..GapRunRequest::default()
            },
            &|_| {},
        )
        .expect("the workflow ran");
    std::fs::remove_dir_all(&folder).unwrap();

    let graph = runtime
        .run_graph(&outcome.run_id)
        .expect("the graph reads without its folder");
    assert_eq!(graph.graph, workflow());
    assert_eq!(graph.input, Some(json!({})));

    let bodies = runtime.gap_bodies(&outcome.run_id).unwrap();
    let phases: Vec<(&str, GapBodyPhase)> =
        bodies.iter().map(|b| (b.node.as_str(), b.phase)).collect();
    assert_eq!(
        phases,
        [
            ("make", GapBodyPhase::Succeeded),
            ("check", GapBodyPhase::Failed)
        ]
    );
    assert_eq!(bodies[0].output, Some(json!({"value": 7})));
    assert!(
        bodies[1]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not seven")),
        "{:?}",
        bodies[1].error
    );
    // Each body started before it settled, and the second after the first settled.
    for body in &bodies {
        let settled = body.settled_cursor.expect("settled");
        assert!(body.started_cursor.sequence() < settled.sequence());
    }
    assert!(bodies[0].settled_cursor.unwrap().sequence() < bodies[1].started_cursor.sequence());
}
