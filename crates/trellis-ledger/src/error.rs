//! The closed set of ledger errors, each with a stable code; messages never carry secret values.

use thiserror::Error;

use crate::cursor::Cursor;
use crate::ids::RunId;

/// Everything that can go wrong in the ledger.
///
/// Messages name runs, cursors and rule violations but never echo submitted payloads, log
/// text or SQL, so an error can be printed or logged without leaking anything.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LedgerError {
    #[error("run {run_id} was not found")]
    RunNotFound { run_id: String },
    #[error("submission key already identifies a different admitted run")]
    SubmissionConflict,
    #[error("run id {run_id} is already used by a different submission")]
    RunIdConflict { run_id: String },
    #[error("invalid run submission: {reason}")]
    InvalidRun { reason: String },
    #[error("event {index} of the batch was rejected: {reason}")]
    InvalidEvent { index: usize, reason: String },
    #[error("invalid cursor: expected an opaque cursor previously returned by the ledger")]
    InvalidCursor,
    #[error("cursor {cursor} is ahead of run {run_id}, which is at {latest}")]
    CursorAhead {
        run_id: String,
        cursor: String,
        latest: String,
    },
    #[error("run {run_id} moved on: expected it at {expected}, found it at {actual}")]
    StaleCursor {
        run_id: String,
        expected: String,
        actual: String,
    },
    #[error(
        "the ledger is busy: another process held its write lock past the busy timeout \
         (TRELLIS_LEDGER_BUSY_TIMEOUT_MS); try again, or look for a stopped process that has it open"
    )]
    Busy,
    #[error(
        "the ledger {location} is read-only: make the file and its directory writable by this \
         user (and its filesystem mounted read-write), or point TRELLIS_HOME or --ledger elsewhere"
    )]
    ReadOnly { location: String },
    #[error(
        "the disk holding the ledger {location} is full: nothing was written; free space on \
         that filesystem (or point TRELLIS_HOME or --ledger elsewhere) and try again"
    )]
    DiskFull { location: String },
    #[error(
        "cannot open the ledger file {location}: check that it and its directory exist and are \
         readable and writable by this user"
    )]
    CannotOpen { location: String },
    #[error(
        "the ledger {location} could not be read or written (an I/O error, SQLite extended code \
         {code}): check the disk and the filesystem it is on"
    )]
    Io { location: String, code: i32 },
    #[error("the ledger database is corrupt: {detail}")]
    Corrupt { detail: String },
    #[error("the file is not a Trellis ledger: {detail}")]
    NotALedger { detail: String },
    #[error(
        "the ledger schema version {found} is newer than this build supports ({supported}); upgrade trellis"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("the state directory is unusable: {detail}")]
    StateDirectory { detail: String },
    #[error("storage failure (SQLite extended code {code})")]
    Storage { code: i32 },
    #[error("storage failure (PostgreSQL SQLSTATE {sqlstate})")]
    ServerStorage { sqlstate: String },
    #[error(
        "the ledger server is out of disk space (SQLSTATE {sqlstate}): nothing was written; free \
         space on the server's data volume and try again"
    )]
    ServerDiskFull { sqlstate: String },
    #[error(
        "the ledger server accepts no writes (SQLSTATE {sqlstate}: a read-only standby, or \
         default_transaction_read_only is on): point --ledger at the primary, or make the \
         database writable"
    )]
    ServerReadOnly { sqlstate: String },
    #[error(
        "the ledger server's user may not use the ledger schema (SQLSTATE {sqlstate}): grant it \
         USAGE and CREATE on the schema and rights on its tables, or connect as its owner"
    )]
    ServerPermission { sqlstate: String },
    #[error("the ledger server is unavailable: {detail}")]
    Unavailable { detail: String },
    #[error("invalid ledger location: {detail}")]
    InvalidLocation { detail: String },
    #[error("internal ledger failure: {detail}")]
    Internal { detail: String },
    #[error("fenced: {detail}")]
    Fenced { detail: String },
}

impl LedgerError {
    /// A stable, machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RunNotFound { .. } => "run.not_found",
            Self::SubmissionConflict => "submission.conflict",
            Self::RunIdConflict { .. } => "run.id_conflict",
            Self::InvalidRun { .. } => "run.invalid",
            Self::InvalidEvent { .. } => "event.invalid",
            Self::InvalidCursor => "cursor.invalid",
            Self::CursorAhead { .. } => "cursor.ahead",
            Self::StaleCursor { .. } => "cursor.stale",
            Self::Busy => "ledger.busy",
            Self::ReadOnly { .. } | Self::ServerReadOnly { .. } => "ledger.read_only",
            Self::DiskFull { .. } | Self::ServerDiskFull { .. } => "ledger.disk_full",
            Self::ServerPermission { .. } => "ledger.permission_denied",
            Self::CannotOpen { .. } => "ledger.cannot_open",
            Self::Io { .. } => "ledger.io",
            Self::Corrupt { .. } => "ledger.corrupt",
            Self::NotALedger { .. } => "ledger.not_a_ledger",
            Self::SchemaTooNew { .. } => "ledger.schema_too_new",
            Self::StateDirectory { .. } => "ledger.state_directory",
            Self::Storage { .. } | Self::ServerStorage { .. } => "ledger.storage",
            Self::Unavailable { .. } => "ledger.unavailable",
            Self::InvalidLocation { .. } => "ledger.location_invalid",
            Self::Internal { .. } => "ledger.internal",
            Self::Fenced { .. } => "lease.fenced",
        }
    }

    pub(crate) fn run_not_found(run_id: &impl std::fmt::Display) -> Self {
        Self::RunNotFound {
            run_id: run_id.to_string(),
        }
    }

    pub(crate) fn invalid_run(reason: impl Into<String>) -> Self {
        Self::InvalidRun {
            reason: reason.into(),
        }
    }

    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn unavailable(detail: impl Into<String>) -> Self {
        Self::Unavailable {
            detail: detail.into(),
        }
    }

    pub(crate) fn invalid_location(detail: impl Into<String>) -> Self {
        Self::InvalidLocation {
            detail: detail.into(),
        }
    }

    pub(crate) fn corrupt(detail: impl Into<String>) -> Self {
        Self::Corrupt {
            detail: detail.into(),
        }
    }
}

impl From<trellis_run_model::CursorError> for LedgerError {
    fn from(_: trellis_run_model::CursorError) -> Self {
        Self::InvalidCursor
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
