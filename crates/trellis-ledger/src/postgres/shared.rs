//! What every job of one PostgreSQL store shares: the pool, the schema and the notification
//! listener.

use std::sync::Arc;

use deadpool_postgres::Pool;

use crate::postgres::notify::Listener;

/// What every job of one store shares: the pool, the schema and the notification listener.
pub(crate) struct Shared {
    pub(super) pool: Pool,
    /// The schema holding the ledger (`current_schema()` of every connection).
    pub(super) schema: String,
    pub(super) listener: Arc<Listener>,
}
