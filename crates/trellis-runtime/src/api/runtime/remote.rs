//! The façade's side of worker hosts that do not share the serving host's filesystem:
//! [`Runtime`] hands an execution's start point out and takes its result back, as git bundles,
//! only to the worker host whose claim holds the execution (`dispatch::remote_workspace` does
//! the work).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use trellis_ledger::RunId;

use super::Runtime;
use crate::dispatch::remote_workspace::{
    RemoteStart, StartPoint, receive_result, scratch_file, write_start_bundle,
};
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
    fn run_dir(&self, run_id: &RunId) -> Result<PathBuf, RuntimeError> {
        self.home_dir()
            .run_dir(run_id.as_str())
            .map_err(|e| RuntimeError::io("cannot open the run directory", e))
    }

    fn in_transit(&self, run_id: &RunId, execution: u64) -> Result<InTransit, RuntimeError> {
        let run_dir = self.run_dir(run_id)?;
        let what = format!(
            "{}-{}.bundle",
            std::process::id(),
            TRANSFERS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(InTransit(scratch_file(&run_dir, execution, &what)?))
    }

    /// The workspace execution `execution` of `run_id` starts from, recorded on the first
    /// request as a commit of the workspace whose parent is its `HEAD`, for the worker host
    /// whose claim on it carries the fencing token `claim_token` (`dispatch.not_claimed`
    /// otherwise): the commit, where the execution works below the repository's top, and a git
    /// bundle of it with the history of the run's source revision.
    pub fn remote_workspace(
        &self,
        run_id: &RunId,
        execution: u64,
        claim_token: i64,
    ) -> Result<RemoteStart, RuntimeError> {
        let run_dir = self.run_dir(run_id)?;
        let file = self.in_transit(run_id, execution)?;
        let StartPoint { commit, subdir } = write_start_bundle(
            self.store(),
            run_id,
            execution,
            claim_token,
            &run_dir,
            &file.0,
        )?;
        let bundle =
            std::fs::read(&file.0).map_err(|e| RuntimeError::io("cannot read the bundle", e))?;
        Ok(RemoteStart {
            commit,
            subdir,
            bundle,
        })
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
