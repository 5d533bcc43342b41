//! Run admission and every read query of the PostgreSQL ledger. Reads that combine rows are
//! single statements (one snapshot of the database) or run in one REPEATABLE READ transaction.

use std::collections::BTreeMap;

use deadpool_postgres::{GenericClient, Object, Pool};
use tokio_postgres::{IsolationLevel, Row};

use crate::admission::{Admission, NewRun, RunRecord};
use crate::cursor::Cursor;
use crate::error::{LedgerError, cursor_ahead};
use crate::event::{EventFilter, StoredEvent};
use crate::ids::{Phase, RunId, RunKind};
use crate::limits::MAX_EVENTS_PER_PAGE;
use crate::listing::{ListedRun, RunFilter, UnreadableRun};
use crate::postgres::error::{pool_error, server_error, violates};
use crate::postgres::shared::Shared;
use crate::snapshot::{RunHead, RunProgress, RunSnapshot};

use crate::stored::{StoredRun, parse_event, parse_execution, to_i64, to_json_text, to_u64};

/// Columns of a run row with its head, in the order [`stored_run`] reads them.
pub(super) const RUN_COLUMNS: &str = "r.id, r.run_id, r.submission_key, r.submission_digest, \
     r.kind, r.title, r.graph_identity, r.predecessor, r.successor, r.created_at_ms, \
     h.cursor, h.progress_json";

/// A run's immutable row joined with its mutable head.
pub(super) const RUN_SOURCE: &str = "runs r JOIN run_heads h ON h.run = r.id";

/// A pooled connection.
pub(super) async fn connection(shared: &Shared) -> Result<Object, LedgerError> {
    connection_to(&shared.pool).await
}

pub(super) async fn connection_to(pool: &Pool) -> Result<Object, LedgerError> {
    pool.get().await.map_err(pool_error)
}

/// A row starting with [`RUN_COLUMNS`].
pub(super) fn stored_run(row: &Row) -> Result<StoredRun, LedgerError> {
    Ok(StoredRun {
        id: row.try_get(0).map_err(server_error)?,
        run_id: row.try_get(1).map_err(server_error)?,
        submission_key: row.try_get(2).map_err(server_error)?,
        submission_digest: row.try_get(3).map_err(server_error)?,
        kind: row.try_get(4).map_err(server_error)?,
        title: row.try_get(5).map_err(server_error)?,
        graph_identity: row.try_get(6).map_err(server_error)?,
        predecessor: row.try_get(7).map_err(server_error)?,
        successor: row.try_get(8).map_err(server_error)?,
        created_at_ms: row.try_get(9).map_err(server_error)?,
        cursor: row.try_get(10).map_err(server_error)?,
        progress_json: row.try_get(11).map_err(server_error)?,
    })
}

/// The run with `run_id` and its head, or `RunNotFound`.
async fn load_run(client: &impl GenericClient, run_id: &RunId) -> Result<StoredRun, LedgerError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM {RUN_SOURCE} WHERE r.run_id = $1");
    let statement = client.prepare_cached(&sql).await.map_err(server_error)?;
    let row = client
        .query_opt(&statement, &[&run_id.as_str()])
        .await
        .map_err(server_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?;
    stored_run(&row)
}

async fn load_record_where(
    client: &impl GenericClient,
    column: &str,
    value: &str,
) -> Result<Option<RunRecord>, LedgerError> {
    let sql =
        format!("SELECT {RUN_COLUMNS}, r.submission_json FROM {RUN_SOURCE} WHERE r.{column} = $1");
    let statement = client.prepare_cached(&sql).await.map_err(server_error)?;
    let Some(row) = client
        .query_opt(&statement, &[&value])
        .await
        .map_err(server_error)?
    else {
        return Ok(None);
    };
    let submission: String = row.try_get(12).map_err(server_error)?;
    stored_run(&row)?.record(Some(&submission)).map(Some)
}

pub(super) async fn create_or_get(
    shared: &Shared,
    run: NewRun,
    submission_json: String,
) -> Result<(RunRecord, Admission), LedgerError> {
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    // One admission per key at a time, across every process: the key's hash names an
    // advisory lock held until commit (a collision only serializes two keys needlessly).
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&run.submission_key],
    )
    .await
    .map_err(server_error)?;
    if let Some(existing) = load_record_where(&tx, "submission_key", &run.submission_key).await? {
        return if existing.submission_digest == run.submission_digest {
            Ok((existing, Admission::Existing))
        } else {
            Err(LedgerError::SubmissionConflict)
        };
    }
    let id_taken = tx
        .query_opt(
            "SELECT 1 FROM runs WHERE run_id = $1",
            &[&run.run_id.as_str()],
        )
        .await
        .map_err(server_error)?;
    if id_taken.is_some() {
        return Err(LedgerError::RunIdConflict {
            run_id: run.run_id.to_string(),
        });
    }
    if let Some(predecessor) = &run.predecessor {
        check_predecessor(&tx, predecessor).await?;
    }
    let progress = to_json_text(&RunProgress::admitted(), "run progress")?;
    let inserted = tx
        .query_one(
            "INSERT INTO runs (run_id, submission_key, submission_digest, kind, title,
                 graph_identity, predecessor, created_at_ms, submission_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            &[
                &run.run_id.as_str(),
                &run.submission_key,
                &run.submission_digest,
                &run.kind.as_str(),
                &run.title,
                &run.graph_identity,
                &run.predecessor.as_ref().map(RunId::as_str),
                &to_i64(run.created_at_ms)?,
                &submission_json,
            ],
        )
        .await
        .map_err(|error| {
            if violates(&error, "runs_run_id_key") {
                LedgerError::RunIdConflict {
                    run_id: run.run_id.to_string(),
                }
            } else {
                server_error(error)
            }
        })?;
    let id: i64 = inserted.try_get(0).map_err(server_error)?;
    tx.execute(
        "INSERT INTO run_heads (run, cursor, phase, progress_json) VALUES ($1, 0, $2, $3)",
        &[&id, &Phase::Admitted.as_str(), &progress],
    )
    .await
    .map_err(server_error)?;
    if let Some(predecessor) = &run.predecessor {
        tx.execute(
            "UPDATE runs SET successor = $1 WHERE run_id = $2",
            &[&run.run_id.as_str(), &predecessor.as_str()],
        )
        .await
        .map_err(server_error)?;
    }
    tx.commit().await.map_err(server_error)?;
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

/// A resumed run's predecessor must exist, be finished, and not be resumed already; its row
/// stays locked until commit so two resumptions cannot both pass.
async fn check_predecessor(
    client: &impl GenericClient,
    predecessor: &RunId,
) -> Result<(), LedgerError> {
    let found = client
        .query_opt(
            "SELECT h.phase, r.successor FROM runs r JOIN run_heads h ON h.run = r.id
             WHERE r.run_id = $1 FOR UPDATE OF r",
            &[&predecessor.as_str()],
        )
        .await
        .map_err(server_error)?
        .ok_or_else(|| LedgerError::run_not_found(predecessor))?;
    let phase: String = found.try_get(0).map_err(server_error)?;
    let successor: Option<String> = found.try_get(1).map_err(server_error)?;
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

pub(super) async fn find_by_key(
    shared: &Shared,
    submission_key: &str,
) -> Result<Option<RunRecord>, LedgerError> {
    let client = connection(shared).await?;
    load_record_where(&client, "submission_key", submission_key).await
}

pub(super) async fn record(shared: &Shared, run_id: &RunId) -> Result<RunRecord, LedgerError> {
    let client = connection(shared).await?;
    load_record_where(&client, "run_id", run_id.as_str())
        .await?
        .ok_or_else(|| LedgerError::run_not_found(run_id))
}

pub(super) async fn head(shared: &Shared, run_id: &RunId) -> Result<RunHead, LedgerError> {
    let client = connection(shared).await?;
    load_run(&client, run_id).await?.head()
}

pub(super) async fn latest_cursor(shared: &Shared, run_id: &RunId) -> Result<Cursor, LedgerError> {
    let client = connection(shared).await?;
    let statement = client
        .prepare_cached(
            "SELECT h.cursor FROM runs r JOIN run_heads h ON h.run = r.id WHERE r.run_id = $1",
        )
        .await
        .map_err(server_error)?;
    let row = client
        .query_opt(&statement, &[&run_id.as_str()])
        .await
        .map_err(server_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?;
    let cursor: i64 = row.try_get(0).map_err(server_error)?;
    Ok(Cursor::at(to_u64(cursor)?)?)
}

/// The head and every execution row, read in one REPEATABLE READ transaction.
pub(super) async fn snapshot(
    shared: &Shared,
    run_id: &RunId,
) -> Result<(StoredRun, Vec<(i64, String)>), LedgerError> {
    let mut client = connection(shared).await?;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(server_error)?;
    let raw = load_run(&tx, run_id).await?;
    let mut rows = Vec::new();
    if raw.progress()?.executions_started > 0 {
        let statement = tx
            .prepare_cached(
                "SELECT execution, snapshot_json FROM run_executions
                 WHERE run = $1 ORDER BY execution",
            )
            .await
            .map_err(server_error)?;
        for row in tx
            .query(&statement, &[&raw.id])
            .await
            .map_err(server_error)?
        {
            rows.push((
                row.try_get(0).map_err(server_error)?,
                row.try_get(1).map_err(server_error)?,
            ));
        }
    }
    tx.commit().await.map_err(server_error)?;
    Ok((raw, rows))
}

/// Builds the snapshot from what [`snapshot`] read (on the caller's thread: parsing is the
/// costly part and the I/O thread is shared).
pub(super) fn assemble_snapshot(
    run_id: &RunId,
    raw: StoredRun,
    rows: Vec<(i64, String)>,
) -> Result<RunSnapshot, LedgerError> {
    let head = raw.head()?;
    let mut executions = BTreeMap::new();
    for (execution, text) in rows {
        let execution = to_u64(execution)?;
        executions.insert(execution, parse_execution(run_id, execution, &text)?);
    }
    Ok(RunSnapshot { head, executions })
}

pub(super) async fn list_runs(
    shared: &Shared,
    filter: RunFilter,
) -> Result<Vec<ListedRun>, LedgerError> {
    let client = connection(shared).await?;
    if let Some(after) = &filter.after_run {
        load_run(&client, after).await?;
    }
    let sql = format!(
        "SELECT {RUN_COLUMNS} FROM {RUN_SOURCE}
         WHERE ($1::text IS NULL OR h.phase = $1) AND ($2::text IS NULL OR r.kind = $2)
           AND ($3::text IS NULL OR (r.created_at_ms, r.run_id) <
                (SELECT created_at_ms, run_id FROM runs WHERE run_id = $3))
         ORDER BY r.created_at_ms DESC, r.run_id DESC LIMIT $4"
    );
    let statement = client.prepare_cached(&sql).await.map_err(server_error)?;
    let limit = to_i64(u64::try_from(filter.effective_limit()).unwrap_or(0))?;
    let rows = client
        .query(
            &statement,
            &[
                &filter.phase.map(Phase::as_str),
                &filter.kind.map(RunKind::as_str),
                &filter.after_run.as_ref().map(RunId::as_str),
                &limit,
            ],
        )
        .await
        .map_err(server_error)?;
    let mut listed = Vec::with_capacity(rows.len());
    for row in &rows {
        listed.push(match stored_run(row).and_then(|raw| raw.head()) {
            Ok(head) => Ok(head),
            // A damaged row is reported in its place; a failing server fails the listing.
            Err(error @ LedgerError::Corrupt { .. }) => Err(UnreadableRun {
                name: row
                    .try_get::<_, String>(1)
                    .unwrap_or_else(|_| "in an unreadable ledger row".to_owned()),
                error,
            }),
            Err(other) => return Err(other),
        });
    }
    Ok(listed)
}

/// Event rows after `after`, with the run's cursor read by the same statement.
pub(super) async fn events_after(
    shared: &Shared,
    run_id: &RunId,
    after: Cursor,
    limit: usize,
    filter: EventFilter,
) -> Result<Vec<StoredEvent>, LedgerError> {
    let client = connection(shared).await?;
    let stream = match filter {
        EventFilter::All => "",
        EventFilter::ExceptLogs => "AND NOT e.is_log",
        EventFilter::LogsOnly => "AND e.is_log",
    };
    // One statement, so the cursor check and the page see the same committed state; the
    // LEFT JOIN keeps the head row when the page is empty.
    let sql = format!(
        "SELECT h.cursor, e.sequence, e.recorded_at_ms, e.event_json
         FROM runs r JOIN run_heads h ON h.run = r.id
         LEFT JOIN LATERAL (
             SELECT sequence, recorded_at_ms, event_json, is_log FROM run_events e
             WHERE e.run = r.id AND e.sequence > $2 {stream}
             ORDER BY e.sequence LIMIT $3
         ) e ON true
         WHERE r.run_id = $1
         ORDER BY e.sequence"
    );
    let statement = client.prepare_cached(&sql).await.map_err(server_error)?;
    let limit = to_i64(u64::try_from(limit.min(MAX_EVENTS_PER_PAGE)).unwrap_or(0))?;
    let rows = client
        .query(
            &statement,
            &[&run_id.as_str(), &to_i64(after.sequence())?, &limit],
        )
        .await
        .map_err(server_error)?;
    let Some(first) = rows.first() else {
        return Err(LedgerError::run_not_found(run_id));
    };
    let latest: i64 = first.try_get(0).map_err(server_error)?;
    let latest = Cursor::at(to_u64(latest)?)?;
    if after > latest {
        return Err(cursor_ahead(run_id, after, latest));
    }
    let mut events = Vec::with_capacity(rows.len());
    for row in &rows {
        let sequence: Option<i64> = row.try_get(1).map_err(server_error)?;
        let Some(sequence) = sequence else { continue };
        let recorded_at_ms: i64 = row.try_get(2).map_err(server_error)?;
        let text: String = row.try_get(3).map_err(server_error)?;
        events.push(parse_event(run_id, sequence, recorded_at_ms, &text)?);
    }
    Ok(events)
}

pub(super) async fn run_contains_bytes(
    shared: &Shared,
    run_id: &RunId,
    needle: Vec<u8>,
) -> Result<bool, LedgerError> {
    let client = connection(shared).await?;
    // Every text column of the run's rows, compared as UTF-8 bytes, so any byte string
    // (even one that is not valid UTF-8 on its own) is found where it is stored.
    let row = client
        .query_opt(
            "WITH run AS (SELECT id FROM runs WHERE run_id = $1),
                  texts AS (
                      SELECT concat_ws(chr(1), r.run_id, r.submission_key, r.submission_digest,
                                r.kind, r.title, r.graph_identity, r.predecessor, r.successor,
                                r.submission_json) AS t
                      FROM runs r WHERE r.id = (SELECT id FROM run)
                      UNION ALL
                      SELECT concat_ws(chr(1), h.phase, h.progress_json)
                      FROM run_heads h WHERE h.run = (SELECT id FROM run)
                      UNION ALL
                      SELECT e.event_json FROM run_events e WHERE e.run = (SELECT id FROM run)
                      UNION ALL
                      SELECT x.snapshot_json FROM run_executions x
                      WHERE x.run = (SELECT id FROM run)
                  )
             SELECT (SELECT id FROM run),
                    EXISTS (SELECT 1 FROM texts
                            WHERE position($2::bytea IN convert_to(t, 'UTF8')) > 0)",
            &[&run_id.as_str(), &needle],
        )
        .await
        .map_err(server_error)?;
    let row = row.ok_or_else(|| LedgerError::Internal {
        detail: "the scan query returned no row".to_owned(),
    })?;
    let id: Option<i64> = row.try_get(0).map_err(server_error)?;
    if id.is_none() {
        return Err(LedgerError::run_not_found(run_id));
    }
    row.try_get(1).map_err(server_error)
}
