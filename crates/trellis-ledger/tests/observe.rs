//! Observation projections against the reference shapes, execution references and the
//! canary scan helper.

#[macro_use]
mod common;

use std::path::PathBuf;

use common::{completed, new_run, started, store_with_run, succeeded};
use serde_json::{Value, json};
use trellis_graph::conformance::require;
use trellis_ledger::observe::{
    StatusTracker, execution_ref, log_view, resolve_execution_ref, status_view,
};
use trellis_ledger::testing::scan_for;
use trellis_ledger::{Cursor, EventFilter, LogStream, RunEvent, RunStore, TerminalResult};

fn observation_vectors() -> Option<PathBuf> {
    require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|dir| dir.join("openengine-v1/native_v2_observation"))
}

fn read(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Replaces every `execution` string with a placeholder, since references are opaque.
fn without_execution_refs(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                *item = if key == "execution" && item.is_string() {
                    json!("<ref>")
                } else {
                    without_execution_refs(item.take())
                };
            }
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                *item = without_execution_refs(item.take());
            }
        }
        _ => {}
    }
    value
}

fn two_verifiers_running(
    ledger: &common::TestLedger,
) -> (Box<dyn RunStore>, trellis_ledger::RunId) {
    let store = ledger.open();
    let mut run = new_run("run-1", "key", json!({}));
    run.title = "Repair checkout flow".to_owned();
    run.submission_digest = run.compute_digest();
    let (record, _) = store.create_or_get(run).unwrap();
    store
        .append(
            &record.run_id,
            &[
                RunEvent::RunStarted {},
                started(1, "verify-a"),
                started(2, "verify-b"),
            ],
        )
        .unwrap();
    (store, record.run_id)
}

backend_tests! {
    fn status_matches_the_reference_shape(ledger) {
        let (store, run) = two_verifiers_running(ledger);
        let status = serde_json::to_value(status_view(&store.head(&run).unwrap())).unwrap();
        assert_eq!(status["runId"], "run-1");
        assert_eq!(status["title"], "Repair checkout flow");
        assert_eq!(status["atCursor"], "c1:3");
        assert_eq!(
            status["status"]["activeExecutions"][0]["execution"],
            execution_ref(&run, 1)
        );
        if let Some(dir) = observation_vectors() {
            let reference = read(dir.join("status.json"));
            assert_eq!(
                without_execution_refs(status["status"].clone()),
                without_execution_refs(reference["status"].clone())
            );
        }
        store.request_force_stop(&run).unwrap();
        let stopping = serde_json::to_value(status_view(&store.head(&run).unwrap())).unwrap();
        if let Some(dir) = observation_vectors() {
            let reference = read(dir.join("force.json"));
            assert_eq!(
                without_execution_refs(stopping["status"].clone()),
                without_execution_refs(reference["result"]["status"].clone())
            );
        }
    }

    fn admitted_and_finished_statuses_carry_only_their_fields(ledger) {
        let (store, run) = store_with_run(ledger);
        let admitted = serde_json::to_value(status_view(&store.head(&run).unwrap())).unwrap();
        assert_eq!(admitted["status"], json!({"phase": "admitted"}));
        let output =
            json!({"kind": "verification_receipt", "passed": true, "summary": "checkout repaired"});
        store
            .append(
                &run,
                &[
                    RunEvent::RunStarted {},
                    RunEvent::Terminal {
                        result: TerminalResult::Succeeded { output },
                    },
                ],
            )
            .unwrap();
        let finished = serde_json::to_value(status_view(&store.head(&run).unwrap())).unwrap();
        // The last watch line carries the same finished status (the reference's shape).
        let mut tracker = StatusTracker::new(run.clone(), String::new());
        let events = store
            .events_after(&run, Cursor::START, 100, EventFilter::All)
            .unwrap();
        let last = events.iter().filter_map(|e| tracker.observe(e)).last();
        let last = serde_json::to_value(last.expect("watch lines")).unwrap();
        assert_eq!(last["status"], finished["status"]);
        if let Some(dir) = observation_vectors() {
            let reference = read(dir.join("watch.json"));
            assert_eq!(finished["status"], reference["event"]["status"]);
        }
    }

    fn watch_lines_follow_status_changes_and_skip_logs(ledger) {
        let (store, run) = store_with_run(ledger);
        store
            .append(
                &run,
                &[
                    RunEvent::RunStarted {},
                    started(1, "build"),
                    RunEvent::log(Some(1), LogStream::Output, "compiling", 1),
                    completed(1),
                    succeeded(),
                ],
            )
            .unwrap();
        // Resume watching after the dispatch: the tracker rebuilds the status at c1:2.
        let mut tracker = StatusTracker::at(&*store, &run, Cursor::parse("c1:2").unwrap()).unwrap();
        let at_two = serde_json::to_value(tracker.status()).unwrap();
        assert_eq!(at_two, json!({"phase": "running"}));
        assert_eq!(
            serde_json::to_value(tracker.counts()).unwrap(),
            json!({"active": 1, "settled": 0})
        );
        let tail = store
            .events_after(&run, tracker.cursor(), 100, EventFilter::All)
            .unwrap();
        let lines: Vec<Value> = tail
            .iter()
            .filter_map(|event| tracker.observe(event))
            .map(|line| serde_json::to_value(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "the log event produces no watch line");
        assert_eq!(lines[0]["cursor"], "c1:4");
        assert_eq!(lines[0]["event"], "node_completed");
        assert_eq!(lines[0]["status"], json!({"phase": "running"}));
        assert_eq!(lines[0]["counts"], json!({"active": 0, "settled": 1}));
        assert_eq!(lines[1]["status"]["phase"], "finished");
        assert_eq!(lines[1]["counts"], json!({"active": 0, "settled": 1}));
        assert_eq!(lines[1]["runId"], run.as_str());
    }

    fn log_lines_match_the_reference_shape(ledger) {
        let (store, run) = two_verifiers_running(ledger);
        store
            .append(
                &run,
                &[
                    RunEvent::log(Some(2), LogStream::Output, "historical output", 0),
                    RunEvent::log(None, LogStream::System, "controller ready", 0),
                ],
            )
            .unwrap();
        let logs = store
            .events_after(&run, Cursor::START, 10, EventFilter::LogsOnly)
            .unwrap();
        let first = serde_json::to_value(log_view(&run, &logs[0]).unwrap()).unwrap();
        assert_eq!(first["execution"], execution_ref(&run, 2));
        if let Some(dir) = observation_vectors() {
            let mut reference = read(dir.join("logs.json"))["event"].clone();
            reference.as_object_mut().unwrap().remove("subscriptionId");
            reference["cursor"] = json!("c1:4");
            assert_eq!(
                without_execution_refs(first),
                without_execution_refs(reference)
            );
        }
        let run_wide = serde_json::to_value(log_view(&run, &logs[1]).unwrap()).unwrap();
        assert!(run_wide.get("execution").is_none());
        assert_eq!(
            run_wide["record"],
            json!({"level": "debug", "target": "trellis", "message": "controller ready"})
        );
    }

    fn execution_refs_are_opaque_stable_and_resolvable(ledger) {
        let (store, run) = two_verifiers_running(ledger);
        let reference = execution_ref(&run, 2);
        assert!(reference.starts_with("ex-"));
        assert_eq!(reference.len(), 3 + 64);
        assert_eq!(reference, execution_ref(&run, 2));
        assert_ne!(reference, execution_ref(&run, 1));
        let snapshot = store.snapshot(&run).unwrap();
        assert_eq!(resolve_execution_ref(&snapshot, &reference), Some(2));
        assert_eq!(resolve_execution_ref(&snapshot, "ex-00"), None);
    }

    fn scan_for_finds_bytes_in_submission_events_and_snapshot_only_of_that_run(ledger) {
        let store = ledger.open();
        let (a, _) = store
            .create_or_get(new_run("run-a", "key-a", json!({"note": "SUBMITTED-MARK"})))
            .unwrap();
        let (b, _) = store
            .create_or_get(new_run("run-b", "key-b", json!({})))
            .unwrap();
        store
            .append(
                &a.run_id,
                &[
                    RunEvent::RunStarted {},
                    RunEvent::log(None, LogStream::Output, "EVENT-MARK", 0),
                ],
            )
            .unwrap();
        let mut with_input = started(1, "n");
        if let RunEvent::NodeStarted { input, .. } = &mut with_input {
            *input = json!({"secretish": "INPUT-MARK"});
        }
        store.append(&a.run_id, &[with_input]).unwrap();
        for mark in ["SUBMITTED-MARK", "EVENT-MARK", "INPUT-MARK"] {
            assert!(scan_for(&*store, &a.run_id, mark).unwrap(), "{mark}");
            assert!(
                !scan_for(&*store, &b.run_id, mark).unwrap(),
                "{mark} leaked into run-b"
            );
        }
        assert!(!scan_for(&*store, &a.run_id, "CANARY-never-stored").unwrap());
    }
}

#[test]
fn file_scan_sees_every_byte_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::file_store(&dir.path().join("ledger.sqlite3"));
    store
        .create_or_get(new_run("run-a", "key-a", json!({"x": "FILE-MARK"})))
        .unwrap();
    assert!(store.file_contains(b"FILE-MARK").unwrap());
    assert!(!store.file_contains(b"CANARY-never-stored").unwrap());
}
