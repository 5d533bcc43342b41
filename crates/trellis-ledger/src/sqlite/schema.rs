//! Versioned schema migrations, tracked in SQLite's `user_version` and applied in order.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::LedgerError;
use crate::sqlite::error::storage_error;

/// Marks a database file as a Trellis ledger (`PRAGMA application_id`, ASCII "TRLS").
pub const APPLICATION_ID: i64 = 0x5452_4c53;

/// One schema step: applying it to version `version - 1` yields `version`.
pub struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

/// Every schema step, oldest first. Never edit a released step; append a new one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: "
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE,
            submission_key TEXT NOT NULL UNIQUE,
            submission_digest TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('graphspec', 'gap')),
            title TEXT NOT NULL,
            graph_identity TEXT,
            predecessor TEXT REFERENCES runs (run_id),
            successor TEXT REFERENCES runs (run_id),
            created_at_ms INTEGER NOT NULL,
            submission_json TEXT NOT NULL,
            cursor INTEGER NOT NULL,
            phase TEXT NOT NULL
                CHECK (phase IN ('admitted', 'running', 'stopping', 'finished')),
            progress_json TEXT NOT NULL
        ) STRICT;
        CREATE INDEX runs_newest_first ON runs (created_at_ms DESC, run_id DESC);
        CREATE TABLE run_events (
            run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            sequence INTEGER NOT NULL,
            is_log INTEGER NOT NULL CHECK (is_log IN (0, 1)),
            recorded_at_ms INTEGER NOT NULL,
            event_json TEXT NOT NULL,
            PRIMARY KEY (run, sequence)
        ) STRICT;
        CREATE INDEX run_events_by_stream ON run_events (run, is_log, sequence);
        CREATE TABLE run_executions (
            run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            execution INTEGER NOT NULL,
            snapshot_json TEXT NOT NULL,
            PRIMARY KEY (run, execution)
        ) STRICT;
    ",
    },
    // What every append rewrites kept small, so that a commit writes a handful of pages:
    // * events and execution snapshots in rowid tables keyed `(run << 32) + number`: a run's
    //   rows are one range of one b-tree and new rows land at its end, where SQLite splits a
    //   full page by starting a new one (composite keys took a second index, or for clustered
    //   tables a three-page rebalance); readers filter `is_log` while scanning the range;
    // * the run's mutable head (cursor, phase, progress) in its own row: beside the submission
    //   (the whole graph, often ~100 kB) every append rewrote the submission's overflow pages.
    Migration {
        version: 2,
        sql: "
        CREATE TABLE run_events_keyed (
            id INTEGER PRIMARY KEY,
            run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            sequence INTEGER NOT NULL,
            is_log INTEGER NOT NULL CHECK (is_log IN (0, 1)),
            recorded_at_ms INTEGER NOT NULL,
            event_json TEXT NOT NULL,
            CHECK (sequence BETWEEN 1 AND 4294967295 AND id = (run << 32) + sequence)
        ) STRICT;
        INSERT INTO run_events_keyed (id, run, sequence, is_log, recorded_at_ms, event_json)
            SELECT (run << 32) + sequence, run, sequence, is_log, recorded_at_ms, event_json
            FROM run_events ORDER BY run, sequence;
        DROP TABLE run_events;
        ALTER TABLE run_events_keyed RENAME TO run_events;
        CREATE TABLE run_executions_keyed (
            id INTEGER PRIMARY KEY,
            run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            execution INTEGER NOT NULL,
            snapshot_json TEXT NOT NULL,
            CHECK (execution BETWEEN 0 AND 4294967295 AND id = (run << 32) + execution)
        ) STRICT;
        INSERT INTO run_executions_keyed (id, run, execution, snapshot_json)
            SELECT (run << 32) + execution, run, execution, snapshot_json
            FROM run_executions ORDER BY run, execution;
        DROP TABLE run_executions;
        ALTER TABLE run_executions_keyed RENAME TO run_executions;
        CREATE TABLE run_heads (
            run INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            cursor INTEGER NOT NULL,
            phase TEXT NOT NULL
                CHECK (phase IN ('admitted', 'running', 'stopping', 'finished')),
            progress_json TEXT NOT NULL
        ) STRICT;
        INSERT INTO run_heads (run, cursor, phase, progress_json)
            SELECT id, cursor, phase, progress_json FROM runs;
        ALTER TABLE runs DROP COLUMN progress_json;
        ALTER TABLE runs DROP COLUMN phase;
        ALTER TABLE runs DROP COLUMN cursor;
    ",
    },
    // The phase column's CHECK as comparisons instead of `IN (…)`: SQLite evaluated the IN
    // list by building a temporary index on every UPDATE that set the column (about 20 µs
    // instead of 15 µs for the whole statement), so an append could not afford to write the
    // phase with the cursor and progress. The table is one small row per run.
    Migration {
        version: 3,
        sql: "
        CREATE TABLE run_heads_checked (
            run INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            cursor INTEGER NOT NULL,
            phase TEXT NOT NULL CHECK (
                phase = 'admitted' OR phase = 'running'
                OR phase = 'stopping' OR phase = 'finished'
            ),
            progress_json TEXT NOT NULL
        ) STRICT;
        INSERT INTO run_heads_checked (run, cursor, phase, progress_json)
            SELECT run, cursor, phase, progress_json FROM run_heads ORDER BY run;
        DROP TABLE run_heads;
        ALTER TABLE run_heads_checked RENAME TO run_heads;
    ",
    },
    // GaP runs record their node bodies (`gap_node_started`, `gap_node_settled`) so they can
    // be resumed. The rows are unchanged, but a build from before these kinds would read such
    // a run as corrupt; raising the version makes it refuse the whole ledger up front instead.
    Migration {
        version: 4,
        sql: "",
    },
];

/// The schema version this build writes.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Brings the database to the latest version, refusing files that are newer or foreign.
pub fn migrate(conn: &mut Connection) -> Result<(), LedgerError> {
    migrate_with(conn, MIGRATIONS)
}

/// `migrate` over an explicit step list (tests use short lists to check ordering).
pub fn migrate_with(conn: &mut Connection, steps: &[Migration]) -> Result<(), LedgerError> {
    let supported = steps.last().map_or(0, |m| m.version);
    // Cheap check first, without the write lock: most opens find an up-to-date file. One
    // read transaction, so a migration committed meanwhile is seen whole or not at all.
    let read = conn.transaction().map_err(storage_error)?;
    let current = check_version(&read, supported)?;
    read.commit().map_err(storage_error)?;
    if current == supported {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage_error)?;
    // Another process may have migrated while we waited for the lock.
    let current = check_version(&tx, supported)?;
    if current == 0 {
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(storage_error)?;
    }
    for step in steps.iter().filter(|m| m.version > current) {
        tx.execute_batch(step.sql).map_err(storage_error)?;
        tx.pragma_update(None, "user_version", step.version)
            .map_err(storage_error)?;
    }
    tx.commit().map_err(storage_error)
}

/// The file's schema version, after checking it belongs to Trellis and is not too new.
fn check_version(conn: &Connection, supported: i64) -> Result<i64, LedgerError> {
    let application: i64 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(storage_error)?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(storage_error)?;
    if application != 0 && application != APPLICATION_ID {
        return Err(LedgerError::NotALedger {
            detail: "the database belongs to another application".to_owned(),
        });
    }
    if application == 0 {
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .map_err(storage_error)?;
        if objects > 0 || version != 0 {
            return Err(LedgerError::NotALedger {
                detail: "the database already holds tables of another application".to_owned(),
            });
        }
    }
    if version > supported {
        return Err(LedgerError::SchemaTooNew {
            found: version,
            supported,
        });
    }
    if version < 0 {
        return Err(LedgerError::corrupt("negative schema version"));
    }
    Ok(version)
}
