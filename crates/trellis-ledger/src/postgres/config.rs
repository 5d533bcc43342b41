//! Connection settings: a `postgres://` URL plus [`PostgresOptions`], with libpq's usual
//! environment fallbacks for what the URL leaves out.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::Config;

use crate::durability::Durability;
use crate::error::LedgerError;

/// Longest schema name PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_SCHEMA_BYTES: usize = 63;

/// Tuning for [`super::PostgresStore::open_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The schema holding the ledger's tables, created when missing; `None` uses the URL's or
    /// the server's `search_path` (normally `public`). Lowercase letters, digits and `_`.
    pub schema: Option<String>,
    /// Most connections the store keeps open (at least 1).
    pub pool_size: usize,
    /// How long connecting to the server may take.
    pub connect_timeout: Duration,
    /// How long a write waits for another writer's lock on the same run before failing with
    /// `Busy` (the SQLite backend's busy timeout).
    pub lock_timeout: Duration,
    /// How long one call may take in all before failing with `Unavailable`.
    pub operation_timeout: Duration,
    /// `Full` waits for every commit to reach the server's disk (`synchronous_commit = on`);
    /// `Normal` does not (a server crash may lose the last commits), for tests.
    pub durability: Durability,
    /// How long a call keeps retrying while the server cannot be reached (a restart, a
    /// failover, a dropped connection) before it fails with `Unavailable`
    /// (`TRELLIS_LEDGER_OUTAGE_MS`, default 30 s). An append that may have landed before the
    /// connection broke is looked for first and never stored twice.
    pub outage_window: Duration,
}

/// The variable that sets [`PostgresOptions::outage_window`] in milliseconds.
pub const OUTAGE_WINDOW_ENV: &str = "TRELLIS_LEDGER_OUTAGE_MS";

/// The variable that sets [`PostgresOptions::pool_size`] (1 to 64; default 8). A run's
/// detached controller is given 4 unless it is set, so many concurrent runs fit in the
/// server's `max_connections`.
pub const POOL_SIZE_ENV: &str = "TRELLIS_LEDGER_POOL";

/// Connections a store keeps open at most when [`POOL_SIZE_ENV`] does not say.
const DEFAULT_POOL_SIZE: usize = 8;

fn default_pool_size() -> usize {
    pool_size_from(std::env::var(POOL_SIZE_ENV).ok().as_deref())
}

/// The pool size a [`POOL_SIZE_ENV`] value asks for; the default when it is absent or not a
/// number from 1 to 64.
fn pool_size_from(value: Option<&str>) -> usize {
    value
        .and_then(|text| text.trim().parse::<usize>().ok())
        .filter(|size| (1..=64).contains(size))
        .unwrap_or(DEFAULT_POOL_SIZE)
}

fn default_outage_window() -> Duration {
    std::env::var(OUTAGE_WINDOW_ENV)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: None,
            pool_size: default_pool_size(),
            connect_timeout: Duration::from_secs(10),
            lock_timeout: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(60),
            durability: Durability::Full,
            outage_window: default_outage_window(),
        }
    }
}

/// Checks a schema name: 1..=63 bytes of lowercase ASCII letters, digits and `_`, starting
/// with a letter or `_`, so it needs no quoting anywhere.
pub fn check_schema_name(name: &str) -> Result<(), LedgerError> {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !first_ok || !rest_ok || name.len() > MAX_SCHEMA_BYTES || name.starts_with("pg_") {
        return Err(LedgerError::invalid_location(format!(
            "a ledger schema name is 1..={MAX_SCHEMA_BYTES} lowercase letters, digits and '_', \
             starting with a letter or '_' (and not 'pg_')"
        )));
    }
    Ok(())
}

/// The driver configuration for `url` under `options`.
pub(super) fn connection_config(
    url: &str,
    options: &PostgresOptions,
) -> Result<Config, LedgerError> {
    if let Some(schema) = &options.schema {
        check_schema_name(schema)?;
    }
    let mut config = Config::from_str(url).map_err(|_| {
        LedgerError::invalid_location(
            "the PostgreSQL URL is malformed (postgres://user:password@host:port/database)",
        )
    })?;
    let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    if config.get_user().is_none()
        && let Some(user) = env("PGUSER").or_else(|| env("USER"))
    {
        config.user(user);
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_hosts().is_empty() {
        // libpq's default: the local server's socket directory.
        config.host(env("PGHOST").as_deref().unwrap_or("/var/run/postgresql"));
    }
    if config.get_dbname().is_none()
        && let Some(database) = env("PGDATABASE")
    {
        config.dbname(database);
    }
    config.connect_timeout(options.connect_timeout);
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(30));
    if config.get_application_name().is_none() {
        config.application_name("trellis");
    }
    let mut settings = config.get_options().unwrap_or_default().to_owned();
    let mut set = |name: &str, value: &str| {
        if !settings.is_empty() {
            settings.push(' ');
        }
        settings.push_str(&format!("-c {name}={value}"));
    };
    set(
        "lock_timeout",
        &format!("{}", options.lock_timeout.as_millis().max(1)),
    );
    // A transaction left open by a stalled client must not hold a run's row for ever.
    set("idle_in_transaction_session_timeout", "60000");
    set("client_encoding", "UTF8");
    set("TimeZone", "UTC");
    // Every statement is a key lookup whose best plan does not depend on the values: one
    // generic plan per prepared statement, instead of planning its first five executions
    // anew (planning cost more than running them, on every new controller's connections).
    set("plan_cache_mode", "force_generic_plan");
    if options.durability == Durability::Normal {
        set("synchronous_commit", "off");
    }
    if let Some(schema) = &options.schema {
        set("search_path", schema);
    }
    config.options(settings);
    Ok(config)
}

/// Host, port and database of `config`, for messages and `Debug` (never the password).
pub(super) fn describe(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config.get_dbname().unwrap_or_default();
    format!("{host}:{port}/{database}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_size_variable_is_taken_within_its_range_only() {
        assert_eq!(pool_size_from(None), DEFAULT_POOL_SIZE);
        assert_eq!(pool_size_from(Some("4")), 4);
        assert_eq!(pool_size_from(Some(" 64 ")), 64);
        for refused in ["0", "65", "-1", "four", ""] {
            assert_eq!(
                pool_size_from(Some(refused)),
                DEFAULT_POOL_SIZE,
                "{refused:?}"
            );
        }
    }

    #[test]
    fn schema_names_need_no_quoting() {
        for good in ["trellis", "_t", "t_2_x", &"a".repeat(63)] {
            assert!(check_schema_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Trellis",
            "2t",
            "a-b",
            "a b",
            "x;drop",
            "pg_x",
            &"a".repeat(64),
        ] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_add_session_settings_after_the_urls_own() {
        let options = PostgresOptions {
            schema: Some("team".to_owned()),
            lock_timeout: Duration::from_millis(1500),
            ..PostgresOptions::default()
        };
        let config = connection_config(
            "postgres://u:pw@db.local:6543/ledger?options=-c%20statement_timeout%3D9000",
            &options,
        )
        .unwrap();
        let settings = config.get_options().unwrap();
        assert!(
            settings.starts_with("-c statement_timeout=9000 "),
            "{settings}"
        );
        assert!(settings.contains("-c lock_timeout=1500"), "{settings}");
        assert!(settings.ends_with("-c search_path=team"), "{settings}");
        assert_eq!(describe(&config), "db.local:6543/ledger");
        assert!(!format!("{config:?}").contains("pw"));
    }

    #[test]
    fn malformed_urls_are_refused_without_echoing_them() {
        let error = connection_config(
            "postgres://u:hunter2@host:notaport/db",
            &PostgresOptions::default(),
        )
        .unwrap_err();
        assert_eq!(error.code(), "ledger.location_invalid");
        assert!(!error.to_string().contains("hunter2"));
    }
}
