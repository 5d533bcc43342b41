//! Run admission and every read query of the SQLite ledger.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::admission::{Admission, NewRun, RunRecord};
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::error::cursor_ahead;
use crate::event::{EventFilter, StoredEvent};
use crate::ids::{Phase, RunId, RunKind};
use crate::limits::MAX_EVENTS_PER_PAGE;
use crate::listing::{ListedRun, RunFilter, UnreadableRun};
use crate::snapshot::{RunHead, RunProgress, RunSnapshot};
use crate::sqlite::error::storage_error;
use crate::sqlite::keys::{keys_after, run_keys};
use crate::sqlite::transaction::CachedTransaction;
use crate::stored::{StoredRun, parse_event, parse_execution, to_i64, to_u64};

/// Columns of a run row with its head, in the order [`run_from_row`] reads them.
const RUN_COLUMNS: &str = "runs.id, runs.run_id, runs.submission_key, runs.submission_digest, \
     runs.kind, runs.title, runs.graph_identity, runs.predecessor, runs.successor, \
     runs.created_at_ms, run_heads.cursor, run_heads.progress_json";

/// A run's immutable row joined with its mutable head.
pub(super) const RUN_SOURCE: &str = "runs JOIN run_heads ON run_heads.run = runs.id";

/// A row of [`RUN_COLUMNS`]: the run's columns, then its head's.
fn run_from_row(row: &Row<'_>) -> rusqlite::Result<StoredRun> {
    Ok(StoredRun {
        cursor: row.get(10)?,
        progress_json: row.get(11)?,
        ..run_from_run_columns(row)?
    })
}

/// The first ten columns of [`RUN_COLUMNS`] (the `runs` row alone); the head is left empty
/// for the caller to fill.
fn run_from_run_columns(row: &Row<'_>) -> rusqlite::Result<StoredRun> {
    Ok(StoredRun {
        id: row.get(0)?,
        run_id: row.get(1)?,
        submission_key: row.get(2)?,
        submission_digest: row.get(3)?,
        kind: row.get(4)?,
        title: row.get(5)?,
        graph_identity: row.get(6)?,
        predecessor: row.get(7)?,
        successor: row.get(8)?,
        created_at_ms: row.get(9)?,
        cursor: 0,
        progress_json: String::new(),
    })
}

/// The run row with `run_id` and its head, or `RunNotFound`. Two plain lookups rather than
/// the join: SQLite prepares them in about half the time of the twelve-column join, and
/// nearly every process (each CLI call, each controller) prepares this once. The head's
/// cursor and progress come from one row, so they always agree.
pub(super) fn load_run(conn: &Connection, run_id: &RunId) -> Result<StoredRun, LedgerError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT id, run_id, submission_key, submission_digest, kind, title, graph_identity,
                 predecessor, successor, created_at_ms
             FROM runs WHERE run_id = ?1",
        )
        .map_err(storage_error)?;
    let mut raw = statement
        .query_row([run_id.as_str()], run_from_run_columns)
        .optional()
        .map_err(storage_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?;
    let mut statement = conn
        .prepare_cached("SELECT cursor, progress_json FROM run_heads WHERE run = ?1")
        .map_err(storage_error)?;
    (raw.cursor, raw.progress_json) = statement
        .query_row([raw.id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()
        .map_err(storage_error)?
        .ok_or_else(|| LedgerError::corrupt(format!("run {run_id} has no stored head")))?;
    Ok(raw)
}

fn load_record_where(
    conn: &Connection,
    column: &str,
    value: &str,
) -> Result<Option<RunRecord>, LedgerError> {
    let sql = format!(
        "SELECT {RUN_COLUMNS}, runs.submission_json FROM {RUN_SOURCE} WHERE runs.{column} = ?1"
    );
    let mut statement = conn.prepare_cached(&sql).map_err(storage_error)?;
    let found = statement
        .query_row([value], |row| {
            Ok((run_from_row(row)?, row.get::<_, String>(12)?))
        })
        .optional()
        .map_err(storage_error)?;
    found
        .map(|(raw, submission)| raw.record(Some(&submission)))
        .transpose()
}

pub(super) fn create_or_get(
    conn: &mut Connection,
    run: NewRun,
) -> Result<(RunRecord, Admission), LedgerError> {
    let submission_json = run.validate()?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(storage_error)?;
    if let Some(existing) = load_record_where(&tx, "submission_key", &run.submission_key)? {
        return if existing.submission_digest == run.submission_digest {
            Ok((existing, Admission::Existing))
        } else {
            Err(LedgerError::SubmissionConflict)
        };
    }
    let id_taken: Option<i64> = tx
        .query_row(
            "SELECT id FROM runs WHERE run_id = ?1",
            [run.run_id.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(storage_error)?;
    if id_taken.is_some() {
        return Err(LedgerError::RunIdConflict {
            run_id: run.run_id.to_string(),
        });
    }
    if let Some(predecessor) = &run.predecessor {
        check_predecessor(&tx, predecessor)?;
    }
    let progress =
        serde_json::to_string(&RunProgress::admitted()).map_err(|_| LedgerError::Internal {
            detail: "run progress is not serializable".to_owned(),
        })?;
    tx.execute(
        "INSERT INTO runs (run_id, submission_key, submission_digest, kind, title, graph_identity,
             predecessor, successor, created_at_ms, submission_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9)",
        params![
            run.run_id.as_str(),
            run.submission_key,
            run.submission_digest,
            run.kind.as_str(),
            run.title,
            run.graph_identity,
            run.predecessor.as_ref().map(RunId::as_str),
            to_i64(run.created_at_ms)?,
            submission_json,
        ],
    )
    .map_err(storage_error)?;
    tx.execute(
        "INSERT INTO run_heads (run, cursor, phase, progress_json)
         VALUES (last_insert_rowid(), 0, ?1, ?2)",
        params![Phase::Admitted.as_str(), progress],
    )
    .map_err(storage_error)?;
    if let Some(predecessor) = &run.predecessor {
        tx.execute(
            "UPDATE runs SET successor = ?1 WHERE run_id = ?2",
            [run.run_id.as_str(), predecessor.as_str()],
        )
        .map_err(storage_error)?;
    }
    tx.commit().map_err(storage_error)?;
    let record = RunRecord {
        run_id: run.run_id,
        submission_key: run.submission_key,
        submission_digest: run.submission_digest,
        title: run.title,
        kind: run.kind,
        graph_identity: run.graph_identity,
        submission: run.submission,
        predecessor: run.predecessor,
        successor: None,
        created_at_ms: run.created_at_ms,
    };
    Ok((record, Admission::Created))
}

/// A resumed run's predecessor must exist, be finished, and not be resumed already.
fn check_predecessor(conn: &Connection, predecessor: &RunId) -> Result<(), LedgerError> {
    let found: Option<(String, Option<String>)> = conn
        .query_row(
            &format!(
                "SELECT run_heads.phase, runs.successor FROM {RUN_SOURCE} WHERE runs.run_id = ?1"
            ),
            [predecessor.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(storage_error)?;
    let (phase, successor) = found.ok_or_else(|| LedgerError::run_not_found(predecessor))?;
    if phase != Phase::Finished.as_str() {
        return Err(LedgerError::invalid_run(format!(
            "predecessor {predecessor} is not finished"
        )));
    }
    if let Some(successor) = successor {
        return Err(LedgerError::invalid_run(format!(
            "predecessor {predecessor} was already resumed by {successor}"
        )));
    }
    Ok(())
}

pub(super) fn find_by_key(
    conn: &Connection,
    submission_key: &str,
) -> Result<Option<RunRecord>, LedgerError> {
    load_record_where(conn, "submission_key", submission_key)
}

pub(super) fn record(conn: &Connection, run_id: &RunId) -> Result<RunRecord, LedgerError> {
    load_record_where(conn, "run_id", run_id.as_str())?
        .ok_or_else(|| LedgerError::run_not_found(run_id))
}

pub(super) fn head(conn: &Connection, run_id: &RunId) -> Result<RunHead, LedgerError> {
    load_run(conn, run_id)?.head()
}

pub(super) fn latest_cursor(conn: &Connection, run_id: &RunId) -> Result<Cursor, LedgerError> {
    let sql = format!("SELECT run_heads.cursor FROM {RUN_SOURCE} WHERE runs.run_id = ?1");
    let mut statement = conn.prepare_cached(&sql).map_err(storage_error)?;
    let cursor: i64 = statement
        .query_row([run_id.as_str()], |row| row.get(0))
        .optional()
        .map_err(storage_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?;
    Ok(Cursor::at(to_u64(cursor)?)?)
}

pub(super) fn snapshot(conn: &mut Connection, run_id: &RunId) -> Result<RunSnapshot, LedgerError> {
    let tx = CachedTransaction::read(conn)?;
    let raw = load_run(&tx, run_id)?;
    let head = raw.head()?;
    let mut executions = std::collections::BTreeMap::new();
    // A run that never started an execution (every controller's first look at its run) has
    // no rows to read.
    if head.progress.executions_started > 0 {
        let mut statement = tx
            .prepare_cached(
                "SELECT execution, snapshot_json FROM run_executions
                 WHERE id BETWEEN ?1 AND ?2 ORDER BY id",
            )
            .map_err(storage_error)?;
        let (first, last) = run_keys(raw.id)?;
        let rows = statement
            .query_map([first, last], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(storage_error)?;
        for row in rows {
            let (execution, text) = row.map_err(storage_error)?;
            let execution = to_u64(execution)?;
            executions.insert(execution, parse_execution(run_id, execution, &text)?);
        }
    }
    tx.commit()?;
    Ok(RunSnapshot { head, executions })
}

pub(super) fn list_runs(
    conn: &Connection,
    filter: &RunFilter,
) -> Result<Vec<ListedRun>, LedgerError> {
    if let Some(after) = &filter.after_run {
        load_run(conn, after)?;
    }
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {RUN_SOURCE}
         WHERE (?1 IS NULL OR run_heads.phase = ?1) AND (?2 IS NULL OR runs.kind = ?2)
           AND (?3 IS NULL OR (runs.created_at_ms, runs.run_id) <
                (SELECT created_at_ms, run_id FROM runs WHERE run_id = ?3))
         ORDER BY runs.created_at_ms DESC, runs.run_id DESC LIMIT ?4"
    );
    let mut statement = conn.prepare_cached(&sql).map_err(storage_error)?;
    let limit = to_i64(u64::try_from(filter.effective_limit()).unwrap_or(0))?;
    let mut rows = statement
        .query(params![
            filter.phase.map(Phase::as_str),
            filter.kind.map(RunKind::as_str),
            filter.after_run.as_ref().map(RunId::as_str),
            limit,
        ])
        .map_err(storage_error)?;
    let mut listed = Vec::new();
    while let Some(row) = rows.next().map_err(storage_error)? {
        let head = run_from_row(row)
            .map_err(storage_error)
            .and_then(|raw| raw.head());
        listed.push(match head {
            Ok(head) => Ok(head),
            // A damaged row is reported in its place; a failing database fails the listing.
            Err(error @ LedgerError::Corrupt { .. }) => Err(UnreadableRun {
                name: row_name(row),
                error,
            }),
            Err(other) => return Err(other),
        });
    }
    Ok(listed)
}

/// How a damaged run row is named: its run id when that column is text, else its row number.
fn row_name(row: &Row<'_>) -> String {
    match row.get_ref(1) {
        Ok(ValueRef::Text(text)) => String::from_utf8_lossy(text).into_owned(),
        _ => match row.get_ref(0) {
            Ok(ValueRef::Integer(id)) => format!("in ledger row {id}"),
            _ => "in an unnumbered ledger row".to_owned(),
        },
    }
}

pub(super) fn events_after(
    conn: &mut Connection,
    run_id: &RunId,
    after: Cursor,
    limit: usize,
    filter: EventFilter,
) -> Result<Vec<StoredEvent>, LedgerError> {
    let tx = CachedTransaction::read(conn)?;
    let raw = load_run(&tx, run_id)?;
    let latest = raw.cursor()?;
    if after > latest {
        return Err(cursor_ahead(run_id, after, latest));
    }
    let stream = match filter {
        EventFilter::All => "",
        EventFilter::ExceptLogs => "AND is_log = 0",
        EventFilter::LogsOnly => "AND is_log = 1",
    };
    let sql = format!(
        "SELECT sequence, recorded_at_ms, event_json FROM run_events
         WHERE id BETWEEN ?1 AND ?2 {stream} ORDER BY id LIMIT ?3"
    );
    let limit = to_i64(u64::try_from(limit.min(MAX_EVENTS_PER_PAGE)).unwrap_or(0))?;
    let (first, last) = keys_after(raw.id, after.sequence())?;
    let mut events = Vec::new();
    {
        let mut statement = tx.prepare_cached(&sql).map_err(storage_error)?;
        let rows = statement
            .query_map(params![first, last, limit], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })
            .map_err(storage_error)?;
        for row in rows {
            let (sequence, recorded_at_ms, text) = row.map_err(storage_error)?;
            events.push(parse_event(run_id, sequence, recorded_at_ms, &text)?);
        }
    }
    tx.commit()?;
    Ok(events)
}

pub(super) fn run_contains_bytes(
    conn: &mut Connection,
    run_id: &RunId,
    needle: &[u8],
) -> Result<bool, LedgerError> {
    let tx = conn.transaction().map_err(storage_error)?;
    let raw = load_run(&tx, run_id)?;
    let run = (raw.id, raw.id);
    let keys = run_keys(raw.id)?;
    let queries = [
        ("SELECT * FROM runs WHERE id BETWEEN ?1 AND ?2", run),
        ("SELECT * FROM run_heads WHERE run BETWEEN ?1 AND ?2", run),
        ("SELECT * FROM run_events WHERE id BETWEEN ?1 AND ?2", keys),
        (
            "SELECT * FROM run_executions WHERE id BETWEEN ?1 AND ?2",
            keys,
        ),
    ];
    for (sql, (low, high)) in queries {
        let mut statement = tx.prepare(sql).map_err(storage_error)?;
        let columns = statement.column_count();
        let mut rows = statement.query([low, high]).map_err(storage_error)?;
        while let Some(row) = rows.next().map_err(storage_error)? {
            for column in 0..columns {
                let bytes: &[u8] = match row.get_ref(column).map_err(storage_error)? {
                    ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes,
                    _ => continue,
                };
                if contains(bytes, needle) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// Whether `needle` occurs in `haystack` (an empty needle always does).
pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}
