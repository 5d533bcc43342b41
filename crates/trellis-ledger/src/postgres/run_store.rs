//! The storage port on PostgreSQL: [`RunStore`] for [`PostgresStore`], each method one job on
//! the store's I/O thread. Kept apart from the store itself so the backend's core never
//! imports the port (which names `PostgresStore` in `as_postgres`).

use std::sync::Arc;
use std::time::Duration;

use crate::admission::{Admission, NewRun, RunRecord};
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{EventFilter, RunEvent, StoredEvent};
use crate::ids::RunId;
use crate::listing::{ListedRun, RunFilter};
use crate::postgres::{PostgresStore, runs, wait};
use crate::snapshot::{RunHead, RunSnapshot};
use crate::store::RunStore;

impl RunStore for PostgresStore {
    fn as_postgres(&self) -> Option<&PostgresStore> {
        Some(self)
    }

    fn create_or_get(&self, run: NewRun) -> Result<(RunRecord, Admission), LedgerError> {
        let submission_json = run.validate()?;
        // Idempotent on the submission key: repeating it after an outage finds the run.
        self.riding_out(|| {
            let (run, submission_json) = (run.clone(), submission_json.clone());
            self.call(move |shared| async move {
                runs::create_or_get(&shared, run, submission_json).await
            })
        })
    }

    fn find_by_key(&self, submission_key: &str) -> Result<Option<RunRecord>, LedgerError> {
        self.riding_out(|| {
            let key = submission_key.to_owned();
            self.call(move |shared| async move { runs::find_by_key(&shared, &key).await })
        })
    }

    fn record(&self, run_id: &RunId) -> Result<RunRecord, LedgerError> {
        self.riding_out(|| {
            let run_id = run_id.clone();
            self.call(move |shared| async move { runs::record(&shared, &run_id).await })
        })
    }

    fn head(&self, run_id: &RunId) -> Result<RunHead, LedgerError> {
        self.riding_out(|| {
            let run_id = run_id.clone();
            self.call(move |shared| async move { runs::head(&shared, &run_id).await })
        })
    }

    fn snapshot(&self, run_id: &RunId) -> Result<RunSnapshot, LedgerError> {
        let (raw, rows) = self.riding_out(|| {
            let id = run_id.clone();
            self.call(move |shared| async move { runs::snapshot(&shared, &id).await })
        })?;
        runs::assemble_snapshot(run_id, raw, rows)
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<ListedRun>, LedgerError> {
        self.riding_out(|| {
            let filter = filter.clone();
            self.call(move |shared| async move { runs::list_runs(&shared, filter).await })
        })
    }

    fn append(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError> {
        self.append_checked(run_id, None, events)
    }

    fn append_at(
        &self,
        run_id: &RunId,
        expected: Cursor,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.append_checked(run_id, Some(expected), events)
    }

    fn events_after(
        &self,
        run_id: &RunId,
        after: Cursor,
        limit: usize,
        filter: EventFilter,
    ) -> Result<Vec<StoredEvent>, LedgerError> {
        self.riding_out(|| {
            let run_id = run_id.clone();
            self.call(move |shared| async move {
                runs::events_after(&shared, &run_id, after, limit, filter).await
            })
        })
    }

    fn latest_cursor(&self, run_id: &RunId) -> Result<Cursor, LedgerError> {
        self.riding_out(|| self.latest_cursor_once(run_id))
    }

    fn run_contains_bytes(&self, run_id: &RunId, needle: &[u8]) -> Result<bool, LedgerError> {
        let run_id = run_id.clone();
        let needle = needle.to_vec();
        self.call(
            move |shared| async move { runs::run_contains_bytes(&shared, &run_id, needle).await },
        )
    }

    fn wait_for_change(
        &self,
        run_id: &RunId,
        after: Cursor,
        timeout: Duration,
    ) -> Result<Cursor, LedgerError> {
        self.riding_out(|| {
            let run_id = run_id.clone();
            let shared = Arc::clone(&self.shared);
            self.bridge.call(
                self.operation_timeout.saturating_add(timeout),
                wait::wait_for_change(shared, run_id, after, timeout),
            )
        })
    }
}
