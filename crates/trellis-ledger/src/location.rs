//! Where a ledger lives — an SQLite file (the default) or a PostgreSQL URL — and opening it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::LedgerError;
use crate::sqlite::SqliteStore;
use crate::store::RunStore;

/// The environment variable that selects the ledger (`postgres://…` or an SQLite file path).
pub const LEDGER_ENV: &str = "TRELLIS_LEDGER";

/// A ledger location, as given by `--ledger` or [`LEDGER_ENV`].
#[derive(Clone, PartialEq, Eq)]
pub enum LedgerLocation {
    /// An SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`). It may carry a password,
    /// so it is only ever shown through [`redact_url`].
    Postgres(String),
}

impl LedgerLocation {
    /// Reads a location: a `postgres://` / `postgresql://` URL, `sqlite:PATH`, or a file path.
    /// Other URL schemes are refused rather than taken for file names.
    pub fn parse(text: &str) -> Result<Self, LedgerError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(LedgerError::invalid_location(
                "the ledger location is empty",
            ));
        }
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(Self::Postgres(text.to_owned()));
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(LedgerError::invalid_location("sqlite: needs a file path"));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(LedgerError::invalid_location(format!(
                "unsupported ledger scheme {:?} (use a postgres:// URL or a file path)",
                scheme.chars().take(32).collect::<String>()
            )));
        }
        Ok(Self::Sqlite(PathBuf::from(text)))
    }

    /// The location named by [`LEDGER_ENV`], if it is set and not empty.
    pub fn from_env() -> Result<Option<Self>, LedgerError> {
        match std::env::var(LEDGER_ENV) {
            Ok(text) if !text.trim().is_empty() => Self::parse(&text).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(LedgerError::invalid_location(format!(
                "{LEDGER_ENV} is not valid UTF-8"
            ))),
        }
    }

    /// Opens the ledger with default options (creating and migrating it when needed).
    pub fn open(&self) -> Result<Arc<dyn RunStore>, LedgerError> {
        match self {
            Self::Sqlite(path) => Ok(Arc::new(SqliteStore::open(path)?)),
            Self::Postgres(url) => open_postgres(url),
        }
    }
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Arc<dyn RunStore>, LedgerError> {
    Ok(Arc::new(crate::postgres::PostgresStore::open(url)?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<Arc<dyn RunStore>, LedgerError> {
    Err(LedgerError::invalid_location(
        "this build of trellis has no PostgreSQL support",
    ))
}

/// Shows the location without any password.
impl fmt::Display for LedgerLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => f.write_str(&redact_url(url)),
        }
    }
}

impl fmt::Debug for LedgerLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
        }
    }
}

/// A connection URL with the password of its user part and any `password=` parameter replaced
/// by `***`, safe to print.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{hosts}"),
            None => format!("{user_info}@{hosts}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let parameters: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                        format!("{key}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", parameters.join("&"))
        }
        None => tail.to_owned(),
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{authority}{tail}"),
        None => format!("{authority}{tail}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_files_and_foreign_schemes_are_told_apart() {
        assert!(matches!(
            LedgerLocation::parse("postgres://h/db").unwrap(),
            LedgerLocation::Postgres(_)
        ));
        assert!(matches!(
            LedgerLocation::parse("PostgreSQL://h/db").unwrap(),
            LedgerLocation::Postgres(_)
        ));
        assert_eq!(
            LedgerLocation::parse("/var/lib/trellis/ledger.sqlite3").unwrap(),
            LedgerLocation::Sqlite(PathBuf::from("/var/lib/trellis/ledger.sqlite3"))
        );
        assert_eq!(
            LedgerLocation::parse("sqlite:///tmp/l.sqlite3").unwrap(),
            LedgerLocation::Sqlite(PathBuf::from("/tmp/l.sqlite3"))
        );
        for bad in ["", "  ", "mysql://h/db", "sqlite:"] {
            let error = LedgerLocation::parse(bad).unwrap_err();
            assert_eq!(error.code(), "ledger.location_invalid", "{bad:?}");
        }
    }

    #[test]
    fn passwords_never_show() {
        let cases = [
            (
                "postgres://alice:s3cr3t@db.example:5432/trellis",
                "postgres://alice:***@db.example:5432/trellis",
            ),
            (
                "postgresql://alice:p%40ss@h1,h2/db?sslmode=disable&password=s3cr3t",
                "postgresql://alice:***@h1,h2/db?sslmode=disable&password=***",
            ),
            ("postgres://alice@h/db", "postgres://alice@h/db"),
            ("postgres://h", "postgres://h"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown);
            let location = LedgerLocation::parse(url).unwrap();
            assert_eq!(location.to_string(), shown);
            assert!(!format!("{location:?}").contains("s3cr3t"));
        }
    }
}
