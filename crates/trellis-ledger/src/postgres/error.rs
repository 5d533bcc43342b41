//! Maps driver and pool failures to ledger errors without their text, which may quote SQL,
//! stored values or connection details.

use std::error::Error as _;

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::error::LedgerError;

/// Unavailability that waiting does not cure: the server answered, and said no.
const REFUSED_CREDENTIALS: &str = "the ledger server refused the credentials";
const MISSING_DATABASE: &str = "the ledger database does not exist on the server";
const FAILED_AUTHENTICATION: &str = "authentication with the ledger server failed";

/// Whether `error` is an outage worth riding out: the server could not be reached, closed the
/// connection, was shutting down or did not answer in time (not a refusal of the credentials
/// or of the database, which retrying cannot fix).
pub(crate) fn is_outage(error: &LedgerError) -> bool {
    match error {
        LedgerError::Unavailable { detail } => {
            ![REFUSED_CREDENTIALS, MISSING_DATABASE, FAILED_AUTHENTICATION]
                .contains(&detail.as_str())
        }
        _ => false,
    }
}

/// The ledger error for a failed statement or connection.
pub(crate) fn server_error(error: tokio_postgres::Error) -> LedgerError {
    if let Some(state) = error.code() {
        return state_error(state);
    }
    if error.is_closed() {
        return LedgerError::unavailable("the connection to the ledger server was closed");
    }
    if let Some(io) = io_source(&error) {
        return LedgerError::unavailable(format!("cannot reach the ledger server: {io}"));
    }
    // Driver-side failures: configuration (a missing password), authentication protocol,
    // a value of an unexpected type. Their kind is only visible in the text, which never
    // includes the password; we still report a fixed wording.
    let text = error.to_string();
    if text.starts_with("error deserializing") {
        return LedgerError::corrupt("a stored value has an unexpected type");
    }
    if text.starts_with("invalid configuration") || text.starts_with("invalid connection string") {
        return LedgerError::invalid_location(
            "the PostgreSQL connection settings are incomplete (user, host, password?)",
        );
    }
    if text.starts_with("authentication error") {
        return LedgerError::unavailable(FAILED_AUTHENTICATION);
    }
    if text.starts_with("timeout") {
        return LedgerError::unavailable("the ledger server did not answer in time");
    }
    if text.starts_with("error serializing")
        || text.starts_with("invalid column")
        || text.starts_with("expected")
        || text.starts_with("query returned")
    {
        return LedgerError::Internal {
            detail: "a ledger statement does not match the schema".to_owned(),
        };
    }
    LedgerError::unavailable("unexpected failure talking to the ledger server")
}

fn state_error(state: &SqlState) -> LedgerError {
    match *state {
        SqlState::LOCK_NOT_AVAILABLE
        | SqlState::T_R_SERIALIZATION_FAILURE
        | SqlState::T_R_DEADLOCK_DETECTED => LedgerError::Busy,
        SqlState::INVALID_PASSWORD | SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            LedgerError::unavailable(REFUSED_CREDENTIALS)
        }
        SqlState::INVALID_CATALOG_NAME => LedgerError::unavailable(MISSING_DATABASE),
        SqlState::TOO_MANY_CONNECTIONS
        | SqlState::CANNOT_CONNECT_NOW
        | SqlState::ADMIN_SHUTDOWN
        | SqlState::QUERY_CANCELED
        | SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT => LedgerError::unavailable(format!(
            "the ledger server is not serving requests (SQLSTATE {})",
            state.code()
        )),
        SqlState::DISK_FULL | SqlState::INSUFFICIENT_RESOURCES => LedgerError::ServerDiskFull {
            sqlstate: state.code().to_owned(),
        },
        SqlState::READ_ONLY_SQL_TRANSACTION => LedgerError::ServerReadOnly {
            sqlstate: state.code().to_owned(),
        },
        SqlState::INSUFFICIENT_PRIVILEGE => LedgerError::ServerPermission {
            sqlstate: state.code().to_owned(),
        },
        SqlState::OUT_OF_MEMORY | SqlState::CONFIGURATION_LIMIT_EXCEEDED => {
            LedgerError::unavailable(format!(
                "the ledger server is out of memory or another resource (SQLSTATE {}); try again \
                 later or raise its limits",
                state.code()
            ))
        }
        SqlState::DATA_CORRUPTED | SqlState::INDEX_CORRUPTED => LedgerError::corrupt(format!(
            "the ledger server reports damaged data (SQLSTATE {}); restore the database from a \
             backup or REINDEX",
            state.code()
        )),
        SqlState::IO_ERROR => LedgerError::unavailable(
            "the ledger server could not read or write its disk (SQLSTATE 58030); check the \
             server's storage",
        ),
        _ => LedgerError::ServerStorage {
            sqlstate: state.code().to_owned(),
        },
    }
}

fn io_source(error: &tokio_postgres::Error) -> Option<&std::io::Error> {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = cause.source();
    }
    None
}

/// The ledger error for a failure to get a pooled connection.
pub(crate) fn pool_error(error: PoolError) -> LedgerError {
    match error {
        PoolError::Backend(error) => server_error(error),
        PoolError::Timeout(_) => {
            LedgerError::unavailable("no connection to the ledger server became free in time")
        }
        PoolError::Closed => LedgerError::unavailable("the ledger connection pool is closed"),
        PoolError::NoRuntimeSpecified | PoolError::PostCreateHook(_) => LedgerError::Internal {
            detail: "the ledger connection pool is misconfigured".to_owned(),
        },
    }
}

/// Whether `error` is a unique violation of `constraint`.
pub(crate) fn violates(error: &tokio_postgres::Error, constraint: &str) -> bool {
    error.code() == Some(&SqlState::UNIQUE_VIOLATION)
        && error
            .as_db_error()
            .and_then(|db| db.constraint())
            .is_some_and(|name| name == constraint)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a storage failure on the server means, in the same codes the SQLite ledger uses,
    /// instead of a bare SQLSTATE.
    #[test]
    fn server_storage_states_are_named_with_what_to_do() {
        let cases = [
            (SqlState::DISK_FULL, "ledger.disk_full", "out of disk space"),
            (
                SqlState::READ_ONLY_SQL_TRANSACTION,
                "ledger.read_only",
                "no writes",
            ),
            (
                SqlState::INSUFFICIENT_PRIVILEGE,
                "ledger.permission_denied",
                "GRANT",
            ),
            (
                SqlState::OUT_OF_MEMORY,
                "ledger.unavailable",
                "out of memory",
            ),
            (SqlState::DATA_CORRUPTED, "ledger.corrupt", "damaged data"),
            (SqlState::IO_ERROR, "ledger.unavailable", "disk"),
        ];
        for (state, code, phrase) in cases {
            let error = state_error(&state);
            assert_eq!(error.code(), code, "{error}");
            let text = error.to_string();
            assert!(
                text.contains(state.code()) && text.to_lowercase().contains(&phrase.to_lowercase()),
                "{text}"
            );
        }
        let other = state_error(&SqlState::SYNTAX_ERROR);
        assert_eq!(other.code(), "ledger.storage");
    }
}
