//! A run's checkpoint operations over one ledger and state directory: listing a run's
//! checkpoints, restoring one before a successor starts, run worktrees and their removal. The
//! façade (`Runtime`) exposes them; what they need from above comes in [`CheckpointOps`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trellis_ledger::{CheckpointBefore, Cursor, EventFilter, RunEvent, RunId, RunRecord, RunStore};
use trellis_workspace::{
    Git, ObjectId, Repository, RunCheckpoints, SAVED_NAMESPACE, add_worktree, remove_worktree,
    run_namespace, trellis_references, worktree_base,
};

use crate::checkpoints::copy_places::CopyPlaces;
use crate::checkpoints::workspace::CHECKPOINT_INDEX;
use crate::delivery::drop_pending_merges_from;
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt, TrellisHome};
use crate::shared::submission::{ResumePoint, Submission};

/// Most checkpoints one page lists.
pub const MAX_CHECKPOINTS_PER_PAGE: usize = 100;
/// Where run worktrees live, in the state directory.
const WORKTREES_DIR: &str = "worktrees";

/// One checkpoint of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    pub id: u32,
    /// What it was taken before: `{"kind": "node" | "group", "name"}`.
    pub before: CheckpointBefore,
    pub taken_at_ms: u64,
    /// Files added, changed or deleted since the previous checkpoint (the first: since HEAD).
    pub files_changed: u64,
    /// Bytes of the files added or changed since then.
    pub bytes_changed: u64,
    pub commit: String,
    pub tree: String,
    /// The reference that keeps it in the workspace's repository.
    pub reference: String,
    /// Executions of the run below this one had settled; a successor resumed from the
    /// checkpoint reuses them and runs everything later again.
    pub next_execution: u64,
    /// Whether its reference is still in the workspace's repository: `trellis prune` and a
    /// succeeded chain delete them, after which git may collect the files at any time.
    pub kept: bool,
}

/// One page of a run's checkpoints, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointPage {
    pub run_id: RunId,
    pub checkpoints: Vec<CheckpointInfo>,
    /// Pass as `after` for the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u32>,
}

/// A worktree a run works in, outside the user's checkout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetainedWorkspace {
    pub path: PathBuf,
    /// The checkout it was made from.
    pub worktree_of: PathBuf,
    /// Whether it is still there (`discard-workspace` removes it).
    pub exists: bool,
}

/// What `discard_workspace` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscardedWorkspace {
    pub run_id: RunId,
    pub path: PathBuf,
    /// False when it was already gone.
    pub removed: bool,
}

/// Every checkpoint a run recorded, oldest first.
pub(crate) fn recorded_checkpoints(
    store: &dyn RunStore,
    run_id: &RunId,
) -> Result<Vec<CheckpointInfo>, RuntimeError> {
    let namespace = run_namespace(run_id.as_str())?;
    let mut found = Vec::new();
    let mut after = Cursor::START;
    loop {
        let page = store.events_after(
            run_id,
            after,
            trellis_ledger::limits::MAX_EVENTS_PER_PAGE,
            EventFilter::ExceptLogs,
        )?;
        let Some(last) = page.last() else {
            return Ok(found);
        };
        after = last.cursor;
        for stored in page {
            if let RunEvent::CheckpointTaken {
                number,
                commit,
                tree,
                before,
                next_execution,
                files_changed,
                bytes_changed,
                timestamp_ms,
            } = stored.event
            {
                found.push(CheckpointInfo {
                    id: number,
                    before,
                    taken_at_ms: timestamp_ms,
                    files_changed,
                    bytes_changed,
                    commit,
                    tree,
                    reference: format!("{namespace}/{number}"),
                    next_execution,
                    kept: true,
                });
            }
        }
    }
}

pub(crate) fn submission_of(record: &RunRecord) -> Option<Submission> {
    serde_json::from_value::<Submission>(record.submission.clone()).ok()
}

/// The worktree a worktree-mode run works in.
pub(crate) fn retained_workspace(record: &RunRecord) -> Option<RetainedWorkspace> {
    let submission = submission_of(record)?;
    let worktree_of = submission.handling.worktree_of?;
    Some(RetainedWorkspace {
        exists: submission.workspace.is_dir(),
        path: submission.workspace,
        worktree_of,
    })
}

fn object_id(text: &str) -> Result<ObjectId, RuntimeError> {
    ObjectId::parse(text).ok_or_else(|| {
        RuntimeError::Internal(format!("the ledger holds {text:?} as a git object id"))
    })
}

/// Ends a run `runtime_lost` if its controller is gone, as every reader of a run does first;
/// true when this call ended it.
pub(crate) type EndIfLost = fn(&dyn RunStore, &TrellisHome, &RunId) -> Result<bool, RuntimeError>;

/// The checkpoint operations of the runs of one ledger and state directory.
pub(crate) struct CheckpointOps<'a> {
    pub store: &'a dyn RunStore,
    pub home: &'a TrellisHome,
    pub end_if_lost: EndIfLost,
}

impl CheckpointOps<'_> {
    /// Fails unless the ledger knows the run; ends it first if its controller is gone.
    fn known(&self, run_id: &RunId) -> Result<(), RuntimeError> {
        self.store.head(run_id)?;
        (self.end_if_lost)(self.store, self.home, run_id)?;
        Ok(())
    }

    /// A page of the run's checkpoints after checkpoint `after`, at most `limit` (1 to
    /// [`MAX_CHECKPOINTS_PER_PAGE`]).
    pub(crate) fn checkpoints(
        &self,
        run_id: &RunId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<CheckpointPage, RuntimeError> {
        self.store.head(run_id)?;
        let limit = limit.clamp(1, MAX_CHECKPOINTS_PER_PAGE);
        let mut checkpoints: Vec<CheckpointInfo> = recorded_checkpoints(self.store, run_id)?
            .into_iter()
            .filter(|c| after.is_none_or(|after| c.id > after))
            .collect();
        let more = checkpoints.len() > limit;
        checkpoints.truncate(limit);
        if !checkpoints.is_empty() {
            let kept = self.kept_references(run_id)?;
            // A checkpoint of an unchanged workspace wrote no reference of its own: the one of
            // the checkpoint it repeats keeps its commit (the first by name, if several do).
            let mut keepers: HashMap<&str, &str> = HashMap::new();
            for (name, commit) in &kept {
                let keeper = keepers.entry(commit.as_str()).or_insert(name.as_str());
                *keeper = (*keeper).min(name.as_str());
            }
            for checkpoint in &mut checkpoints {
                let keeper = match kept.get(&checkpoint.reference) {
                    Some(commit) if *commit == checkpoint.commit => {
                        Some(checkpoint.reference.clone())
                    }
                    _ => keepers
                        .get(checkpoint.commit.as_str())
                        .map(|name| (*name).to_owned()),
                };
                checkpoint.kept = keeper.is_some();
                if let Some(keeper) = keeper {
                    checkpoint.reference = keeper;
                }
            }
        }
        let next_after = more.then(|| checkpoints.last().map(|c| c.id)).flatten();
        Ok(CheckpointPage {
            run_id: run_id.clone(),
            checkpoints,
            next_after,
        })
    }

    /// The run's checkpoint references still in its workspace's repository, with the commits
    /// they name (none when the workspace or its repository is gone).
    fn kept_references(&self, run_id: &RunId) -> Result<HashMap<String, String>, RuntimeError> {
        let record = self.store.record(run_id)?;
        let Some(submission) = submission_of(&record) else {
            return Ok(HashMap::new());
        };
        let git = Git::from_environment();
        let Ok(Some(repo)) = Repository::discover(&submission.workspace, &git) else {
            return Ok(HashMap::new());
        };
        let prefix = format!("{}/", run_namespace(run_id.as_str())?);
        Ok(trellis_references(&repo)?
            .into_iter()
            .filter(|reference| reference.name.starts_with(&prefix))
            .map(|reference| (reference.name, reference.object.to_string()))
            .collect())
    }

    /// Removes the worktree a finished worktree-mode run kept (and git's record of it).
    pub(crate) fn discard_workspace(
        &self,
        run_id: &RunId,
    ) -> Result<DiscardedWorkspace, RuntimeError> {
        self.known(run_id)?;
        let head = self.store.head(run_id)?;
        if !head.is_finished() {
            return Err(RuntimeError::StillActive(run_id.to_string()));
        }
        let record = self.store.record(run_id)?;
        let no_worktree = |reason: &str| RuntimeError::NoRetainedWorkspace {
            run: run_id.to_string(),
            reason: reason.to_owned(),
        };
        let retained = retained_workspace(&record)
            .ok_or_else(|| no_worktree(" (it worked in place, not in a worktree)"))?;
        // A successor working in it holds its lease.
        let _lease = self.workspace_lease(&retained.path)?;
        let git = Git::from_environment();
        let origin = Repository::open(&retained.worktree_of, &git)?;
        let found = match retained.exists {
            true => Repository::discover(&retained.path, &git)?,
            false => None,
        };
        let top = found.map_or_else(|| retained.path.clone(), |repo| repo.top().to_path_buf());
        remove_worktree(&origin, &top)?;
        Ok(DiscardedWorkspace {
            run_id: run_id.clone(),
            path: retained.path,
            removed: retained.exists,
        })
    }

    /// Holds the lease of `workspace`, or says which run holds it.
    fn workspace_lease(&self, workspace: &Path) -> Result<Lease, RuntimeError> {
        let path = self.home.workspace_lease_path(workspace);
        match Lease::try_acquire(&path).map_err(|e| RuntimeError::io("cannot take a lease", e))? {
            LeaseAttempt::Acquired(lease) => Ok(lease),
            LeaseAttempt::HeldElsewhere => Err(RuntimeError::WorkspaceBusy {
                workspace: workspace.to_path_buf(),
                holder: crate::shared::home::lease_note(&path)
                    .map(|note| format!(" ({note})"))
                    .unwrap_or_default(),
            }),
        }
    }

    /// Before a successor of `run_id` starts: restores checkpoint `from` (or, without one, the
    /// latest checkpoint when the workspace no longer holds the run's last state) and says
    /// where the successor starts. `None`: nothing to restore, reuse everything settled.
    pub(crate) fn prepare_resume(
        &self,
        run_id: &RunId,
        submission: &Submission,
        from: Option<u32>,
        force: bool,
    ) -> Result<Option<ResumePoint>, RuntimeError> {
        let run_dir = self
            .home
            .run_dir(run_id.as_str())
            .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
        // Verifier copies a controller that died left behind.
        CopyPlaces::of_run(&run_dir, run_id.as_str()).remove_all()?;
        let checkpoints = recorded_checkpoints(self.store, run_id)?;
        let git = Git::from_environment();
        let repo = match Repository::discover(&submission.workspace, &git) {
            Ok(Some(repo)) if !checkpoints.is_empty() => repo,
            // Without checkpoints, plain resume stays what it always was.
            _ if from.is_none() => return Ok(None),
            _ => return Err(RuntimeError::NoCheckpoints(run_id.to_string())),
        };
        let _lease = self.workspace_lease(&submission.workspace)?;
        let recorded =
            RunCheckpoints::new(repo, run_id.as_str(), run_dir.join(CHECKPOINT_INDEX), None)?;
        // The run has ended and we hold its workspace: a lock its private index still has was
        // left by a controller killed mid-checkpoint, and would make every git call fail.
        recorded.clear_stale_index_lock()?;
        let current = recorded.snapshot()?;
        let end = recorded.recorded_end()?;
        let keep = format!(
            "{SAVED_NAMESPACE}/{}/{}",
            run_id.as_str(),
            trellis_ledger::store::now_ms()
        );
        let target = match from {
            Some(id) => {
                let target = checkpoints.iter().find(|c| c.id == id).ok_or_else(|| {
                    RuntimeError::UnknownCheckpoint {
                        run: run_id.to_string(),
                        id,
                    }
                })?;
                // A pruned checkpoint restores only while git still has its objects.
                let tree = object_id(&target.tree)?;
                if !recorded.repository().has_object(&tree)? {
                    return Err(RuntimeError::CheckpointPruned {
                        run: run_id.to_string(),
                        id,
                    });
                }
                if end.as_ref().is_some_and(|end| *end != current) && !force {
                    return Err(RuntimeError::WorkspaceChanged {
                        run: run_id.to_string(),
                        keep: format!("{SAVED_NAMESPACE}/{}/…", run_id.as_str()),
                    });
                }
                target
            }
            None => {
                let Some(latest) = checkpoints.last() else {
                    return Ok(None);
                };
                // The run's last state: as it ended, or (its controller died) its latest
                // consistent moment.
                let last_state = match end {
                    Some(end) => end,
                    None => object_id(&latest.tree)?,
                };
                if current == last_state {
                    return Ok(None);
                }
                latest
            }
        };
        recorded.restore(&object_id(&target.tree)?, Some(&keep))?;
        // A conflicted target merge recorded after the checkpoint left its markers in a work
        // tree that is gone now: its target must not become a parent of the next delivery.
        drop_pending_merges_from(
            recorded.repository(),
            run_id.as_str(),
            target.next_execution,
        )?;
        Ok(Some(ResumePoint {
            run: run_id.to_string(),
            number: target.id,
            next_execution: target.next_execution,
            commit: target.commit.clone(),
            tree: target.tree.clone(),
        }))
    }

    /// Makes a fresh worktree of `workspace`'s `HEAD` under the state directory; returns the
    /// directory in it that corresponds to `workspace`.
    pub(crate) fn make_worktree(&self, workspace: &Path) -> Result<PathBuf, RuntimeError> {
        let git = Git::from_environment();
        let repo = Repository::discover(workspace, &git)?.ok_or_else(|| {
            RuntimeError::NotSubmittable(format!(
                "worktree mode needs a git repository, and {} is not in one",
                workspace.display()
            ))
        })?;
        let base = worktree_base(&repo)?;
        let name = RunId::generate().as_str().to_owned();
        let path = self.home.root().join(WORKTREES_DIR).join(name);
        add_worktree(&repo, &path, &base)?;
        let relative = workspace
            .canonicalize()
            .ok()
            .and_then(|w| {
                let top = repo.top().canonicalize().ok()?;
                w.strip_prefix(&top).ok().map(Path::to_path_buf)
            })
            .unwrap_or_default();
        Ok(path.join(relative))
    }

    /// Removes a worktree made by [`CheckpointOps::make_worktree`] for a run that never started.
    pub(crate) fn drop_worktree(&self, origin: &Path, workspace: &Path) {
        let git = Git::from_environment();
        if let (Ok(Some(origin)), Ok(Some(made))) = (
            Repository::discover(origin, &git),
            Repository::discover(workspace, &git),
        ) {
            let _ = remove_worktree(&origin, made.top());
        }
    }
}
