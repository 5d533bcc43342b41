//! Steps on worker hosts that do not share the serving host's filesystem, on the serving host:
//! the controller records each queued execution's start point (its workspace as a commit whose
//! parent is `HEAD`, the run's source revision) before queueing it, and applies a returned
//! result to the workspace — as the step's own changes — before the outcome settles; the
//! serving host hands the start point of a claimed execution out as a git bundle and takes the
//! result back as one, only while that claim holds the execution.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_ledger::{RunId, RunStore};
use trellis_workspace::{
    Git, ObjectId, RemoteEnd, Repository, RunCheckpoints, WorkspaceError, apply_changes,
    bundle_head, commit_at, delete_references, fetch_bundle, remote_reference, write_bundle,
};

use crate::shared::error::RuntimeError;

/// Where a run's scratch indexes and bundles in transit live, in its run directory.
const REMOTE_DIR: &str = "remote";

/// What a queued execution's payload says about where a worker host without the workspace
/// gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StartPoint {
    /// The commit holding the workspace at dispatch (named by the execution's start reference).
    pub commit: String,
    /// Where the execution works, relative to the top of the repository.
    pub subdir: PathBuf,
}

/// The part of a queued execution's payload (`queued::DispatchPayload`) the serving host
/// reads: where the execution works and its start point.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueuedWorkspace {
    workspace: PathBuf,
    #[serde(default)]
    start: Option<StartPoint>,
}

/// A scratch file of execution `execution` in the run's directory (created on demand).
pub(crate) fn scratch_file(
    run_dir: &Path,
    execution: u64,
    what: &str,
) -> Result<PathBuf, RuntimeError> {
    let dir = run_dir.join(REMOTE_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| RuntimeError::io(format!("cannot create {}", dir.display()), e))?;
    Ok(dir.join(format!("{execution}.{what}")))
}

/// Records the start point of execution `execution` of `run_id` working in `workspace` (or
/// answers the one recorded already, for an execution adopted from a previous controller);
/// `None` when the workspace is not in a git working tree (only a worker host sharing the
/// filesystem can run it then).
pub(crate) fn record_start(
    workspace: &Path,
    run_id: &RunId,
    execution: u64,
    run_dir: &Path,
) -> Result<Option<StartPoint>, RuntimeError> {
    let Some(repo) = Repository::discover(workspace, &Git::from_environment())? else {
        return Ok(None);
    };
    let canonical = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let subdir = canonical
        .strip_prefix(repo.top())
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let reference = remote_reference(run_id.as_str(), execution, RemoteEnd::Start)?;
    // A controller that took the run over adopts executions already queued: their payload
    // (kept by the queue) names the start recorded then, which must stay what it names.
    if let Some(recorded) = commit_at(&repo, &reference)? {
        return Ok(Some(StartPoint {
            commit: recorded.to_string(),
            subdir,
        }));
    }
    // A fresh scratch index (seeded from the workspace's own): the controller's checkpoint
    // index is its alone.
    let index = scratch_file(run_dir, execution, "start.index")?;
    let _ = std::fs::remove_file(&index);
    let checkpoints = RunCheckpoints::new(repo, run_id.as_str(), index.clone(), None)?;
    let recorded = checkpoints.record_as(
        &reference,
        None,
        "trellis: the start of a step run on a worker host",
    );
    let _ = std::fs::remove_file(&index);
    Ok(Some(StartPoint {
        commit: recorded?.commit.to_string(),
        subdir,
    }))
}

/// Applies the result `commit` a worker host returned for execution `execution` to the
/// workspace holding its start point, then drops both references. Answers how many paths
/// changed.
pub(crate) fn apply_result(
    workspace: &Path,
    run_id: &RunId,
    execution: u64,
    commit: &str,
    run_dir: &Path,
) -> Result<u64, RuntimeError> {
    let repo = Repository::open(workspace, &Git::from_environment())?;
    let start_ref = remote_reference(run_id.as_str(), execution, RemoteEnd::Start)?;
    let result_ref = remote_reference(run_id.as_str(), execution, RemoteEnd::Result)?;
    let missing = |why: &str| RuntimeError::ResultRefused {
        run: run_id.to_string(),
        execution,
        why: why.to_owned(),
        conflict: false,
    };
    let start = commit_at(&repo, &start_ref)?.ok_or_else(|| missing("its start point is gone"))?;
    let result = commit_at(&repo, &result_ref)?
        .filter(|received| received.as_str() == commit)
        .ok_or_else(|| missing("the serving host did not receive the commit the worker named"))?;
    let index = scratch_file(run_dir, execution, "apply.index")?;
    let changed = apply_changes(&repo, &start, &result, &index)?;
    delete_references(&repo, &[(start_ref, start), (result_ref, result)])?;
    Ok(changed)
}

/// Drops whatever references execution `execution` left in `workspace`'s repository (an
/// execution that settled without a result, was lost or withdrawn).
pub(crate) fn forget(workspace: &Path, run_id: &RunId, execution: u64) {
    let Ok(Some(repo)) = Repository::discover(workspace, &Git::from_environment()) else {
        return;
    };
    let mut gone = Vec::new();
    for end in [RemoteEnd::Start, RemoteEnd::Result] {
        if let Ok(reference) = remote_reference(run_id.as_str(), execution, end)
            && let Ok(Some(commit)) = commit_at(&repo, &reference)
        {
            gone.push((reference, commit));
        }
    }
    // Best effort: a reference left behind costs only the objects it keeps (prune drops it).
    let _ = delete_references(&repo, &gone);
}

/// The payload and repository of execution `execution` while `claim_token` holds it.
fn claimed(
    store: &dyn RunStore,
    run_id: &RunId,
    execution: u64,
    claim_token: i64,
) -> Result<(StartPoint, Repository), RuntimeError> {
    let not_claimed = || RuntimeError::NotClaimed {
        run: run_id.to_string(),
        execution,
    };
    let postgres = store.as_postgres().ok_or_else(not_claimed)?;
    let json = postgres
        .claimed_payload(run_id, execution, claim_token)?
        .ok_or_else(not_claimed)?;
    let payload: QueuedWorkspace = serde_json::from_str(&json)
        .map_err(|e| RuntimeError::Internal(format!("a stored dispatch is unreadable: {e}")))?;
    let start = payload.start.ok_or_else(|| RuntimeError::NoStartPoint {
        run: run_id.to_string(),
        execution,
    })?;
    let repo = Repository::open(&payload.workspace, &Git::from_environment())?;
    Ok((start, repo))
}

/// Writes the bundle of execution `execution`'s start point (with the history of the run's
/// source revision) to `file`, for the worker host holding it with `claim_token`.
pub(crate) fn write_start_bundle(
    store: &dyn RunStore,
    run_id: &RunId,
    execution: u64,
    claim_token: i64,
    file: &Path,
) -> Result<(), RuntimeError> {
    let (start, repo) = claimed(store, run_id, execution, claim_token)?;
    let reference = remote_reference(run_id.as_str(), execution, RemoteEnd::Start)?;
    match commit_at(&repo, &reference)? {
        Some(commit) if commit.as_str() == start.commit => {}
        _ => {
            return Err(RuntimeError::NoStartPoint {
                run: run_id.to_string(),
                execution,
            });
        }
    }
    write_bundle(&repo, &reference, None, file)?;
    Ok(())
}

/// Takes the result bundle `file` of execution `execution` from the worker host holding it
/// with `claim_token`: checked whole, its objects fetched and its commit named by the
/// execution's result reference. Returning the same result again answers the same commit
/// and stores nothing twice; a different one is refused.
pub(crate) fn receive_result(
    store: &dyn RunStore,
    run_id: &RunId,
    execution: u64,
    claim_token: i64,
    file: &Path,
) -> Result<ObjectId, RuntimeError> {
    let (start, repo) = claimed(store, run_id, execution, claim_token)?;
    let reference = remote_reference(run_id.as_str(), execution, RemoteEnd::Result)?;
    let refused = |why: String, conflict: bool| RuntimeError::ResultRefused {
        run: run_id.to_string(),
        execution,
        why,
        conflict,
    };
    let unusable = |error: WorkspaceError| refused(error.to_string(), false);
    let existing = commit_at(&repo, &reference)?;
    let offered = match existing {
        // Already received: only the header is read, to tell a retry from a second result.
        Some(_) => bundle_head(&repo, file, &reference).map_err(unusable)?,
        None => Some(fetch_bundle(&repo, file, &reference, &reference).map_err(unusable)?),
    };
    let offered =
        offered.ok_or_else(|| refused(format!("the bundle holds no {reference}"), false))?;
    if let Some(existing) = existing
        && existing != offered
    {
        return Err(refused(
            format!("a different result ({existing}) was returned already"),
            true,
        ));
    }
    let parent = commit_at(&repo, &format!("{offered}^"))?;
    if parent.as_ref().map(ObjectId::as_str) != Some(start.commit.as_str()) {
        let _ = delete_references(&repo, &[(reference, offered)]);
        return Err(refused(
            "the result does not follow the execution's start point".into(),
            false,
        ));
    }
    Ok(offered)
}
