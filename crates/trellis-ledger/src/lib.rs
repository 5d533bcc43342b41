//! Durable run storage: append-only events with cursors, run snapshots and idempotent submissions, SQLite by default (PostgreSQL for many hosts) behind a narrow storage trait.
//!
//! The ledger is the single source of truth of every run. A run is admitted once per
//! submission key ([`RunStore::create_or_get`]); from then on its state changes only through
//! [`RunEvent`]s appended with [`RunStore::append`], each validated against the run's state
//! (see [`apply`] for the rules) and numbered with a monotonically increasing sequence that
//! clients see as an opaque [`Cursor`]. The store keeps a materialized [`RunSnapshot`] that always
//! equals [`fold_snapshot`] over the stored events. Observers (`status`, `watch`, `logs`) read
//! through [`observe`], which projects the reference JSON shapes.
//!
//! # Atomicity every backend must provide
//!
//! * `create_or_get`: look up the key, compare digests and insert — one serializable step,
//!   backed by unique constraints on run id and submission key.
//! * `append` / `append_at`: read the progress, validate every event, insert the event rows,
//!   write the touched executions and the new progress — one transaction; a rejected event
//!   stores nothing. `append_at` also checks the expected cursor inside that transaction.
//! * Reads that combine several rows (`snapshot`, `events_after`'s cursor check) read one
//!   committed state.
//!
//! Nothing else needs a lock: events are immutable once written, so observers can page
//! through them while a controller appends.

mod admission;
pub mod apply;
pub mod canonical;
mod clock;
pub mod cursor;
mod durability;
pub mod error;
pub mod event;
pub mod ids;
pub mod limits;
mod listing;
pub mod location;
pub mod logtext;
pub mod observe;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod snapshot;
pub mod sqlite;
pub mod store;
mod stored;
pub mod testing;
pub mod transitions;

pub use apply::fold_snapshot;
pub use cursor::Cursor;
pub use durability::Durability;
pub use error::LedgerError;
pub use event::{
    CheckpointBefore, CheckpointBeforeKind, EventFilter, GapNodeOutcome, RunEvent, StoredEvent,
};
pub use ids::{Phase, RunId, RunKind};
pub use location::{LEDGER_ENV, LedgerLocation, redact_url};
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
pub use snapshot::{ControllerInfo, ExecutionSnapshot, RunHead, RunProgress, RunSnapshot};
pub use sqlite::{BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT, SqliteOptions, SqliteStore};
pub use store::{Admission, ListedRun, NewRun, RunFilter, RunRecord, RunStore, UnreadableRun};
pub use transitions::{EventKind, transition};
pub use trellis_run_model::{
    CursorError, ExecutionState, LogLevel, LogStream, ReusedOutcome, SettledBy, TerminalResult,
    TokenUsage, VoidReason, declared_level,
};
