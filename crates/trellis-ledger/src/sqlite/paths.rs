//! Where the default ledger lives and how its directory and file are created privately.

use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::LedgerError;

/// File name of the ledger inside the state home.
pub const LEDGER_FILE_NAME: &str = "ledger.sqlite3";

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

fn state_dir_error(detail: impl Into<String>) -> LedgerError {
    LedgerError::StateDirectory {
        detail: detail.into(),
    }
}

/// The Trellis state home from the environment: `$TRELLIS_HOME`, else `$XDG_STATE_HOME/trellis`,
/// else `~/.local/state/trellis`.
pub fn state_home() -> Result<PathBuf, LedgerError> {
    resolve_state_home(
        std::env::var_os("TRELLIS_HOME"),
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`state_home`] with the three variables passed in. Empty values count as unset; relative
/// values are refused for `TRELLIS_HOME` and ignored for `XDG_STATE_HOME`, as the XDG
/// specification says.
pub fn resolve_state_home(
    trellis_home: Option<OsString>,
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, LedgerError> {
    let set = |value: Option<OsString>| value.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(trellis_home) {
        if dir.is_relative() {
            return Err(state_dir_error("TRELLIS_HOME must be an absolute path"));
        }
        return Ok(dir);
    }
    if let Some(dir) = set(xdg_state_home).filter(|d| d.is_absolute()) {
        return Ok(dir.join("trellis"));
    }
    match set(home) {
        Some(home) if home.is_absolute() => Ok(home.join(".local/state/trellis")),
        _ => Err(state_dir_error(
            "no state directory: set TRELLIS_HOME, XDG_STATE_HOME or HOME",
        )),
    }
}

/// The default ledger file: `<state home>/ledger.sqlite3`.
pub fn default_ledger_path() -> Result<PathBuf, LedgerError> {
    Ok(state_home()?.join(LEDGER_FILE_NAME))
}

/// Makes sure `path` can be opened as a ledger: its directory exists (created 0700), the file
/// is created 0600 when missing, and an existing file is a regular file that starts like an
/// SQLite database (an empty file counts as new).
pub fn prepare_ledger_file(path: &Path) -> Result<(), LedgerError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| state_dir_error(format!("cannot create the state directory: {e}")))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(state_dir_error("the ledger path is a symbolic link"));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(LedgerError::NotALedger {
                detail: "the ledger path is not a regular file".to_owned(),
            });
        }
        Ok(meta) if meta.len() > 0 => return check_magic(path),
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => {
            return Err(state_dir_error(format!(
                "cannot inspect the ledger file: {e}"
            )));
        }
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        // Another process creating it at the same moment is fine.
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(state_dir_error(format!(
            "cannot create the ledger file: {e}"
        ))),
    }
}

fn check_magic(path: &Path) -> Result<(), LedgerError> {
    let mut header = [0u8; 16];
    let mut file = std::fs::File::open(path)
        .map_err(|e| state_dir_error(format!("cannot read the ledger file: {e}")))?;
    let read = file
        .read(&mut header)
        .map_err(|e| state_dir_error(format!("cannot read the ledger file: {e}")))?;
    if read < header.len() || &header != SQLITE_MAGIC {
        return Err(LedgerError::NotALedger {
            detail: "the file is not an SQLite database".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(text: &str) -> Option<OsString> {
        Some(OsString::from(text))
    }

    #[test]
    fn trellis_home_wins_then_xdg_then_home() {
        assert_eq!(
            resolve_state_home(os("/t"), os("/x"), os("/h")).unwrap(),
            PathBuf::from("/t")
        );
        assert_eq!(
            resolve_state_home(None, os("/x"), os("/h")).unwrap(),
            PathBuf::from("/x/trellis")
        );
        assert_eq!(
            resolve_state_home(os(""), os("relative"), os("/h")).unwrap(),
            PathBuf::from("/h/.local/state/trellis")
        );
        assert!(resolve_state_home(os("rel"), None, os("/h")).is_err());
        assert!(resolve_state_home(None, None, None).is_err());
    }
}
