//! What this connection last appended to a run, reused while nobody else has written to it,
//! and the head an append starts from.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension};

use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::ids::{RunId, RunKind};
use crate::snapshot::{ExecutionSnapshot, RunProgress};
use crate::sqlite::error::storage_error;
use crate::sqlite::runs::RUN_SOURCE;
use crate::stored::to_u64;

/// Execution snapshots kept for reuse only while a run has at most this many active ones, so
/// the memory held stays small whatever the run's inputs weigh.
const MAX_REMEMBERED_EXECUTIONS: usize = 64;

/// The state of one run as this connection's last append left it. Valid only while nobody
/// else has written the run since: either the database's `data_version` is unchanged (no
/// other connection committed anything), or the run's stored cursor is still the head's
/// (every change to a run is an append, and every append moves the cursor).
#[derive(Debug)]
pub(crate) struct RecentRun {
    pub(super) run_id: RunId,
    /// The head as the append left it; `known` holds only active executions' snapshots
    /// (none when there are too many).
    pub(super) head: AppendHead,
}

/// The snapshots worth remembering after an append: those of active executions, unless there
/// are too many.
pub(super) fn remembered_active(
    progress: &RunProgress,
    mut known: BTreeMap<u64, ExecutionSnapshot>,
) -> BTreeMap<u64, ExecutionSnapshot> {
    if progress.active_executions.len() > MAX_REMEMBERED_EXECUTIONS {
        return BTreeMap::new();
    }
    known.retain(|execution, _| progress.active_executions.contains_key(execution));
    known
}

/// What an append needs of a run: its row id, kind, cursor and progress, plus the active
/// executions' snapshots when this connection still knows them.
#[derive(Debug)]
pub(super) struct AppendHead {
    pub(super) id: i64,
    pub(super) kind: RunKind,
    /// `PRAGMA data_version` inside the append's transaction.
    pub(super) data_version: i64,
    pub(super) cursor: Cursor,
    pub(super) progress: RunProgress,
    pub(super) known: BTreeMap<u64, ExecutionSnapshot>,
    /// The run's highest stored execution number (`Some(None)`: it has none), when known.
    pub(super) highest_execution: Option<Option<u64>>,
}

/// Reads the head inside the append's transaction; the stored progress is parsed only when
/// `recent` does not describe the run at its current cursor.
pub(super) fn load_append_head(
    conn: &Connection,
    run_id: &RunId,
    recent: Option<RecentRun>,
) -> Result<AppendHead, LedgerError> {
    let data_version: i64 = conn
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
        .map_err(storage_error)?;
    let recent = match recent.filter(|recent| recent.run_id == *run_id) {
        // Nobody else committed anything since this connection's last append.
        Some(recent) if recent.head.data_version == data_version => {
            return Ok(recent.head);
        }
        other => other,
    };
    let sql = format!(
        "SELECT runs.id, runs.kind, run_heads.cursor, run_heads.progress_json
         FROM {RUN_SOURCE} WHERE runs.run_id = ?1"
    );
    let mut statement = conn.prepare_cached(&sql).map_err(storage_error)?;
    // The stored progress (it grows with the number of active executions) is copied out
    // only when `recent` does not already hold it.
    let remembered_at = recent
        .as_ref()
        .and_then(|recent| i64::try_from(recent.head.cursor.sequence()).ok());
    let row: Option<(i64, Option<RunKind>, i64, Option<String>)> = statement
        .query_row([run_id.as_str()], |row| {
            let cursor: i64 = row.get(2)?;
            let kind = RunKind::parse(row.get_ref(1)?.as_str()?);
            let progress = if remembered_at == Some(cursor) {
                None
            } else {
                Some(row.get(3)?)
            };
            Ok((row.get(0)?, kind, cursor, progress))
        })
        .optional()
        .map_err(storage_error)?;
    let (id, kind, cursor, progress_json) =
        row.ok_or_else(|| LedgerError::run_not_found(run_id))?;
    let kind = kind.ok_or_else(|| LedgerError::corrupt("a stored run kind is unknown"))?;
    let cursor = Cursor::at(to_u64(cursor)?)?;
    let progress_json = match (progress_json, recent) {
        (Some(text), _) => text,
        (None, Some(recent)) => {
            return Ok(AppendHead {
                id,
                kind,
                data_version,
                cursor,
                ..recent.head
            });
        }
        (None, None) => {
            return Err(LedgerError::Internal {
                detail: "the stored progress was skipped without a remembered one".to_owned(),
            });
        }
    };
    let progress = serde_json::from_str(&progress_json)
        .map_err(|_| LedgerError::corrupt(format!("stored progress of run {run_id} is invalid")))?;
    Ok(AppendHead {
        id,
        kind,
        data_version,
        cursor,
        progress,
        known: BTreeMap::new(),
        highest_execution: None,
    })
}
