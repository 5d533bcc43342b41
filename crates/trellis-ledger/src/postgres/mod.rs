//! The PostgreSQL ledger: the same runs, events, cursors and snapshots as the SQLite ledger,
//! in a server many hosts share.
//!
//! Runs are rows of `runs` (immutable admission) and `run_heads` (cursor, phase, progress);
//! events and execution snapshots are rows keyed `(run, number)`. Admission holds an
//! advisory lock on the submission key's hash; an append holds the run's head row lock. See
//! `docs/decisions/ledger-postgres.md` for the choices; [`leases`] holds the controller leases,
//! fencing tokens and the dispatch queue of distributed execution, [`logs`] the log lines worker
//! hosts push while their executions run.

mod append;
mod bridge;
pub mod config;
pub mod dispatch;
pub mod dispatch_notes;
mod error;
mod fence;
pub mod leases;
pub mod logs;
mod note;
mod notify;
mod outage;
mod relay;
mod relay_host;
mod run_store;
mod runs;
pub mod schema;
mod settlements;
mod shared;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use self::bridge::Bridge;
pub use self::config::{PostgresOptions, check_schema_name};
use self::notify::Listener;
use crate::cursor::Cursor;
use crate::error::LedgerError;
use crate::event::RunEvent;
use crate::ids::RunId;
use crate::stored::prepare_batch;

use self::shared::Shared;

/// A ledger in a PostgreSQL database. Cheap to share across threads; safe to call from plain
/// threads and from inside any tokio runtime (see [`bridge`](self) for how).
pub struct PostgresStore {
    shared: Arc<Shared>,
    bridge: Bridge,
    operation_timeout: Duration,
    outage_window: Duration,
    described: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("server", &self.described)
            .field("schema", &self.shared.schema)
            .finish()
    }
}

impl PostgresStore {
    /// Connects to the ledger at `url` (`postgres://user:password@host:port/database`) with
    /// default options, creating or migrating its tables when needed.
    pub fn open(url: &str) -> Result<Self, LedgerError> {
        Self::open_with(url, PostgresOptions::default())
    }

    /// Connects with explicit options.
    pub fn open_with(url: &str, options: PostgresOptions) -> Result<Self, LedgerError> {
        let config = config::connection_config(url, &options)?;
        let described = config::describe(&config);
        let pool_size = options.pool_size.max(1);
        let create_schema = options.schema.clone();
        let setup_config = config.clone();
        let connect_timeout = options.connect_timeout;
        let setup = move || async move {
            let manager = Manager::from_config(
                setup_config.clone(),
                NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            let pool = Pool::builder(manager)
                .max_size(pool_size)
                .runtime(Runtime::Tokio1)
                .create_timeout(Some(connect_timeout))
                .wait_timeout(Some(connect_timeout))
                .build()
                .map_err(|_| LedgerError::Internal {
                    detail: "cannot build the ledger connection pool".to_owned(),
                })?;
            let mut client = runs::connection_to(&pool).await?;
            let schema =
                schema::migrate(&mut client, create_schema.as_deref(), schema::MIGRATIONS).await?;
            drop(client);
            Ok(Arc::new(Shared {
                pool,
                schema,
                listener: Arc::new(Listener::new(setup_config)),
            }))
        };
        let setup_timeout = options.connect_timeout.saturating_mul(2) + options.operation_timeout;
        let (bridge, shared) = Bridge::start(setup, setup_timeout)?;
        Ok(Self {
            shared,
            bridge,
            operation_timeout: options.operation_timeout,
            outage_window: options.outage_window,
            described,
        })
    }

    /// The schema holding this ledger's tables.
    pub fn schema(&self) -> &str {
        &self.shared.schema
    }

    /// Relays this store's notes to the controller holding the other end of `stream`, for as
    /// long as it keeps it open (the host's side; see [`Self::listen_through`]).
    pub fn relay_notes(&self, stream: std::os::unix::net::UnixStream) -> Result<(), LedgerError> {
        self.call(move |shared| async move {
            tokio::spawn(relay_host::serve(Arc::clone(&shared.listener), stream));
            Ok(())
        })
    }

    /// Takes notes from the host at the other end of `stream` instead of listening on a
    /// connection of this store's own, until the host hangs up (the controller's side). Call it
    /// before anything waits on this store.
    pub fn listen_through(&self, stream: std::os::unix::net::UnixStream) {
        self.shared.listener.listen_through(stream);
    }

    /// Drops this store's schema and everything in it (test schemas only; see
    /// [`crate::testing::postgres::TestSchema`]).
    pub(crate) fn drop_own_schema(self) -> Result<(), LedgerError> {
        let schema = self.shared.schema.clone();
        check_schema_name(&schema)?;
        self.call(move |shared| async move {
            let client = runs::connection(&shared).await?;
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await
                .map_err(error::server_error)
        })
    }

    /// Runs `job` with the store's shared state on its I/O thread.
    fn call<T, F>(&self, job: impl FnOnce(Arc<Shared>) -> F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, LedgerError>> + Send + 'static,
    {
        self.bridge
            .call(self.operation_timeout, job(Arc::clone(&self.shared)))
    }

    fn append_checked(
        &self,
        run_id: &RunId,
        expected: Option<Cursor>,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.append_with_fence(run_id, expected, None, events)
    }

    /// Appends `events` only while `fencing_token` is the run's current controller lease
    /// (unexpired); otherwise nothing is stored and the answer is [`LedgerError::Fenced`].
    pub fn append_fenced(
        &self,
        run_id: &RunId,
        fencing_token: i64,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.append_with_fence(run_id, None, Some(fencing_token), events)
    }

    /// [`RunStore::append_at`](crate::store::RunStore::append_at) under the same fence as
    /// [`Self::append_fenced`].
    pub fn append_at_fenced(
        &self,
        run_id: &RunId,
        expected: Cursor,
        fencing_token: i64,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        self.append_with_fence(run_id, Some(expected), Some(fencing_token), events)
    }

    fn append_with_fence(
        &self,
        run_id: &RunId,
        expected: Option<Cursor>,
        fence: Option<i64>,
        events: &[RunEvent],
    ) -> Result<Cursor, LedgerError> {
        let prepared: Vec<(RunEvent, String)> = prepare_batch(events)?
            .into_iter()
            .map(|(event, text)| (event.into_owned(), text))
            .collect();
        self.append_riding_out(run_id, expected, &prepared, |batch| {
            let run_id = run_id.clone();
            self.call(move |shared| async move {
                append::append(&shared, &run_id, expected, fence, batch).await
            })
        })
    }
}
