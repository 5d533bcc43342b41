//! Transactions whose BEGIN and COMMIT come from the statement cache, shared by appends and
//! multi-statement reads.

use std::ops::Deref;

use rusqlite::Connection;

use crate::error::LedgerError;
use crate::sqlite::error::storage_error;

/// A transaction whose BEGIN and COMMIT come from the statement cache: an append is on every
/// step's critical path and a snapshot or event page on every observer's, and parsing both
/// statements each time showed in profiles. Rolls back unless committed.
pub(super) struct CachedTransaction<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> CachedTransaction<'c> {
    /// An IMMEDIATE transaction: takes the write lock at once, as every append needs it.
    pub(super) fn write(conn: &'c Connection) -> Result<Self, LedgerError> {
        Self::begin(conn, "BEGIN IMMEDIATE")
    }

    /// A DEFERRED transaction: one consistent view for a read of several statements.
    pub(super) fn read(conn: &'c Connection) -> Result<Self, LedgerError> {
        Self::begin(conn, "BEGIN DEFERRED")
    }

    fn begin(conn: &'c Connection, sql: &str) -> Result<Self, LedgerError> {
        run_cached(conn, sql)?;
        Ok(Self { conn, open: true })
    }

    pub(super) fn commit(mut self) -> Result<(), LedgerError> {
        run_cached(self.conn, "COMMIT")?;
        self.open = false;
        Ok(())
    }
}

impl Drop for CachedTransaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // Nothing was committed; a failed rollback leaves SQLite to roll back on close.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

impl Deref for CachedTransaction<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

fn run_cached(conn: &Connection, sql: &str) -> Result<(), LedgerError> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .map_err(storage_error)
}
