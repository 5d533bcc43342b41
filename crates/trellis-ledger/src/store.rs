//! The storage port: what every ledger backend offers, and the admission types it works with.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{Value, json};

use crate::canonical::canonical_digest;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{EventFilter, RunEvent, StoredEvent};
use crate::ids::{Phase, RunId, RunKind};
use crate::limits::{
    MAX_GRAPH_IDENTITY_BYTES, MAX_LISTED_RUNS, MAX_SUBMISSION_JSON_BYTES, MAX_SUBMISSION_KEY_BYTES,
    MAX_TITLE_CHARS,
};
use crate::snapshot::{RunHead, RunSnapshot};

/// A run to admit. `submission` holds the graph, input, plan, working directory and whatever
/// else defines the run — never a secret value.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub run_id: RunId,
    pub submission_key: String,
    /// Lowercase hex SHA-256 identifying the submission; [`NewRun::new`] computes it with
    /// [`NewRun::compute_digest`], callers with their own canonical form may set it directly.
    pub submission_digest: String,
    pub title: String,
    pub kind: RunKind,
    pub graph_identity: Option<String>,
    pub submission: Value,
    /// The run this one resumes, which must be finished and have no other successor.
    pub predecessor: Option<RunId>,
    pub created_at_ms: u64,
}

impl NewRun {
    /// A run created now, with its digest computed from the submission.
    pub fn new(
        run_id: RunId,
        submission_key: impl Into<String>,
        title: impl Into<String>,
        kind: RunKind,
        submission: Value,
    ) -> Self {
        let mut run = Self {
            run_id,
            submission_key: submission_key.into(),
            submission_digest: String::new(),
            title: title.into(),
            kind,
            graph_identity: None,
            submission,
            predecessor: None,
            created_at_ms: now_ms(),
        };
        run.submission_digest = run.compute_digest();
        run
    }

    pub fn with_graph_identity(mut self, identity: impl Into<String>) -> Self {
        self.graph_identity = Some(identity.into());
        self.submission_digest = self.compute_digest();
        self
    }

    pub fn with_predecessor(mut self, predecessor: RunId) -> Self {
        self.predecessor = Some(predecessor);
        self.submission_digest = self.compute_digest();
        self
    }

    pub fn with_created_at_ms(mut self, created_at_ms: u64) -> Self {
        self.created_at_ms = created_at_ms;
        self
    }

    /// SHA-256 over the canonical JSON of everything that defines the submission: key, title,
    /// kind, graph identity, predecessor and submission. The run id and creation time are left
    /// out, so a retry with a fresh run id is recognised as the same submission.
    pub fn compute_digest(&self) -> String {
        canonical_digest(&json!({
            "submissionKey": self.submission_key,
            "title": self.title,
            "kind": self.kind.as_str(),
            "graphIdentity": self.graph_identity,
            "predecessor": self.predecessor.as_ref().map(RunId::as_str),
            "submission": self.submission,
        }))
    }

    /// Checks every bound and returns the submission's JSON text.
    pub fn validate(&self) -> Result<String, LedgerError> {
        let printable = |text: &str| !text.chars().any(char::is_control);
        let title_chars = self.title.chars().count();
        if title_chars == 0 || title_chars > MAX_TITLE_CHARS || !printable(&self.title) {
            return Err(LedgerError::invalid_run(format!(
                "title must be 1..={MAX_TITLE_CHARS} characters without control characters"
            )));
        }
        let key = &self.submission_key;
        if key.is_empty() || key.len() > MAX_SUBMISSION_KEY_BYTES || !printable(key) {
            return Err(LedgerError::invalid_run(format!(
                "submission key must be 1..={MAX_SUBMISSION_KEY_BYTES} bytes without control characters"
            )));
        }
        let digest = &self.submission_digest;
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(LedgerError::invalid_run(
                "submission digest must be 64 lowercase hex digits",
            ));
        }
        if let Some(identity) = &self.graph_identity
            && (identity.is_empty()
                || identity.len() > MAX_GRAPH_IDENTITY_BYTES
                || !identity.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(LedgerError::invalid_run(format!(
                "graph identity must be 1..={MAX_GRAPH_IDENTITY_BYTES} printable ASCII bytes"
            )));
        }
        if self.predecessor.as_ref() == Some(&self.run_id) {
            return Err(LedgerError::invalid_run(
                "a run cannot be its own predecessor",
            ));
        }
        let text = serde_json::to_string(&self.submission)
            .map_err(|_| LedgerError::invalid_run("submission is not serializable"))?;
        if text.len() > MAX_SUBMISSION_JSON_BYTES {
            return Err(LedgerError::invalid_run(format!(
                "submission exceeds {MAX_SUBMISSION_JSON_BYTES} bytes"
            )));
        }
        Ok(text)
    }
}

/// A run as admitted, plus its current successor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: RunId,
    pub submission_key: String,
    pub submission_digest: String,
    pub title: String,
    pub kind: RunKind,
    pub graph_identity: Option<String>,
    pub submission: Value,
    pub predecessor: Option<RunId>,
    /// The run that resumed this one, once there is one.
    pub successor: Option<RunId>,
    pub created_at_ms: u64,
}

/// Whether `create_or_get` admitted a new run or found the submission already admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Created,
    Existing,
}

/// One run of a listing: its head, or why its stored row could not be read.
pub type ListedRun = Result<RunHead, UnreadableRun>;

/// A run whose stored row is damaged: named by its run id as stored (or its row number when
/// even that is unreadable), with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRun {
    pub name: String,
    pub error: LedgerError,
}

impl std::fmt::Display for UnreadableRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {}: {}", self.name, self.error)
    }
}

/// Which runs `list_runs` returns, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    pub phase: Option<Phase>,
    pub kind: Option<RunKind>,
    /// Only runs listed after this one (keyset paging: pass the last run of the previous page).
    pub after_run: Option<RunId>,
    /// At most this many runs, capped at [`MAX_LISTED_RUNS`].
    pub limit: usize,
}

impl Default for RunFilter {
    fn default() -> Self {
        Self {
            phase: None,
            kind: None,
            after_run: None,
            limit: 100,
        }
    }
}

impl RunFilter {
    /// The limit a backend applies.
    pub fn effective_limit(&self) -> usize {
        self.limit.min(MAX_LISTED_RUNS)
    }
}

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

/// The error for a cursor past the end of a run.
pub(crate) fn cursor_ahead(run_id: &RunId, cursor: Cursor, latest: Cursor) -> LedgerError {
    LedgerError::CursorAhead {
        run_id: run_id.to_string(),
        cursor: cursor.to_string(),
        latest: latest.to_string(),
    }
}

/// Milliseconds since the Unix epoch by the wall clock (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
