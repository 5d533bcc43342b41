//! A ledger written by an older schema keeps every run, event and execution snapshot when a
//! newer build opens it.

mod common;

use common::{completed, file_store, new_run, run_id, started};
use rusqlite::Connection;
use serde_json::json;
use trellis_ledger::sqlite::LEDGER_PAGE_SIZE;
use trellis_ledger::sqlite::schema::{MIGRATIONS, latest_version, migrate_with};
use trellis_ledger::{Cursor, EventFilter, LogStream, RunEvent, RunStore};

#[test]
fn a_version_1_ledger_is_upgraded_with_its_runs_events_and_snapshots_intact() {
    let dir = tempfile::tempdir().unwrap();

    // A run recorded by the current schema is the reference.
    let reference_path = dir.path().join("reference.sqlite3");
    let reference = file_store(&reference_path);
    reference
        .create_or_get(new_run("run-a", "key-a", json!({"graph": "g"})))
        .unwrap();
    let id = run_id("run-a");
    reference.append(&id, &[RunEvent::RunStarted {}]).unwrap();
    for execution in 1..=40 {
        reference
            .append(&id, &[started(execution, "work")])
            .unwrap();
        reference
            .append(
                &id,
                &[
                    RunEvent::log(Some(execution), LogStream::Output, "working", 0),
                    completed(execution),
                ],
            )
            .unwrap();
    }
    drop(reference);

    // The same rows in a file that only knows schema version 1.
    let old_path = dir.path().join("old.sqlite3");
    let mut old = Connection::open(&old_path).unwrap();
    migrate_with(&mut old, &MIGRATIONS[..1]).unwrap();
    old.execute(
        "ATTACH DATABASE ?1 AS reference",
        [reference_path.to_str().unwrap()],
    )
    .unwrap();
    old.execute_batch(
        "INSERT INTO runs (id, run_id, submission_key, submission_digest, kind, title,
             graph_identity, predecessor, successor, created_at_ms, submission_json, cursor,
             phase, progress_json)
             SELECT r.id, r.run_id, r.submission_key, r.submission_digest, r.kind, r.title,
                 r.graph_identity, r.predecessor, r.successor, r.created_at_ms,
                 r.submission_json, h.cursor, h.phase, h.progress_json
             FROM reference.runs r JOIN reference.run_heads h ON h.run = r.id;
         INSERT INTO run_events (run, sequence, is_log, recorded_at_ms, event_json)
             SELECT run, sequence, is_log, recorded_at_ms, event_json FROM reference.run_events;
         INSERT INTO run_executions (run, execution, snapshot_json)
             SELECT run, execution, snapshot_json FROM reference.run_executions;
         DETACH DATABASE reference;",
    )
    .unwrap();
    drop(old);

    let upgraded = file_store(&old_path);
    let reference = file_store(&reference_path);
    let pragma = |path: &std::path::Path, name: &str| -> i64 {
        Connection::open(path)
            .unwrap()
            .query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
            .unwrap()
    };
    assert_eq!(pragma(&old_path, "user_version"), latest_version());
    // A new ledger takes the smaller page; an existing file keeps SQLite's default it was
    // created with, and works the same.
    assert_eq!(pragma(&reference_path, "page_size"), LEDGER_PAGE_SIZE);
    assert_eq!(pragma(&old_path, "page_size"), 4096);
    assert_eq!(
        upgraded.snapshot(&id).unwrap(),
        reference.snapshot(&id).unwrap()
    );
    for filter in [
        EventFilter::All,
        EventFilter::ExceptLogs,
        EventFilter::LogsOnly,
    ] {
        let read = |store: &trellis_ledger::SqliteStore| {
            store
                .events_after(&id, Cursor::START, 1_000, filter)
                .unwrap()
        };
        let expected = read(&reference);
        assert!(!expected.is_empty());
        assert_eq!(read(&upgraded), expected);
    }
    // The upgraded ledger keeps recording.
    upgraded.append(&id, &[started(41, "more")]).unwrap();
    assert_eq!(upgraded.latest_cursor(&id).unwrap().sequence(), 122);
    // The rebuilt head table still refuses a phase outside the four labels.
    let raw = Connection::open(&old_path).unwrap();
    assert!(
        raw.execute("UPDATE run_heads SET phase = 'paused'", [])
            .is_err()
    );
    raw.execute("UPDATE run_heads SET phase = 'stopping'", [])
        .unwrap();
}
