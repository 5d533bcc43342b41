//! The database file: creation and permissions, migrations, WAL, foreign, newer, corrupt and
//! locked files.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{file_store, new_run, run_id};
use rusqlite::Connection;
use serde_json::json;
use trellis_ledger::sqlite::schema::{APPLICATION_ID, Migration, latest_version, migrate_with};
use trellis_ledger::{
    Durability, LedgerError, RunEvent, RunFilter, RunStore, SqliteOptions, SqliteStore,
};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn ledger_with_one_run(path: &Path) {
    let store = file_store(path);
    store
        .create_or_get(new_run("run-a", "key", json!({"pad": "x".repeat(20_000)})))
        .unwrap();
    let logs: Vec<RunEvent> = (0..200)
        .map(|i| {
            RunEvent::log(
                None,
                trellis_ledger::LogStream::System,
                &format!("line {i}"),
                0,
            )
        })
        .collect();
    store.append(&run_id("run-a"), &logs).unwrap();
}

#[test]
fn a_new_ledger_is_private_migrated_and_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/trellis/ledger.sqlite3");
    let store = file_store(&path);
    store
        .create_or_get(new_run("run-a", "key", json!({})))
        .unwrap();
    assert_eq!(mode(&dir.path().join("state")), 0o700);
    assert_eq!(mode(&dir.path().join("state/trellis")), 0o700);
    assert_eq!(mode(&path), 0o600);
    let wal = path.with_file_name("ledger.sqlite3-wal");
    assert!(wal.exists());
    assert_eq!(mode(&wal), 0o600);

    let raw = Connection::open(&path).unwrap();
    let journal: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let application: i64 = raw
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
    assert_eq!(version, latest_version());
    assert_eq!(application, APPLICATION_ID);
}

#[test]
fn an_empty_existing_file_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    std::fs::write(&path, b"").unwrap();
    let store = file_store(&path);
    store
        .create_or_get(new_run("run-a", "key", json!({})))
        .unwrap();
    drop(store);
    // Reopening an up-to-date ledger changes nothing.
    let store = file_store(&path);
    assert!(store.find_by_key("key").unwrap().is_some());
}

#[test]
fn migrations_apply_in_order_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(dir.path().join("m.sqlite3")).unwrap();
    let v1 = Migration {
        version: 1,
        sql: "CREATE TABLE things (id INTEGER PRIMARY KEY) STRICT;",
    };
    let v2 = Migration {
        version: 2,
        sql: "ALTER TABLE things ADD COLUMN name TEXT;",
    };
    migrate_with(&mut conn, std::slice::from_ref(&v1)).unwrap();
    let version = |c: &Connection| -> i64 {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&conn), 1);
    // v1 must not run again (it would fail: the table exists); v2 must run.
    migrate_with(&mut conn, &[v1, v2]).unwrap();
    assert_eq!(version(&conn), 2);
    conn.execute("INSERT INTO things (name) VALUES ('x')", [])
        .unwrap();
}

#[test]
fn a_ledger_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    drop(file_store(&path));
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert_eq!(
        error,
        LedgerError::SchemaTooNew {
            found: 99,
            supported: latest_version()
        }
    );
    assert!(error.to_string().contains("upgrade"));
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    std::fs::write(&path, "this is a text file, not a database\n".repeat(200)).unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(error, LedgerError::NotALedger { .. }), "{error}");
    assert_eq!(error.code(), "ledger.not_a_ledger");
    // The file was left alone.
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("this is a text file")
    );
}

#[test]
fn another_applications_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite3");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT);")
        .unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(error, LedgerError::NotALedger { .. }), "{error}");
}

#[test]
fn directories_and_symlinks_are_refused_as_ledger_paths() {
    let dir = tempfile::tempdir().unwrap();
    assert!(SqliteStore::open(dir.path()).is_err());
    let target = dir.path().join("real.sqlite3");
    drop(file_store(&target));
    let link = dir.path().join("link.sqlite3");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let error = SqliteStore::open(&link).unwrap_err();
    assert!(
        matches!(error, LedgerError::StateDirectory { .. }),
        "{error}"
    );
}

/// Overwrites `len` bytes at `offset` with a repeating garbage pattern.
fn scribble(path: &Path, offset: usize, len: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let end = (offset + len).min(bytes.len());
    for (i, byte) in bytes[offset..end].iter_mut().enumerate() {
        *byte = (i as u8).wrapping_mul(37).wrapping_add(11);
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_corrupt_schema_page_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    ledger_with_one_run(&path);
    scribble(&path, 100, 3000);
    let error = SqliteStore::open(&path)
        .and_then(|store| store.head(&run_id("run-a")))
        .unwrap_err();
    assert!(
        matches!(
            error,
            LedgerError::Corrupt { .. } | LedgerError::NotALedger { .. }
        ),
        "{error}"
    );
}

#[test]
fn corrupt_data_pages_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    ledger_with_one_run(&path);
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    scribble(&path, 4096, size - 4096);
    let outcome = SqliteStore::open(&path).and_then(|store| {
        store.head(&run_id("run-a"))?;
        store
            .events_after(
                &run_id("run-a"),
                trellis_ledger::Cursor::START,
                1000,
                Default::default(),
            )
            .map(|_| ())
    });
    let error = outcome.unwrap_err();
    assert!(matches!(error, LedgerError::Corrupt { .. }), "{error}");
    assert_eq!(error.code(), "ledger.corrupt");
}

#[test]
fn a_held_write_lock_makes_writes_fail_busy_after_the_timeout_but_reads_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    ledger_with_one_run(&path);
    let store = SqliteStore::open_with(
        &path,
        SqliteOptions {
            busy_timeout: Duration::from_millis(150),
            durability: Durability::Normal,
        },
    )
    .unwrap();
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let begun = Instant::now();
    let error = store
        .append(&run_id("run-a"), &[RunEvent::RunStarted {}])
        .unwrap_err();
    assert_eq!(error, LedgerError::Busy);
    assert_eq!(error.code(), "ledger.busy");
    assert!(begun.elapsed() >= Duration::from_millis(150));
    // WAL readers are never blocked by a writer.
    assert_eq!(
        store.latest_cursor(&run_id("run-a")).unwrap().sequence(),
        200
    );
    holder.execute_batch("ROLLBACK").unwrap();
    store
        .append(&run_id("run-a"), &[RunEvent::RunStarted {}])
        .unwrap();
}

#[test]
fn a_write_waits_for_a_lock_released_within_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    ledger_with_one_run(&path);
    let store = file_store(&path);
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        holder.execute_batch("COMMIT").unwrap();
    });
    let cursor = store
        .append(&run_id("run-a"), &[RunEvent::RunStarted {}])
        .unwrap();
    assert_eq!(cursor.sequence(), 201);
    release.join().unwrap();
}

/// Issue 19 #15: one run row the ledger cannot read is listed in its place, naming the run,
/// and every other run is still listed.
#[test]
fn a_damaged_run_row_is_listed_as_unreadable_in_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite3");
    let store = file_store(&path);
    for (i, id) in ["run-a", "run-b", "run-c"].into_iter().enumerate() {
        let run = new_run(id, &format!("key-{id}"), json!({})).with_created_at_ms(1000 + i as u64);
        store.create_or_get(run).unwrap();
    }
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE run_heads SET progress_json = '{' \
         WHERE run = (SELECT id FROM runs WHERE run_id = 'run-b')",
        [],
    )
    .unwrap();

    let listed = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].as_ref().unwrap().run_id.as_str(), "run-c");
    let damaged = listed[1].as_ref().unwrap_err();
    assert_eq!(damaged.name, "run-b");
    assert_eq!(damaged.error.code(), "ledger.corrupt");
    assert!(damaged.to_string().contains("run run-b: "), "{damaged}");
    assert_eq!(listed[2].as_ref().unwrap().run_id.as_str(), "run-a");
}
