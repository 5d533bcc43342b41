//! Appending events: validate against the stored progress, then write event rows, touched
//! execution rows and the new progress in one IMMEDIATE transaction.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, OptionalExtension, params};

use crate::apply::{ExecutionTable, apply_event};
use crate::clock::now_ms;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::RunEvent;
use crate::ids::RunId;
use crate::snapshot::ExecutionSnapshot;
use crate::sqlite::error::storage_error;
use crate::sqlite::keys::{row_key, run_keys};
use crate::sqlite::transaction::CachedTransaction;
use crate::sqlite::write::{AppendHead, RecentRun, load_append_head, remembered_active};
use crate::stored::{prepare_batch, to_i64, to_u64};

/// Execution rows of one run, read on demand and written back once at the end of a batch.
/// Only executions the batch touches are read, so an append costs the same however many
/// executions the run already has; those this connection still knows are not read at all.
struct SqlExecutions<'t> {
    tx: &'t Connection,
    run: i64,
    known: BTreeMap<u64, ExecutionSnapshot>,
    touched: BTreeMap<u64, ExecutionSnapshot>,
    /// Which of `touched` this batch started (the others already have a row).
    started: BTreeSet<u64>,
    /// The run's highest stored execution number (`Some(None)`: it has none), once known:
    /// executions start with growing numbers, so a new one is usually above it and needs no
    /// lookup to prove it is new.
    highest: Option<Option<u64>>,
}

impl SqlExecutions<'_> {
    fn load(&self, execution: u64) -> Result<Option<ExecutionSnapshot>, LedgerError> {
        let mut statement = self
            .tx
            .prepare_cached("SELECT snapshot_json FROM run_executions WHERE id = ?1")
            .map_err(storage_error)?;
        let text: Option<String> = statement
            .query_row([row_key(self.run, execution)?], |row| row.get(0))
            .optional()
            .map_err(storage_error)?;
        text.map(|text| {
            serde_json::from_str(&text).map_err(|_| {
                LedgerError::corrupt(format!("stored execution {execution} is invalid"))
            })
        })
        .transpose()
    }

    fn highest(&mut self) -> Result<Option<u64>, LedgerError> {
        if let Some(highest) = self.highest {
            return Ok(highest);
        }
        let (low, high) = run_keys(self.run)?;
        let highest: Option<i64> = self
            .tx
            .prepare_cached("SELECT max(execution) FROM run_executions WHERE id BETWEEN ?1 AND ?2")
            .and_then(|mut statement| statement.query_row([low, high], |row| row.get(0)))
            .map_err(storage_error)?;
        let highest = highest.map(to_u64).transpose()?;
        self.highest = Some(highest);
        Ok(highest)
    }

    fn flush(&self) -> Result<(), LedgerError> {
        // Two statements rather than one upsert: an upsert of an existing row first fails
        // its insert, and most flushes update one row and insert another.
        let mut insert = self
            .tx
            .prepare_cached(
                "INSERT INTO run_executions (id, run, execution, snapshot_json)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(storage_error)?;
        let mut update = self
            .tx
            .prepare_cached("UPDATE run_executions SET snapshot_json = ?1 WHERE id = ?2")
            .map_err(storage_error)?;
        for (execution, snapshot) in &self.touched {
            let text = serde_json::to_string(snapshot).map_err(|_| LedgerError::Internal {
                detail: "an execution snapshot is not serializable".to_owned(),
            })?;
            let key = row_key(self.run, *execution)?;
            let written = if self.started.contains(execution) {
                insert.execute(params![key, self.run, to_i64(*execution)?, text])
            } else {
                update.execute(params![text, key])
            };
            match written.map_err(storage_error)? {
                1 => {}
                _ => {
                    return Err(LedgerError::corrupt(format!(
                        "execution {execution} has no stored row"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl ExecutionTable for SqlExecutions<'_> {
    fn contains(&mut self, execution: u64) -> Result<bool, LedgerError> {
        if self.touched.contains_key(&execution) || self.known.contains_key(&execution) {
            return Ok(true);
        }
        if self.highest()?.is_none_or(|highest| execution > highest) {
            return Ok(false);
        }
        let mut statement = self
            .tx
            .prepare_cached("SELECT 1 FROM run_executions WHERE id = ?1")
            .map_err(storage_error)?;
        statement
            .exists([row_key(self.run, execution)?])
            .map_err(storage_error)
    }

    fn insert(&mut self, execution: u64, snapshot: ExecutionSnapshot) -> Result<(), LedgerError> {
        if let Some(highest) = &mut self.highest {
            *highest = Some(highest.map_or(execution, |h| h.max(execution)));
        }
        self.touched.insert(execution, snapshot);
        self.started.insert(execution);
        Ok(())
    }

    fn modify(
        &mut self,
        execution: u64,
        change: &mut dyn FnMut(&mut ExecutionSnapshot),
    ) -> Result<(), LedgerError> {
        if !self.touched.contains_key(&execution) {
            let loaded = match self.known.remove(&execution) {
                Some(known) => known,
                None => self.load(execution)?.ok_or_else(|| {
                    LedgerError::corrupt(format!("execution {execution} has no stored row"))
                })?,
            };
            self.touched.insert(execution, loaded);
        }
        if let Some(snapshot) = self.touched.get_mut(&execution) {
            change(snapshot);
        }
        Ok(())
    }
}

/// Appends `events` to `run_id`, optionally only if the run is still at `expected`.
/// `recent` is what this connection's last append left (taken, and replaced only by a
/// successful commit).
pub(super) fn append(
    conn: &mut Connection,
    recent: &mut Option<RecentRun>,
    run_id: &RunId,
    expected: Option<Cursor>,
    events: &[RunEvent],
) -> Result<Cursor, LedgerError> {
    let prepared = prepare_batch(events)?;

    let tx = CachedTransaction::write(conn)?;
    let head = load_append_head(&tx, run_id, recent.take())?;
    let kind = head.kind;
    let mut cursor = head.cursor;
    if let Some(expected) = expected
        && expected != cursor
    {
        return Err(LedgerError::StaleCursor {
            run_id: run_id.to_string(),
            expected: expected.to_string(),
            actual: cursor.to_string(),
        });
    }
    if prepared.is_empty() {
        return Ok(cursor);
    }
    let mut progress = head.progress;
    let recorded_at_ms = now_ms();
    let mut executions = SqlExecutions {
        tx: &tx,
        run: head.id,
        known: head.known,
        touched: BTreeMap::new(),
        started: BTreeSet::new(),
        // A run that never started an execution has no execution rows to look up.
        highest: match progress.executions_started {
            0 => Some(None),
            _ => head.highest_execution,
        },
    };
    {
        let mut insert_event = tx
            .prepare_cached(
                "INSERT INTO run_events (id, run, sequence, is_log, recorded_at_ms, event_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(storage_error)?;
        for (index, (event, text)) in prepared.iter().enumerate() {
            cursor = cursor.next()?;
            apply_event(
                &mut progress,
                kind,
                &mut executions,
                cursor,
                recorded_at_ms,
                event,
            )
            .map_err(|e| e.at_index(index))?;
            insert_event
                .execute(params![
                    row_key(head.id, cursor.sequence())?,
                    head.id,
                    to_i64(cursor.sequence())?,
                    event.is_log(),
                    to_i64(recorded_at_ms)?,
                    text,
                ])
                .map_err(storage_error)?;
        }
    }
    executions.flush()?;
    let progress_json = serde_json::to_string(&progress).map_err(|_| LedgerError::Internal {
        detail: "run progress is not serializable".to_owned(),
    })?;
    let sequence = to_i64(cursor.sequence())?;
    tx.prepare_cached(
        "UPDATE run_heads SET cursor = ?1, phase = ?2, progress_json = ?3 WHERE run = ?4",
    )
    .and_then(|mut update| {
        update.execute(params![
            sequence,
            progress.phase.as_str(),
            progress_json,
            head.id
        ])
    })
    .map_err(storage_error)?;
    let highest_execution = executions.highest;
    let mut remembered = executions.known;
    remembered.extend(executions.touched);
    tx.commit()?;
    *recent = Some(RecentRun {
        run_id: run_id.clone(),
        head: AppendHead {
            id: head.id,
            kind,
            data_version: head.data_version,
            cursor,
            known: remembered_active(&progress, remembered),
            progress,
            highest_execution,
        },
    });
    Ok(cursor)
}
