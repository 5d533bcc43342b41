//! The SQLite ledger: one WAL database for every run, shared safely by many processes.

mod append;
mod busy;
mod error;
mod keys;
pub mod paths;
mod runs;
pub mod schema;
mod transaction;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use self::error::storage_error;
use crate::admission::{Admission, NewRun, RunRecord};
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::{EventFilter, RunEvent, StoredEvent};
use crate::ids::RunId;
use crate::listing::{ListedRun, RunFilter};
use crate::snapshot::{RunHead, RunSnapshot};
use crate::store::RunStore;

/// The page size of a new ledger file. A step's commit rewrites whole pages into the WAL (its
/// new events, its execution rows and the run's head: a few hundred changed bytes each), so
/// the page is what a commit copies, checksums and writes; halving SQLite's default of 4 KiB
/// made a sequential step about a fifth cheaper in CPU, and rows larger than a page spill into
/// overflow pages as before. An existing file keeps the page size it was created with.
pub const LEDGER_PAGE_SIZE: i64 = 2048;

pub use crate::durability::Durability;
pub use busy::BUSY_TIMEOUT_ENV;

/// How long an operation waits for other processes' locks by default: long enough for a home
/// with dozens of concurrent runs on a slow disk, short enough to report a stopped holder.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Tuning for [`SqliteStore::open_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How long an operation keeps trying while other processes hold the locks it needs
    /// before failing with `Busy`.
    pub busy_timeout: Duration,
    pub durability: Durability,
}

impl Default for SqliteOptions {
    /// Full durability; the busy timeout is `$TRELLIS_LEDGER_BUSY_TIMEOUT_MS` when set, else
    /// [`DEFAULT_BUSY_TIMEOUT`].
    fn default() -> Self {
        Self {
            busy_timeout: busy::busy_timeout_from_env(DEFAULT_BUSY_TIMEOUT),
            durability: Durability::Full,
        }
    }
}

/// A ledger in one SQLite file (or in memory). Cheap to share across threads; each process
/// opens its own store on the same file.
pub struct SqliteStore {
    session: Mutex<Session>,
    path: Option<PathBuf>,
    busy_timeout: Duration,
    durability: Durability,
}

/// The connection and what its last append left, guarded together.
struct Session {
    conn: Connection,
    recent: Option<write::RecentRun>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the ledger at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the ledger under the state home (`$TRELLIS_HOME/ledger.sqlite3`, see
    /// [`paths::state_home`]).
    pub fn open_default() -> Result<Self, LedgerError> {
        Self::open(paths::default_ledger_path()?)
    }

    /// Opens (creating if needed) the ledger at `path`.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, LedgerError> {
        let path = path.as_ref();
        paths::prepare_ledger_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| busy::located(storage_error(e), Some(path)))?;
        Self::configure(conn, options, Some(path.to_path_buf()))
            .map_err(|e| busy::located(e, Some(path)))
    }

    /// A private in-memory ledger, for tests.
    pub fn open_in_memory() -> Result<Self, LedgerError> {
        let conn = Connection::open_in_memory().map_err(storage_error)?;
        Self::configure(conn, SqliteOptions::default(), None)
    }

    fn configure(
        mut conn: Connection,
        options: SqliteOptions,
        path: Option<PathBuf>,
    ) -> Result<Self, LedgerError> {
        // Opening (settings, the switch to WAL, migrations) lets SQLite wait the whole busy
        // timeout: a file being created by another process is locked in ways a retry of a
        // single pragma does not see through.
        conn.busy_timeout(options.busy_timeout)
            .map_err(storage_error)?;
        let synchronous = match options.durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(storage_error)?;
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(storage_error)?;
        conn.pragma_update(None, "wal_autocheckpoint", 4000)
            .map_err(storage_error)?;
        if path.is_some() {
            // Takes effect only on a file with no pages yet, i.e. before the switch to WAL.
            conn.pragma_update(None, "page_size", LEDGER_PAGE_SIZE)
                .map_err(storage_error)?;
            let mode = switch_to_wal(&conn, options.busy_timeout)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(LedgerError::Internal {
                    detail: format!("the ledger could not switch to WAL mode (got {mode})"),
                });
            }
        }
        busy::retry_while_busy(options.busy_timeout, || schema::migrate(&mut conn))?;
        // From now on SQLite waits only briefly; `with_session` repeats whole operations
        // (see busy.rs).
        conn.busy_timeout(busy::SQLITE_WAIT.min(options.busy_timeout))
            .map_err(storage_error)?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(Self {
            session: Mutex::new(Session { conn, recent: None }),
            path,
            busy_timeout: options.busy_timeout,
            durability: options.durability,
        })
    }

    /// The database file, unless the store is in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether the database file or its write-ahead log holds `needle` anywhere, including
    /// free pages. A stronger check than [`RunStore::run_contains_bytes`] for canary tests.
    pub fn file_contains(&self, needle: &[u8]) -> Result<bool, LedgerError> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        for file in [path.clone(), PathBuf::from(wal)] {
            match std::fs::read(&file) {
                Ok(bytes) if runs::contains(&bytes, needle) => return Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(LedgerError::StateDirectory {
                        detail: format!("cannot read the ledger file: {e}"),
                    });
                }
            }
        }
        Ok(false)
    }

    /// Runs one operation on the session, again while other processes hold the locks it
    /// needs (each attempt is a transaction that rolled back), releasing the session between
    /// attempts; a storage failure comes back naming the file.
    fn with_session<T>(
        &self,
        mut operation: impl FnMut(&mut Session) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        busy::retry_while_busy(self.busy_timeout, || operation(&mut self.lock()))
            .map_err(|e| busy::located(e, self.path.as_deref()))
    }

    fn lock(&self) -> MutexGuard<'_, Session> {
        // A panic while holding the lock leaves no open transaction (they roll back on drop),
        // so the connection is still usable; what it remembers is dropped to be safe.
        self.session.lock().unwrap_or_else(|poisoned| {
            let mut session = poisoned.into_inner();
            session.recent = None;
            session
        })
    }
}

impl RunStore for SqliteStore {
    fn create_or_get(&self, run: NewRun) -> Result<(RunRecord, Admission), LedgerError> {
        self.with_session(|session| runs::create_or_get(&mut session.conn, run.clone()))
    }

    fn find_by_key(&self, submission_key: &str) -> Result<Option<RunRecord>, LedgerError> {
        self.with_session(|session| runs::find_by_key(&session.conn, submission_key))
    }

    fn record(&self, run_id: &RunId) -> Result<RunRecord, LedgerError> {
        self.with_session(|session| runs::record(&session.conn, run_id))
    }

    fn head(&self, run_id: &RunId) -> Result<RunHead, LedgerError> {
        self.with_session(|session| runs::head(&session.conn, run_id))
    }

    fn snapshot(&self, run_id: &RunId) -> Result<RunSnapshot, LedgerError> {
        self.with_session(|session| runs::snapshot(&mut session.conn, run_id))
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<ListedRun>, LedgerError> {
        self.with_session(|session| runs::list_runs(&session.conn, filter))
    }

    fn append(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError> {
        self.with_session(|session| {
            append::append(&mut session.conn, &mut session.recent, run_id, None, events)
        })
    }

    /// Committed at `synchronous = NORMAL`: the WAL is written but not flushed, so the commit
    /// survives the controller's death, and the next `FULL` commit's flush of the same WAL
    /// makes it durable along with everything before it.
    fn append_progress(&self, run_id: &RunId, events: &[RunEvent]) -> Result<Cursor, LedgerError> {
        if self.durability == Durability::Normal {
            return self.append(run_id, events);
        }
        self.with_session(|session| {
            set_synchronous(&session.conn, SYNCHRONOUS_NORMAL)?;
            let appended =
                append::append(&mut session.conn, &mut session.recent, run_id, None, events);
            // Restored whatever happened: every other commit waits for the disk again.
            set_synchronous(&session.conn, SYNCHRONOUS_FULL)?;
            appended
        })
    }

    fn append_at(
        &self,
        run_id: &RunId,
        expected: Cursor,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.with_session(|session| {
            append::append(
                &mut session.conn,
                &mut session.recent,
                run_id,
                Some(expected),
                events,
            )
        })
    }

    fn events_after(
        &self,
        run_id: &RunId,
        after: Cursor,
        limit: usize,
        filter: EventFilter,
    ) -> Result<Vec<StoredEvent>, LedgerError> {
        self.with_session(|session| {
            runs::events_after(&mut session.conn, run_id, after, limit, filter)
        })
    }

    fn latest_cursor(&self, run_id: &RunId) -> Result<Cursor, LedgerError> {
        self.with_session(|session| runs::latest_cursor(&session.conn, run_id))
    }

    fn run_contains_bytes(&self, run_id: &RunId, needle: &[u8]) -> Result<bool, LedgerError> {
        self.with_session(|session| runs::run_contains_bytes(&mut session.conn, run_id, needle))
    }
}

/// Switches the connection's `synchronous` level (`SYNCHRONOUS_NORMAL` or `SYNCHRONOUS_FULL`).
/// The statement comes from the cache: every progress commit switches twice, and parsing the
/// pragma each time is work on the path between a worker's spawn and its outcome.
fn set_synchronous(conn: &Connection, pragma: &str) -> Result<(), LedgerError> {
    conn.prepare_cached(pragma)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .map_err(storage_error)
}

const SYNCHRONOUS_NORMAL: &str = "PRAGMA synchronous = NORMAL";
const SYNCHRONOUS_FULL: &str = "PRAGMA synchronous = FULL";

/// Puts the database in WAL mode. On a new file the switch fails at once with `SQLITE_BUSY`
/// while another process is switching it too (SQLite does not wait on its busy handler
/// there), so it is retried until the busy timeout. Returns the mode now in force.
fn switch_to_wal(conn: &Connection, busy_timeout: Duration) -> Result<String, LedgerError> {
    let deadline = Instant::now() + busy_timeout;
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Ok(mode) => return Ok(mode),
            Err(error) if is_busy(&error) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => return Err(storage_error(error)),
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _)
            if matches!(failure.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_run_model::LogStream;

    use crate::ids::RunKind;

    /// SQLite's number for the connection's `synchronous` setting (2 = FULL, 1 = NORMAL).
    fn synchronous(store: &SqliteStore) -> i64 {
        store
            .lock()
            .conn
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_progress_append_leaves_every_other_commit_waiting_for_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("ledger.sqlite3")).unwrap();
        let run = RunId::new("run-1").unwrap();
        let new = NewRun::new(
            run.clone(),
            "key",
            "t",
            RunKind::Graphspec,
            serde_json::json!({}),
        );
        store.create_or_get(new).unwrap();
        assert_eq!(synchronous(&store), 2);
        store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
        let line = RunEvent::log(None, LogStream::Output, "hello", 1);
        store.append_progress(&run, &[line]).unwrap();
        assert_eq!(synchronous(&store), 2, "FULL again after a progress append");
        // A refused progress batch restores it too.
        let unknown = RunEvent::log(Some(7), LogStream::Output, "who?", 2);
        assert!(store.append_progress(&run, &[unknown]).is_err());
        assert_eq!(
            synchronous(&store),
            2,
            "FULL again after a refused progress append"
        );
        assert_eq!(store.latest_cursor(&run).unwrap().sequence(), 2);
    }
}
