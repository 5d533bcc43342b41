//! The ledger's wall clock: milliseconds since the Unix epoch, for admission and event times.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by the wall clock (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
