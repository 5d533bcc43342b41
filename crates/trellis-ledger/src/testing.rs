//! Helpers other crates' tests use to check what the ledger holds.

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::store::RunStore;

/// Whether `needle` occurs anywhere in what `store` keeps for `run_id`: its submission, every
/// event and its snapshot. Canary tests plant a secret in the environment, run, and assert
/// this is `false`. Stored text is JSON, so the needle's JSON-escaped form is searched too.
pub fn scan_for(store: &dyn RunStore, run_id: &RunId, needle: &str) -> Result<bool, LedgerError> {
    if store.run_contains_bytes(run_id, needle.as_bytes())? {
        return Ok(true);
    }
    let quoted = serde_json::Value::String(needle.to_owned()).to_string();
    let escaped = &quoted[1..quoted.len() - 1];
    Ok(escaped != needle && store.run_contains_bytes(run_id, escaped.as_bytes())?)
}

/// Fresh PostgreSQL schemas for tests, on the server named by [`postgres::URL_ENV`].
#[cfg(feature = "postgres")]
pub mod postgres {
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::durability::Durability;
    use crate::error::LedgerError;
    use crate::postgres::{PostgresOptions, PostgresStore};

    /// The variable holding the test server's URL (`scripts/postgres.sh start` sets it).
    pub const URL_ENV: &str = "TRELLIS_TEST_POSTGRES_URL";

    /// The test server's URL. `Ok(None)` when it is unset outside CI (the PostgreSQL leg of a
    /// suite is then skipped); an error when it is unset and `CI` is set, because CI must run
    /// that leg, not skip it.
    pub fn server_url() -> Result<Option<String>, String> {
        match std::env::var(URL_ENV) {
            Ok(url) if !url.trim().is_empty() => Ok(Some(url)),
            _ if std::env::var_os("CI").is_some() => Err(format!(
                "{URL_ENV} is not set: CI must run the PostgreSQL tests (scripts/test starts a server)"
            )),
            _ => Ok(None),
        }
    }

    /// A schema of its own for one test, dropped with everything in it when this is dropped.
    #[derive(Debug)]
    pub struct TestSchema {
        url: String,
        name: String,
        /// The store that created the schema; it also drops it.
        owner: Option<PostgresStore>,
    }

    impl TestSchema {
        /// Creates a fresh, migrated ledger schema with a unique name on the server at `url`.
        pub fn create(url: &str) -> Result<Self, LedgerError> {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let name = format!(
                "t_{}_{}_{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed),
                &uuid::Uuid::now_v7().simple().to_string()[20..]
            );
            Self::attach(url, &name)
        }

        /// For a test: a fresh schema on the test server, or `None` (said on stderr) when no
        /// server is configured outside CI. Panics in CI without a server, or when the schema
        /// cannot be made: it serves tests only, where failing loudly is the point.
        pub fn for_test() -> Option<Self> {
            let url = server_url().unwrap_or_else(|message| panic!("{message}"));
            let Some(url) = url else {
                eprintln!("skipped: set {URL_ENV} to run the PostgreSQL tests");
                return None;
            };
            match Self::create(&url) {
                Ok(schema) => Some(schema),
                Err(error) => panic!("cannot create a test schema on {URL_ENV}: {error}"),
            }
        }

        /// The ledger schema `name` (created when missing), dropped when this is dropped.
        pub fn attach(url: &str, name: &str) -> Result<Self, LedgerError> {
            let mut schema = Self {
                url: url.to_owned(),
                name: name.to_owned(),
                owner: None,
            };
            schema.owner = Some(schema.open()?);
            Ok(schema)
        }

        /// A schema someone else created and will drop (a child process's view of its
        /// parent's schema); dropping this leaves it in place.
        pub fn existing(url: &str, name: &str) -> Self {
            Self {
                url: url.to_owned(),
                name: name.to_owned(),
                owner: None,
            }
        }

        /// Options for a store on this schema: small pool, fast (NORMAL) durability.
        pub fn options(&self) -> PostgresOptions {
            PostgresOptions {
                schema: Some(self.name.clone()),
                pool_size: 4,
                durability: Durability::Normal,
                ..PostgresOptions::default()
            }
        }

        /// Opens another store (its own connections) on this schema.
        pub fn open(&self) -> Result<PostgresStore, LedgerError> {
            PostgresStore::open_with(&self.url, self.options())
        }

        pub fn name(&self) -> &str {
            &self.name
        }

        pub fn url(&self) -> &str {
            &self.url
        }

        /// A ledger location URL that names this schema through libpq's standard `options`
        /// parameter (what `--ledger` / `TRELLIS_LEDGER` take for a child process).
        pub fn location_url(&self) -> String {
            let separator = if self.url.contains('?') { '&' } else { '?' };
            format!(
                "{}{separator}options=-c%20search_path%3D{}",
                self.url, self.name
            )
        }

        /// Leaves the schema in place when this is dropped (for a child process's view).
        pub fn keep(mut self) {
            self.owner = None;
        }
    }

    impl Drop for TestSchema {
        fn drop(&mut self) {
            if let Some(owner) = self.owner.take() {
                // Best effort: a schema left behind only costs space on a throwaway server.
                let _ = owner.drop_own_schema();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{NewRun, RunKind, SqliteStore};

    #[test]
    fn needles_with_json_special_characters_are_found_in_their_escaped_form() {
        let store = SqliteStore::open_in_memory().unwrap();
        let run_id = RunId::new("run-1").unwrap();
        let submission = json!({"token": "sk-\"quoted\"\\path"});
        let run = NewRun::new(run_id.clone(), "k", "t", RunKind::Graphspec, submission);
        store.create_or_get(run).unwrap();
        assert!(scan_for(&store, &run_id, "sk-\"quoted\"\\path").unwrap());
        assert!(!scan_for(&store, &run_id, "sk-\"other").unwrap());
    }

    #[test]
    fn stores_are_shareable_trait_objects() {
        fn shareable<T: Send + Sync + ?Sized>() {}
        shareable::<dyn RunStore>();
        shareable::<SqliteStore>();
    }
}
