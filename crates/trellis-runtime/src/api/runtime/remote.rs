//! The façade's side of worker hosts that do not share the serving host's filesystem:
//! [`Runtime`] hands an execution's start point out and takes its result back, as git bundles,
//! only to the worker host whose claim holds the execution (`dispatch::remote_workspace` does
//! the work).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use trellis_ledger::RunId;

use super::Runtime;
use crate::dispatch::remote_workspace::{receive_result, scratch_file, write_start_bundle};
use crate::shared::error::RuntimeError;

/// Names bundles in transit apart when one execution's requests overlap.
static TRANSFERS: AtomicU64 = AtomicU64::new(0);

/// A bundle file in transit, removed when dropped.
struct InTransit(PathBuf);

impl Drop for InTransit {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Runtime {
    fn in_transit(&self, run_id: &RunId, execution: u64) -> Result<InTransit, RuntimeError> {
        let run_dir = self
            .home_dir()
            .run_dir(run_id.as_str())
            .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
        let what = format!(
            "{}-{}.bundle",
            std::process::id(),
            TRANSFERS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(InTransit(scratch_file(&run_dir, execution, &what)?))
    }

    /// The workspace execution `execution` of `run_id` starts from, as a git bundle (the
    /// start commit and the history of the run's source revision), for the worker host whose
    /// claim on it carries the fencing token `claim_token` (`dispatch.not_claimed` otherwise).
    pub fn remote_workspace(
        &self,
        run_id: &RunId,
        execution: u64,
        claim_token: i64,
    ) -> Result<Vec<u8>, RuntimeError> {
        let file = self.in_transit(run_id, execution)?;
        write_start_bundle(self.store(), run_id, execution, claim_token, &file.0)?;
        std::fs::read(&file.0).map_err(|e| RuntimeError::io("cannot read the bundle", e))
    }

    /// Takes the result `bundle` of execution `execution` of `run_id` from the worker host
    /// whose claim carries `claim_token`; answers the result commit, which the run's
    /// controller applies to the workspace when the worker reports the outcome naming it.
    /// The same result again answers the same commit; a different one is
    /// `dispatch.result_conflict`, an incomplete bundle `dispatch.result_invalid`.
    pub fn receive_remote_result(
        &self,
        run_id: &RunId,
        execution: u64,
        claim_token: i64,
        bundle: &[u8],
    ) -> Result<String, RuntimeError> {
        let file = self.in_transit(run_id, execution)?;
        std::fs::write(&file.0, bundle)
            .map_err(|e| RuntimeError::io("cannot keep the bundle", e))?;
        let commit = receive_result(self.store(), run_id, execution, claim_token, &file.0)?;
        Ok(commit.to_string())
    }
}
