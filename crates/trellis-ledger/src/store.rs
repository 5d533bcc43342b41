//! The storage port: what every ledger backend offers ([`RunStore`]). The admission and listing
//! types it speaks in live below it (and are re-exported here); the port names a backend only
//! where its public signature must, in [`RunStore::as_postgres`].

use std::time::{Duration, Instant};

use crate::cursor::Cursor;
use crate::error::{LedgerError, cursor_ahead};
use crate::event::{EventFilter, RunEvent, StoredEvent};
use crate::ids::RunId;
use crate::snapshot::{RunHead, RunSnapshot};

pub use crate::admission::{Admission, NewRun, RunRecord};
pub use crate::clock::now_ms;
pub use crate::listing::{ListedRun, RunFilter, UnreadableRun};

/// Most optimistic retries of [`RunStore::request_force_stop`] before it reports `Busy`.
const FORCE_STOP_ATTEMPTS: usize = 64;
/// Polling interval bounds of the default [`RunStore::wait_for_change`].
const POLL_FIRST: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(50);

/// Durable run storage. Every method is atomic on its own; in particular:
///
/// * `create_or_get` decides "new run, existing run or conflict" and inserts in one
///   serializable step, so concurrent identical submissions from any number of processes
///   yield one run (a unique constraint on the key backs this up);
/// * `append` validates and stores a whole batch — event rows with consecutive sequences and
///   the updated snapshot — in one transaction, or stores nothing;
/// * reads (`snapshot`, `events_after`, …) see one committed state, never half a batch.
///
/// The trait speaks only in ledger types, so a PostgreSQL backend can implement it without
/// touching the reducer, the runtime or the CLI.
pub trait RunStore: Send + Sync {
    /// The PostgreSQL backend behind this store, for what only it offers (controller leases,
    /// the dispatch queue); `None` for every other backend.
    #[cfg(feature = "postgres")]
    fn as_postgres(&self) -> Option<&crate::postgres::PostgresStore> {
        None
    }

    /// Admits `run`, or returns the run its submission key already identifies.
    /// Same key and digest → that run ([`Admission::Existing`]); same key, other digest →
    /// [`LedgerError::SubmissionConflict`]; run id taken by another key → `RunIdConflict`.
    fn create_or_get(&self, run: NewRun) -> Result<(RunRecord, Admission), LedgerError>;

    /// The run a submission key identifies, if any.
    fn find_by_key(&self, submission_key: &str) -> Result<Option<RunRecord>, LedgerError>;

    /// The admission record of a run.
    fn record(&self, run_id: &RunId) -> Result<RunRecord, LedgerError>;

    /// A run's head: identity, lineage, cursor and progress, without executions.
    fn head(&self, run_id: &RunId) -> Result<RunHead, LedgerError>;

    /// A run's full materialized snapshot.
    fn snapshot(&self, run_id: &RunId) -> Result<RunSnapshot, LedgerError>;

    /// Run heads, newest first. A run whose stored row cannot be read is listed as
    /// [`UnreadableRun`] in its place, so one damaged run hides no other.
    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<ListedRun>, LedgerError>;

    /// Validates and appends `events` in order; returns the cursor of the last one. A rejected
    /// event rejects the whole batch. Log messages are sanitized on the way in.
    fn append(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError>;

    /// Like `append`, for what a running execution reports about itself (its process group,
    /// log lines, token usage): facts that cannot outlive the machine, because the process
    /// they describe does not survive a power loss either. A backend may commit them without
    /// waiting for the disk, provided a later `append` that does wait makes them durable too
    /// (a commit log written in order: SQLite's WAL). Nothing may be started on the strength
    /// of such a commit. The default is `append`.
    fn append_progress(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError> {
        self.append(run_id, events)
    }

    /// Like `append`, but only if the run is still at `expected`; otherwise
    /// [`LedgerError::StaleCursor`]. For writers that decided on a state they read earlier.
    fn append_at(
        &self,
        run_id: &RunId,
        expected: Cursor,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError>;

    /// Events strictly after `after` that `filter` selects, oldest first, at most `limit`
    /// (capped at [`crate::limits::MAX_EVENTS_PER_PAGE`]).
    fn events_after(
        &self,
        run_id: &RunId,
        after: Cursor,
        limit: usize,
        filter: EventFilter,
    ) -> Result<Vec<StoredEvent>, LedgerError>;

    /// The cursor of the run's last event.
    fn latest_cursor(&self, run_id: &RunId) -> Result<Cursor, LedgerError>;

    /// Whether any stored byte of the run (submission, events, snapshot) contains `needle`.
    /// For canary tests that prove secrets never reach the ledger.
    fn run_contains_bytes(&self, run_id: &RunId, needle: &[u8]) -> Result<bool, LedgerError>;

    /// Records a force-stop request once: a no-op when one was already recorded or the run
    /// is finished. Returns the head afterwards.
    fn request_force_stop(&self, run_id: &RunId) -> Result<RunHead, LedgerError> {
        for _ in 0..FORCE_STOP_ATTEMPTS {
            let head = self.head(run_id)?;
            if head.is_finished() || head.progress.force_stop_requested {
                return Ok(head);
            }
            let event = RunEvent::ForceStopRequested {};
            match self.append_at(run_id, head.cursor, std::slice::from_ref(&event)) {
                Ok(_) => return self.head(run_id),
                Err(LedgerError::StaleCursor { .. }) => continue,
                Err(other) => return Err(other),
            }
        }
        Err(LedgerError::Busy)
    }

    /// Waits until the run has events after `after` or `timeout` passes; returns the latest
    /// cursor either way. Backends with notifications may override the polling default.
    fn wait_for_change(
        &self,
        run_id: &RunId,
        after: Cursor,
        timeout: Duration,
    ) -> Result<Cursor, LedgerError> {
        let deadline = Instant::now() + timeout;
        let mut pause = POLL_FIRST;
        loop {
            let latest = self.latest_cursor(run_id)?;
            if latest < after {
                return Err(cursor_ahead(run_id, after, latest));
            }
            let now = Instant::now();
            if latest > after || now >= deadline {
                return Ok(latest);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}
