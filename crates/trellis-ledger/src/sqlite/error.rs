//! SQLite failures as ledger errors, without SQLite's message (which may quote SQL or data).

use rusqlite::ErrorCode;

use crate::error::LedgerError;

/// Maps an SQLite failure to a ledger error without its message, which may quote SQL or data.
pub(crate) fn storage_error(error: rusqlite::Error) -> LedgerError {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => LedgerError::Busy,
            ErrorCode::DatabaseCorrupt => {
                LedgerError::corrupt("SQLite reported a malformed database")
            }
            ErrorCode::NotADatabase => LedgerError::NotALedger {
                detail: "the file is not an SQLite database".to_owned(),
            },
            _ => LedgerError::Storage {
                code: failure.extended_code,
            },
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => {
            LedgerError::corrupt("a stored value has an unexpected type")
        }
        rusqlite::Error::QueryReturnedNoRows => LedgerError::Internal {
            detail: "a row the ledger expected is missing".to_owned(),
        },
        _ => LedgerError::Internal {
            detail: "unexpected SQLite interface failure".to_owned(),
        },
    }
}
