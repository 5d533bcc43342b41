//! The façade's checkpoint and workspace operations: [`Runtime`] hands its ledger, its state
//! directory and its way of ending lost runs to `checkpoints`, which does the work.

use std::path::{Path, PathBuf};

use trellis_ledger::{RunId, RunStore};

use super::Runtime;
use crate::checkpoints::operations::{CheckpointOps, CheckpointPage, DiscardedWorkspace};
use crate::checkpoints::prune::{PruneOptions, PruneReport};
use crate::control::recovery::{Liveness, reconcile};
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;
use crate::shared::submission::{ResumePoint, Submission};

/// Ends `run_id` `runtime_lost` if its controller is gone; true when this call ended it.
fn end_if_lost(
    store: &dyn RunStore,
    home: &TrellisHome,
    run_id: &RunId,
) -> Result<bool, RuntimeError> {
    Ok(reconcile(store, home, run_id)? == Liveness::FinalizedLost)
}

impl Runtime {
    fn checkpoint_ops(&self) -> CheckpointOps<'_> {
        CheckpointOps {
            store: self.store(),
            home: self.home_dir(),
            end_if_lost,
        }
    }

    /// A page of the run's checkpoints after checkpoint `after`, at most `limit` (1 to
    /// [`crate::MAX_CHECKPOINTS_PER_PAGE`]).
    pub fn checkpoints(
        &self,
        run_id: &RunId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<CheckpointPage, RuntimeError> {
        self.checkpoint_ops().checkpoints(run_id, after, limit)
    }

    /// Removes the worktree a finished worktree-mode run kept (and git's record of it).
    pub fn discard_workspace(&self, run_id: &RunId) -> Result<DiscardedWorkspace, RuntimeError> {
        self.checkpoint_ops().discard_workspace(run_id)
    }

    /// Removes the checkpoints, saved states and worktrees that no run will use again (see
    /// [`PruneOptions`]), across every repository a run of this ledger worked in.
    pub fn prune(&self, options: PruneOptions) -> Result<PruneReport, RuntimeError> {
        self.checkpoint_ops().prune(options)
    }

    /// Before a successor of `run_id` starts: restores checkpoint `from` (or the latest one
    /// when the workspace no longer holds the run's last state) and says where it starts.
    pub(crate) fn prepare_resume(
        &self,
        run_id: &RunId,
        submission: &Submission,
        from: Option<u32>,
        force: bool,
    ) -> Result<Option<ResumePoint>, RuntimeError> {
        self.checkpoint_ops()
            .prepare_resume(run_id, submission, from, force)
    }

    /// Makes a fresh worktree of `workspace`'s `HEAD` under the state directory; returns the
    /// directory in it that corresponds to `workspace`.
    pub(crate) fn make_worktree(&self, workspace: &Path) -> Result<PathBuf, RuntimeError> {
        self.checkpoint_ops().make_worktree(workspace)
    }

    /// Removes a worktree made by [`Runtime::make_worktree`] for a run that never started.
    pub(crate) fn drop_worktree(&self, origin: &Path, workspace: &Path) {
        self.checkpoint_ops().drop_worktree(origin, workspace)
    }
}
