//! What one append writes stays small whatever the size of the run's submission: the
//! write-ahead log grows by a few pages per commit, never by the graph the run carries.

mod common;

use common::{completed, file_store, new_run, run_id, started};
use serde_json::json;
use trellis_ledger::sqlite::LEDGER_PAGE_SIZE;
use trellis_ledger::{RunEvent, RunStore};

/// A WAL frame: a 24-byte header and one page.
const PAGE_FRAME_BYTES: u64 = LEDGER_PAGE_SIZE as u64 + 24;

#[test]
fn an_append_writes_a_few_pages_even_beside_a_large_submission() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let wal = path.with_file_name("ledger.sqlite3-wal");
    let store = file_store(&path);
    // About the size of the software-change template with its prompts.
    let graph = "g".repeat(100_000);
    store
        .create_or_get(new_run("big", "key", json!({"graph": graph})))
        .unwrap();
    let id = run_id("big");
    store.append(&id, &[RunEvent::RunStarted {}]).unwrap();

    let before = std::fs::metadata(&wal).unwrap().len();
    const APPENDS: u64 = 80;
    for pair in 0..APPENDS / 2 {
        // Two branches start together and settle together, so the run's progress (its active
        // executions) changes size from one commit to the next, as it does in real runs.
        let (left, right) = (2 * pair + 1, 2 * pair + 2);
        store
            .append(&id, &[started(left, "left"), started(right, "right")])
            .unwrap();
        store
            .append(&id, &[completed(left), completed(right)])
            .unwrap();
    }
    let after = std::fs::metadata(&wal).unwrap().len();
    let frames_per_append = (after - before) as f64 / PAGE_FRAME_BYTES as f64 / APPENDS as f64;
    // Head, event and execution pages, plus the occasional page split.
    assert!(
        frames_per_append <= 4.0,
        "{frames_per_append:.1} pages written per append (at most 4 expected)"
    );
}
