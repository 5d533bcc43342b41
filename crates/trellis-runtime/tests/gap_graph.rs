//! A GaP run read back for drawing through the public surface: its graph comes from the
//! document recorded at admission (so deleting the workflow's folder loses nothing), its
//! input as submitted, and its journaled bodies visit by visit with their outcomes and the
//! cursors that place them on a replay; and where it ended, kept in the ledger.

use serde_json::{Value, json};
use trellis_ledger::{
    Cursor, EventFilter, NewRun, RunEvent, RunId, RunKind, RunStore, SqliteStore, TerminalResult,
};
use trellis_runtime::{
    GapBodyPhase, GapEnd, GapExitStatus, GapRunRequest, Runtime, RuntimeOptions,
};

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

/// Runs `document` from a folder of its own with the built-in stub tools, then deletes the
/// folder; the runtime and the run's id.
fn run_and_forget(dir: &std::path::Path, document: &Value) -> (Runtime, RunId) {
    let folder = dir.join("flow");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("workflow.json"), document.to_string()).unwrap();
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(dir.join("home")),
        ..RuntimeOptions::default()
    })
    .expect("the runtime opens");
    let outcome = runtime
        .run_gap(
            GapRunRequest {
                workflow: folder.clone(),
                stub_tools: true,
                ..GapRunRequest::default()
            },
            &|_| {},
        )
        .expect("the workflow ran");
    std::fs::remove_dir_all(&folder).unwrap();
    (runtime, outcome.run_id)
}

/// The run's events as its ledger holds them, logs left out.
fn recorded(dir: &std::path::Path, run_id: &RunId) -> Vec<RunEvent> {
    let store = SqliteStore::open(dir.join("home/ledger.sqlite3")).unwrap();
    store
        .events_after(run_id, Cursor::START, 1000, EventFilter::ExceptLogs)
        .unwrap()
        .into_iter()
        .map(|stored| stored.event)
        .collect()
}

#[test]
fn a_gap_run_that_reaches_a_failure_end_records_that_end() {
    let dir = tempfile::tempdir().unwrap();
    let document = json!({
        "version": 3,
        "meta": {},
        "nodes": {
            "make": {"type": "tool", "tool": "stub.const", "inputs": {"value": 7}},
            "gave_up": {"type": "end", "status": "failure"},
            "done": {"type": "end", "status": "success"}
        },
        "edges": [["START", "make"], ["make", "gave_up"]],
        "conditional_edges": {},
        "subgraphs": {}
    });
    let (runtime, run_id) = run_and_forget(dir.path(), &document);

    // The ledger keeps the end right before the terminal, which only says `workflow_failed`.
    let events = recorded(dir.path(), &run_id);
    let [.., ended, RunEvent::Terminal { result }] = events.as_slice() else {
        panic!("no terminal event: {events:?}");
    };
    assert_eq!(
        result,
        &TerminalResult::Failed {
            reason: "workflow_failed".into()
        }
    );
    assert_eq!(
        ended,
        &RunEvent::GapEvent {
            payload: json!({"event": "run_finished", "result": {
                "exit_status": "failure", "end_node": "gave_up", "failed_node": null}})
        }
    );

    // The run API says where it ended.
    let status = runtime.status(&run_id).unwrap();
    assert_eq!(
        status.gap_end,
        Some(GapEnd {
            exit_status: Some(GapExitStatus::Failure),
            end_node: Some("gave_up".into()),
            failed_node: None,
        })
    );
    let wire = serde_json::to_value(&status).unwrap();
    assert_eq!(
        wire["gapEnd"],
        json!({"exitStatus": "failure", "endNode": "gave_up"})
    );
}

#[test]
fn a_gap_run_ended_by_a_failing_node_records_that_node() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, run_id) = run_and_forget(dir.path(), &workflow());
    let status = runtime.status(&run_id).unwrap();
    assert_eq!(
        status.gap_end,
        Some(GapEnd {
            exit_status: None,
            end_node: None,
            failed_node: Some("check".into()),
        })
    );
}

#[test]
fn a_gap_run_recorded_without_its_end_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(dir.path().join("home")),
        ..RuntimeOptions::default()
    })
    .expect("the runtime opens");
    // A run as an older Trellis recorded it: the terminal, and no `run_finished` before it.
    let store = SqliteStore::open(dir.path().join("home/ledger.sqlite3")).unwrap();
    let run_id = RunId::generate();
    store
        .create_or_get(NewRun::new(
            run_id.clone(),
            "older",
            "older",
            RunKind::Gap,
            json!({}),
        ))
        .unwrap();
    store
        .append(
            &run_id,
            &[
                RunEvent::RunStarted {},
                RunEvent::GapEvent {
                    payload: json!({"event": "node_started", "node_id": "make", "node_type": "tool", "visit": 0}),
                },
                RunEvent::Terminal {
                    result: TerminalResult::Failed {
                        reason: "workflow_failed".into(),
                    },
                },
            ],
        )
        .unwrap();
    let status = runtime.status(&run_id).expect("an older run still reads");
    assert_eq!(status.gap_end, None);
    assert!(
        serde_json::to_value(&status)
            .unwrap()
            .get("gapEnd")
            .is_none()
    );
}
