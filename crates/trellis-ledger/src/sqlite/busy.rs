//! Waiting out other processes' write locks, and naming the ledger file in failures its
//! storage causes.
//!
//! SQLite's own busy handler polls with sleeps that grow to 100 ms, so under many concurrent
//! writers (20 runs' controllers on one home) a waiter keeps missing the short gaps between
//! other commits and starves until its timeout. Every store operation is one transaction that
//! rolls back when it fails, so the store instead lets SQLite wait only briefly and repeats the
//! whole operation after a short, jittered pause until its own deadline: waiters poll often and
//! out of step, and whichever finds the lock free first takes it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::LedgerError;

/// How long SQLite itself waits for a lock inside one attempt (its handler's first few short
/// sleeps); the store's retry loop does the rest of the waiting.
pub(super) const SQLITE_WAIT: Duration = Duration::from_millis(10);

/// The longest pause between two attempts.
const MAX_PAUSE_MS: u64 = 12;

/// The environment variable that overrides the default busy timeout, in milliseconds.
pub const BUSY_TIMEOUT_ENV: &str = "TRELLIS_LEDGER_BUSY_TIMEOUT_MS";

/// The busy timeout of a store opened with default options: `$TRELLIS_LEDGER_BUSY_TIMEOUT_MS`
/// when it is a number, else `fallback`.
pub(super) fn busy_timeout_from_env(fallback: Duration) -> Duration {
    std::env::var(BUSY_TIMEOUT_ENV)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map_or(fallback, Duration::from_millis)
}

/// Runs `attempt` until it does not fail with [`LedgerError::Busy`] or `timeout` has passed
/// since the first try; pauses a few jittered milliseconds between attempts.
pub(super) fn retry_while_busy<T>(
    timeout: Duration,
    mut attempt: impl FnMut() -> Result<T, LedgerError>,
) -> Result<T, LedgerError> {
    let started = Instant::now();
    let mut tries: u32 = 0;
    loop {
        match attempt() {
            Err(LedgerError::Busy) if started.elapsed() < timeout => {
                tries = tries.saturating_add(1);
                std::thread::sleep(pause(tries));
            }
            other => return other,
        }
    }
}

/// A pause that grows from about 1 ms to at most [`MAX_PAUSE_MS`], drawn at random so that
/// waiting processes do not retry in lockstep.
fn pause(tries: u32) -> Duration {
    let ceiling = (1u64 << tries.min(4)).min(MAX_PAUSE_MS);
    Duration::from_micros(500 + jitter() % (ceiling * 1000))
}

/// A cheap pseudo-random number (xorshift over a per-process state seeded from the clock and
/// the pid): fairness needs waiters out of step, not unpredictability.
fn jitter() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        x = ((u64::from(nanos) << 20) ^ u64::from(std::process::id())) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    x
}

/// Replaces a bare storage failure by the error it means for the ledger at `path` (`None`: in
/// memory), in words that say what to do: a read-only file, a full disk, a file that cannot be
/// opened, an I/O error. Other errors pass unchanged.
pub(super) fn located(error: LedgerError, path: Option<&Path>) -> LedgerError {
    let LedgerError::Storage { code } = error else {
        return error;
    };
    let location = match path {
        Some(path) => path.display().to_string(),
        None => "(in memory)".to_owned(),
    };
    // Growing the shared-memory index fails when its filesystem has no room left.
    if code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE {
        return LedgerError::DiskFull { location };
    }
    // The primary result code is the low byte of SQLite's extended code.
    match code & 0xff {
        rusqlite::ffi::SQLITE_READONLY => LedgerError::ReadOnly { location },
        rusqlite::ffi::SQLITE_FULL => LedgerError::DiskFull { location },
        rusqlite::ffi::SQLITE_CANTOPEN => LedgerError::CannotOpen { location },
        rusqlite::ffi::SQLITE_IOERR => LedgerError::Io { location, code },
        _ => LedgerError::Storage { code },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_codes_become_errors_that_name_the_file() {
        let path = Path::new("/state/ledger.sqlite3");
        let cases = [
            (8, "ledger.read_only"),
            // SQLITE_READONLY_DBMOVED and SQLITE_IOERR_WRITE: extended codes of the same kinds.
            (1032, "ledger.read_only"),
            (13, "ledger.disk_full"),
            // SQLITE_IOERR_SHMSIZE: the shared-memory index could not grow.
            (4874, "ledger.disk_full"),
            (14, "ledger.cannot_open"),
            (778, "ledger.io"),
        ];
        for (code, expected) in cases {
            let error = located(LedgerError::Storage { code }, Some(path));
            assert_eq!(error.code(), expected, "{code}");
            assert!(
                error.to_string().contains("/state/ledger.sqlite3"),
                "{error}"
            );
            assert!(!error.to_string().contains("extended code 8"), "{error}");
        }
        let other = located(LedgerError::Storage { code: 19 }, Some(path));
        assert_eq!(other, LedgerError::Storage { code: 19 });
        assert_eq!(located(LedgerError::Busy, Some(path)), LedgerError::Busy);
    }

    #[test]
    fn busy_attempts_are_repeated_until_the_deadline_only() {
        let mut calls = 0;
        let result = retry_while_busy(Duration::from_secs(5), || {
            calls += 1;
            if calls < 4 {
                Err(LedgerError::Busy)
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result, Ok(4));

        let started = Instant::now();
        let result: Result<(), _> =
            retry_while_busy(Duration::from_millis(60), || Err(LedgerError::Busy));
        assert_eq!(result, Err(LedgerError::Busy));
        assert!(started.elapsed() >= Duration::from_millis(60));

        let mut calls = 0;
        let result: Result<(), _> = retry_while_busy(Duration::from_secs(5), || {
            calls += 1;
            Err(LedgerError::InvalidCursor)
        });
        assert_eq!((result, calls), (Err(LedgerError::InvalidCursor), 1));
    }

    #[test]
    fn pauses_stay_short_and_vary() {
        let pauses: Vec<Duration> = (1..40).map(pause).collect();
        assert!(
            pauses
                .iter()
                .all(|p| *p <= Duration::from_millis(MAX_PAUSE_MS + 1))
        );
        let distinct: std::collections::BTreeSet<_> = pauses.iter().collect();
        assert!(distinct.len() > 5, "{pauses:?}");
    }
}
