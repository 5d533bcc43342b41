//! The controller's hold on a run's workspace: checkpoints before the waves the policy names,
//! disposable copies for verifiers, and what happens to both when the run ends. A workspace
//! outside git gets neither (the run goes on in place, as before).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use trellis_graph::NodeName;
use trellis_workspace::{
    Checkpoint, DisposableCopy, Git, Previous, Repository, RunCheckpoints, WorkspaceError,
};

use crate::checkpoints::copy_places::CopyPlaces;
use crate::checkpoints::policy::{Before, CheckpointPolicy};
use crate::shared::submission::WorkspaceHandling;

/// The private index of a run's checkpoints, in its run directory.
pub const CHECKPOINT_INDEX: &str = "checkpoint.index";

/// A checkpoint just taken, with what it precedes.
#[derive(Debug, Clone)]
pub struct TakenCheckpoint {
    pub checkpoint: Checkpoint,
    pub before: Before,
}

/// Where a run continues from: its predecessor's private index (fresh stat data), the
/// checkpoint its first one follows, and every predecessor (nearest first) with its run
/// directory, whose checkpoints this run's success makes useless.
#[derive(Debug, Clone, Default)]
pub struct Continuation {
    pub seed_index: Option<PathBuf>,
    pub previous: Option<Previous>,
    pub predecessors: Vec<(String, PathBuf)>,
}

/// The controller's view of one run's workspace.
pub struct RunWorkspace {
    handling: WorkspaceHandling,
    policy: CheckpointPolicy,
    /// `None` when the workspace is not in a git working tree.
    checkpoints: Option<RunCheckpoints>,
    places: CopyPlaces,
    workspace: PathBuf,
    next_number: u32,
    /// The verifier copies that exist now, by execution.
    copies: HashMap<u64, DisposableCopy>,
    /// The predecessors' ids and run directories, nearest first.
    predecessors: Vec<(String, PathBuf)>,
}

impl RunWorkspace {
    /// Opens `workspace` for run `run` whose state lives in `run_dir`. A workspace outside git
    /// is not an error: the run then has no checkpoints and no verifier copies.
    pub fn open(
        handling: &WorkspaceHandling,
        policy: CheckpointPolicy,
        workspace: &Path,
        run: &str,
        run_dir: &Path,
        continuation: Continuation,
    ) -> Result<Self, WorkspaceError> {
        let wanted = handling.checkpoints || handling.verifier_copies;
        let checkpoints = match wanted {
            true => match Repository::discover(workspace, &Git::from_environment())? {
                Some(repo) => {
                    let index = run_dir.join(CHECKPOINT_INDEX);
                    let checkpoints =
                        RunCheckpoints::new(repo, run, index, continuation.seed_index)?;
                    // Opened by the run's controller, which holds its lease: a lock on the
                    // private index is a dead predecessor's (a controller taken over).
                    checkpoints.clear_stale_index_lock()?;
                    if let Some(previous) = continuation.previous {
                        checkpoints.set_previous(previous);
                    }
                    Some(checkpoints)
                }
                None => None,
            },
            false => None,
        };
        Ok(Self {
            handling: handling.clone(),
            policy,
            checkpoints,
            places: CopyPlaces::of_run(run_dir, run),
            workspace: workspace.to_path_buf(),
            next_number: 1,
            copies: HashMap::new(),
            predecessors: continuation.predecessors,
        })
    }

    /// Records a checkpoint when the policy wants one before a wave dispatching `nodes`;
    /// `quiet` says nothing else runs.
    pub fn before_wave<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = &'a NodeName>,
        quiet: bool,
    ) -> Result<Option<TakenCheckpoint>, WorkspaceError> {
        let Some(checkpoints) = self
            .checkpoints
            .as_ref()
            .filter(|_| self.handling.checkpoints)
        else {
            return Ok(None);
        };
        let Some(before) = self.policy.before_wave(nodes, quiet) else {
            return Ok(None);
        };
        let message = format!(
            "trellis checkpoint {} before {} {}",
            self.next_number,
            before.kind(),
            before.name()
        );
        let checkpoint = checkpoints.take(self.next_number, &message)?;
        self.next_number += 1;
        Ok(Some(TakenCheckpoint { checkpoint, before }))
    }

    /// The directory an execution of `node` works in: for a verifier that only reads, a fresh
    /// disposable copy of the workspace when the run makes them; else the workspace itself.
    pub fn workspace_for(
        &mut self,
        node: &NodeName,
        execution: u64,
    ) -> Result<PathBuf, WorkspaceError> {
        let copy_wanted = self.handling.verifier_copies && self.policy.reads_only(node);
        let Some(checkpoints) = self.checkpoints.as_ref().filter(|_| copy_wanted) else {
            return Ok(self.workspace.clone());
        };
        let destination = self.places.for_copy(execution, checkpoints.listed_bytes());
        // A copy left by a controller that died is stale: start from nothing.
        trellis_workspace::force_remove_dir(&destination)?;
        let copy = match DisposableCopy::create(checkpoints, &self.workspace, &destination) {
            Ok(copy) => copy,
            // A tmpfs that filled up (the estimate missed what changed since) leaves the
            // copy to the disk.
            Err(_) if self.places.in_memory(&destination) => {
                let on_disk = self.places.on_disk(execution);
                trellis_workspace::force_remove_dir(&on_disk)?;
                DisposableCopy::create(checkpoints, &self.workspace, &on_disk)?
            }
            Err(error) => return Err(error),
        };
        let workdir = copy.workdir().to_path_buf();
        self.copies.insert(execution, copy);
        Ok(workdir)
    }

    /// Removes the copy of a settled verifier execution, if it had one.
    pub fn settled(&mut self, execution: u64) -> Result<(), WorkspaceError> {
        match self.copies.remove(&execution) {
            Some(copy) => copy.remove(),
            None => Ok(()),
        }
    }

    /// At the run's end: every copy goes; the workspace as the run left it is recorded; a
    /// succeeded run's checkpoints, and its failed predecessors' (kept for the resume that
    /// this run was), are pruned unless they are to be kept.
    pub fn finish(&mut self, succeeded: bool) -> Result<(), WorkspaceError> {
        for (_, copy) in self.copies.drain() {
            copy.remove()?;
        }
        self.places.remove_all()?;
        let Some(checkpoints) = &self.checkpoints else {
            return Ok(());
        };
        if !self.handling.checkpoints {
            return Ok(());
        }
        if succeeded && !self.handling.keep_checkpoints {
            checkpoints.prune()?;
            for (run, run_dir) in &self.predecessors {
                let index = run_dir.join(CHECKPOINT_INDEX);
                RunCheckpoints::new(checkpoints.repository().clone(), run, index, None)?.prune()?;
            }
        } else {
            checkpoints.record_end()?;
        }
        Ok(())
    }
}
