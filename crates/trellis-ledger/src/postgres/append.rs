//! Appending events: lock the run's head row, read the executions the batch names, validate
//! every event in memory, then write events, executions and head in one transaction.
//!
//! The head row lock (`SELECT … FOR UPDATE`) serializes appenders of one run across every
//! process and host; appends to different runs never wait for each other. All the rows the
//! batch touches are read in one statement before validation, so a batch costs the same
//! handful of round trips however many events it carries, and the writes are pipelined.

use std::collections::{BTreeMap, BTreeSet};

use deadpool_postgres::GenericClient;

use crate::apply::{ExecutionTable, apply_event};
use crate::clock::now_ms;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::RunEvent;
use crate::ids::RunId;
use crate::postgres::error::server_error;
use crate::postgres::notify::NOTIFY_CHANNEL;
use crate::postgres::runs::connection;
use crate::postgres::shared::Shared;
use crate::snapshot::ExecutionSnapshot;
use crate::stored::{parse_execution, parse_kind, stored_cursor, to_i64, to_json_text, to_u64};

/// The executions a batch may read or change: every one it names, loaded up front.
struct LoadedExecutions {
    /// Stored snapshots of the named executions that exist (and those the batch started).
    rows: BTreeMap<u64, ExecutionSnapshot>,
    /// Every execution number whose stored state is known here, present or not.
    known: BTreeSet<u64>,
    started: BTreeSet<u64>,
    modified: BTreeSet<u64>,
}

impl LoadedExecutions {
    fn check_known(&self, execution: u64) -> Result<(), LedgerError> {
        if self.known.contains(&execution) {
            Ok(())
        } else {
            // An event that names an execution `named_executions` does not list: a bug here,
            // never a reason to guess.
            Err(LedgerError::Internal {
                detail: format!("execution {execution} was not loaded for this append"),
            })
        }
    }
}

impl ExecutionTable for LoadedExecutions {
    fn contains(&mut self, execution: u64) -> Result<bool, LedgerError> {
        self.check_known(execution)?;
        Ok(self.rows.contains_key(&execution))
    }

    fn insert(&mut self, execution: u64, snapshot: ExecutionSnapshot) -> Result<(), LedgerError> {
        self.check_known(execution)?;
        self.rows.insert(execution, snapshot);
        self.started.insert(execution);
        Ok(())
    }

    fn modify(
        &mut self,
        execution: u64,
        change: &mut dyn FnMut(&mut ExecutionSnapshot),
    ) -> Result<(), LedgerError> {
        self.check_known(execution)?;
        let snapshot = self.rows.get_mut(&execution).ok_or_else(|| {
            LedgerError::corrupt(format!("execution {execution} has no stored row"))
        })?;
        change(snapshot);
        if !self.started.contains(&execution) {
            self.modified.insert(execution);
        }
        Ok(())
    }
}

/// Every execution an event may look up or change.
fn named_executions(event: &RunEvent) -> Option<u64> {
    match event {
        RunEvent::WorkerProcess { execution, .. } => Some(*execution),
        other => other.execution(),
    }
}

/// Appends `events` (normalized, with their JSON text) to `run_id`, optionally only if the
/// run is still at `expected`.
pub(super) async fn append(
    shared: &Shared,
    run_id: &RunId,
    expected: Option<Cursor>,
    fence: Option<i64>,
    events: Vec<(RunEvent, String)>,
) -> Result<Cursor, LedgerError> {
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    let head = tx
        .query_opt(
            &tx.prepare_cached(
                "SELECT r.id, r.kind, h.cursor, h.progress_json
                 FROM runs r JOIN run_heads h ON h.run = r.id
                 WHERE r.run_id = $1 FOR UPDATE OF h",
            )
            .await
            .map_err(server_error)?,
            &[&run_id.as_str()],
        )
        .await
        .map_err(server_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?;
    let id: i64 = head.try_get(0).map_err(server_error)?;
    if let Some(token) = fence {
        // Checked under the head row lock: a controller whose lease was taken over cannot
        // slip a write in between the check and the commit.
        crate::postgres::fence::check_controller(&tx, id, token, run_id).await?;
    }
    let kind = parse_kind(head.try_get(1).map_err(server_error)?)?;
    let mut cursor = stored_cursor(head.try_get(2).map_err(server_error)?)?;
    if let Some(expected) = expected
        && expected != cursor
    {
        return Err(LedgerError::StaleCursor {
            run_id: run_id.to_string(),
            expected: expected.to_string(),
            actual: cursor.to_string(),
        });
    }
    if events.is_empty() {
        return Ok(cursor);
    }
    let progress_text: &str = head.try_get(3).map_err(server_error)?;
    let mut progress: crate::snapshot::RunProgress = serde_json::from_str(progress_text)
        .map_err(|_| LedgerError::corrupt(format!("stored progress of run {run_id} is invalid")))?;

    let named: BTreeSet<u64> = events
        .iter()
        .filter_map(|(e, _)| named_executions(e))
        .collect();
    let mut executions = LoadedExecutions {
        rows: BTreeMap::new(),
        known: named.clone(),
        started: BTreeSet::new(),
        modified: BTreeSet::new(),
    };
    if !named.is_empty() && progress.executions_started > 0 {
        let numbers = named
            .iter()
            .map(|&n| to_i64(n))
            .collect::<Result<Vec<i64>, _>>()?;
        let statement = tx
            .prepare_cached(
                "SELECT execution, snapshot_json FROM run_executions
                 WHERE run = $1 AND execution = ANY($2)",
            )
            .await
            .map_err(server_error)?;
        for row in tx
            .query(&statement, &[&id, &numbers])
            .await
            .map_err(server_error)?
        {
            let execution = to_u64(row.try_get(0).map_err(server_error)?)?;
            let text: &str = row.try_get(1).map_err(server_error)?;
            executions
                .rows
                .insert(execution, parse_execution(run_id, execution, text)?);
        }
    }

    let recorded_at_ms = now_ms();
    let mut sequences = Vec::with_capacity(events.len());
    let mut is_log = Vec::with_capacity(events.len());
    let mut texts = Vec::with_capacity(events.len());
    for (index, (event, text)) in events.into_iter().enumerate() {
        cursor = cursor.next()?;
        apply_event(
            &mut progress,
            kind,
            &mut executions,
            cursor,
            recorded_at_ms,
            &event,
        )
        .map_err(|e| e.at_index(index))?;
        sequences.push(to_i64(cursor.sequence())?);
        is_log.push(event.is_log());
        texts.push(text);
    }
    let rows_of = |which: &BTreeSet<u64>| -> Result<(Vec<i64>, Vec<String>), LedgerError> {
        let mut numbers = Vec::with_capacity(which.len());
        let mut snapshots = Vec::with_capacity(which.len());
        for execution in which {
            let snapshot = executions
                .rows
                .get(execution)
                .ok_or_else(|| LedgerError::Internal {
                    detail: format!("execution {execution} vanished during an append"),
                })?;
            numbers.push(to_i64(*execution)?);
            snapshots.push(to_json_text(snapshot, "an execution snapshot")?);
        }
        Ok((numbers, snapshots))
    };
    let (new_numbers, new_snapshots) = rows_of(&executions.started)?;
    let (changed_numbers, changed_snapshots) = rows_of(&executions.modified)?;
    let progress_json = to_json_text(&progress, "run progress")?;
    let sequence = to_i64(cursor.sequence())?;
    let recorded_at_ms = to_i64(recorded_at_ms)?;
    let notice = format!("{} {}", shared.schema, run_id);

    // Independent writes, sent together: the driver pipelines them on the connection.
    let insert_events = async {
        let statement = tx
            .prepare_cached(
                "INSERT INTO run_events (run, sequence, is_log, recorded_at_ms, event_json)
                 SELECT $1, s, l, $2, j FROM unnest($3::bigint[], $4::boolean[], $5::text[])
                     AS batch (s, l, j)",
            )
            .await?;
        tx.execute(
            &statement,
            &[&id, &recorded_at_ms, &sequences, &is_log, &texts],
        )
        .await
    };
    let insert_executions = async {
        if new_numbers.is_empty() {
            return Ok(0);
        }
        let statement = tx
            .prepare_cached(
                "INSERT INTO run_executions (run, execution, snapshot_json)
                 SELECT $1, n, j FROM unnest($2::bigint[], $3::text[]) AS batch (n, j)",
            )
            .await?;
        tx.execute(&statement, &[&id, &new_numbers, &new_snapshots])
            .await
    };
    let update_executions = async {
        if changed_numbers.is_empty() {
            return Ok(0);
        }
        // The rows are found by their primary key (`execution = ANY`), each new snapshot by a
        // look into the batch: joined to the batch instead, a plan made while the run was small
        // (a hash join over every execution of the run) made each append O(executions).
        let statement = tx
            .prepare_cached(
                "UPDATE run_executions x
                 SET snapshot_json = (SELECT batch.j
                                      FROM unnest($2::bigint[], $3::text[]) AS batch (n, j)
                                      WHERE batch.n = x.execution)
                 WHERE x.run = $1 AND x.execution = ANY($2::bigint[])",
            )
            .await?;
        tx.execute(&statement, &[&id, &changed_numbers, &changed_snapshots])
            .await
    };
    let update_head = async {
        let statement = tx
            .prepare_cached(
                "UPDATE run_heads SET cursor = $1, phase = $2, progress_json = $3 WHERE run = $4",
            )
            .await?;
        tx.execute(
            &statement,
            &[&sequence, &progress.phase.as_str(), &progress_json, &id],
        )
        .await
    };
    // Delivered to listeners when the transaction commits, never before.
    let notify = async {
        let statement = tx.prepare_cached("SELECT pg_notify($1, $2)").await?;
        tx.execute(&statement, &[&NOTIFY_CHANNEL, &notice]).await
    };
    let (events_written, _, executions_updated, heads_updated, _) = tokio::try_join!(
        insert_events,
        insert_executions,
        update_executions,
        update_head,
        notify
    )
    .map_err(server_error)?;
    if events_written != sequences.len() as u64
        || executions_updated != changed_numbers.len() as u64
        || heads_updated != 1
    {
        return Err(LedgerError::corrupt(format!(
            "run {run_id}: an append did not find the rows it updates"
        )));
    }
    tx.commit().await.map_err(server_error)?;
    Ok(cursor)
}
