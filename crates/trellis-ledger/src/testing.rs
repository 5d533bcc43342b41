//! Helpers other crates' tests use to check what the ledger holds.

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::store::RunStore;

/// Whether `needle` occurs anywhere in what `store` keeps for `run_id`: its submission, every
/// event and its snapshot. Canary tests plant a secret in the environment, run, and assert
/// this is `false`.
pub fn scan_for(store: &dyn RunStore, run_id: &RunId, needle: &str) -> Result<bool, LedgerError> {
    store.run_contains_bytes(run_id, needle.as_bytes())
}
