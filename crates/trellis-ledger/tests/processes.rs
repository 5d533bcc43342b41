//! Several processes on one ledger file: concurrent identical submissions yield one run per
//! key, and concurrent appends to one run get distinct consecutive sequences.
//!
//! The parent test re-runs this test binary as child processes (selected by environment
//! variables), so no extra binary is needed. The first test runs on both backends.

#[macro_use]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{CHILD_LEDGER_ENV, TestLedger, file_store, new_run, run_id};
use serde_json::json;
use trellis_ledger::{Admission, Cursor, EventFilter, LogStream, RunEvent, RunFilter, RunStore};

const CHILD_GO_DIR: &str = "TRELLIS_LEDGER_TEST_CHILD_GO_DIR";
const CHILD_TAG: &str = "TRELLIS_LEDGER_TEST_CHILD_TAG";
const KEYS: usize = 40;
const LOGS_PER_CHILD: usize = 60;

/// Waits for the parent's start signal so both children hit the database together.
fn wait_for_go(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("go").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Child mode: does nothing unless started by the parent test below.
#[test]
fn child_submitter() {
    let Some(ledger) = TestLedger::from_child_env() else {
        return;
    };
    let tag = std::env::var(CHILD_TAG).unwrap();
    let store = ledger.open();
    wait_for_go(Path::new(&std::env::var_os(CHILD_GO_DIR).unwrap()));
    for k in 0..KEYS {
        let run = new_run(&format!("{tag}-{k}"), &format!("key-{k}"), json!({"k": k}));
        let (record, admission) = store.create_or_get(run).unwrap();
        println!(
            "RESULT {k} {} {}",
            record.run_id,
            admission == Admission::Created
        );
    }
    for i in 0..LOGS_PER_CHILD {
        let line = RunEvent::log(None, LogStream::System, &format!("{tag} {i}"), 0);
        store.append(&run_id("shared"), &[line]).unwrap();
    }
}

backend_tests! {
    fn two_processes_share_one_ledger_without_duplicates_or_gaps(ledger) {
        let dir = tempfile::tempdir().unwrap();
        let store = ledger.open();
        store
            .create_or_get(new_run("shared", "shared-key", json!({})))
            .unwrap();
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = ["p0", "p1"]
            .iter()
            .map(|tag| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "child_submitter",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env(CHILD_LEDGER_ENV, ledger.child_env())
                    .env(CHILD_GO_DIR, dir.path())
                    .env(CHILD_TAG, tag)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        std::fs::write(dir.path().join("go"), b"").unwrap();

        let mut by_key: Vec<Vec<(String, bool)>> = vec![Vec::new(); KEYS];
        for child in children {
            let output = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "child failed: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            // The harness may print its own text before the first line on the same line.
            let results = stdout
                .lines()
                .filter_map(|l| l.find("RESULT ").map(|at| &l[at + "RESULT ".len()..]));
            for line in results {
                let parts: Vec<&str> = line.split(' ').collect();
                let key: usize = parts[0].parse().unwrap();
                by_key[key].push((parts[1].to_owned(), parts[2] == "true"));
            }
        }
        for (key, results) in by_key.iter().enumerate() {
            assert_eq!(results.len(), 2, "key {key}: {results:?}");
            assert_eq!(results[0].0, results[1].0, "key {key} got two runs");
            assert_eq!(results.iter().filter(|(_, created)| *created).count(), 1);
        }
        let listed = store
            .list_runs(&RunFilter {
                limit: 1000,
                ..RunFilter::default()
            })
            .unwrap();
        assert_eq!(listed.len(), KEYS + 1);

        let events = store
            .events_after(&run_id("shared"), Cursor::START, 1000, EventFilter::All)
            .unwrap();
        let sequences: Vec<u64> = events.iter().map(|e| e.cursor.sequence()).collect();
        let expected: Vec<u64> = (1..=(2 * LOGS_PER_CHILD) as u64).collect();
        assert_eq!(sequences, expected);
    }
}

const CHILD_DEFAULT: &str = "TRELLIS_LEDGER_TEST_CHILD_DEFAULT";

/// Child mode: opens the default ledger (the parent sets `TRELLIS_HOME`) and admits a run.
#[test]
fn child_default_opener() {
    if std::env::var_os(CHILD_DEFAULT).is_none() {
        return;
    }
    let store = trellis_ledger::SqliteStore::open_default().unwrap();
    store
        .create_or_get(new_run("default-run", "default-key", json!({})))
        .unwrap();
}

#[test]
fn open_default_uses_trellis_home_and_keeps_it_private() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("trellis-home");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_default_opener", "--test-threads=1"])
        .env(CHILD_DEFAULT, "1")
        .env("TRELLIS_HOME", &home)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let path = home.join("ledger.sqlite3");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home), 0o700);
    assert_eq!(mode(&path), 0o600);
    let store = file_store(&path);
    assert!(store.find_by_key("default-key").unwrap().is_some());
}

const CHILD_FRESH: &str = "TRELLIS_LEDGER_TEST_CHILD_FRESH";

/// Child mode: on the parent's signal, opens a ledger file that nobody has created yet.
#[test]
fn child_fresh_opener() {
    let Some(path) = std::env::var_os(CHILD_FRESH) else {
        return;
    };
    let path = std::path::PathBuf::from(path);
    // Spin rather than sleep, so the children start within microseconds of each other.
    let go = path.parent().unwrap().join("go");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !go.exists() && Instant::now() < deadline {
        std::hint::spin_loop();
    }
    if let Err(error) = trellis_ledger::SqliteStore::open(&path) {
        println!("OPEN FAILED: {error}");
        std::process::exit(1);
    }
}

#[test]
fn processes_creating_a_ledger_at_the_same_moment_all_open_it() {
    // Switching a new file to WAL fails at once with "busy" while another process does the
    // same; every opener must wait its turn instead. Many fresh files, to meet the race.
    let exe = std::env::current_exe().unwrap();
    for round in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite3");
        let children: Vec<_> = (0..4)
            .map(|_| {
                Command::new(&exe)
                    .args(["--exact", "child_fresh_opener", "--nocapture"])
                    .args(["--test-threads=1"])
                    .env(CHILD_FRESH, &path)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        std::fs::write(dir.path().join("go"), b"").unwrap();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
    }
}
