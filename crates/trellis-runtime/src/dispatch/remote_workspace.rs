//! Steps on worker hosts that do not share the serving host's filesystem, on the serving host:
//! when such a worker asks, the serving host records the claimed execution's start point (its
//! workspace as a commit whose parent is `HEAD`, the run's source revision) and hands it out as
//! a git bundle, then takes the result back as one — only while that claim holds the
//! execution; the controller applies a returned result to the workspace, as the step's own
//! changes, before the outcome settles. A worker sharing the filesystem costs nothing here.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use trellis_ledger::{RunId, RunStore};
use trellis_workspace::{
    Git, ObjectId, RemoteEnd, Repository, RunCheckpoints, WorkspaceError, apply_changes,
    bundle_head, commit_at, delete_references, fetch_bundle, remote_reference, write_bundle,
};

use crate::shared::error::RuntimeError;

/// Where a run's scratch indexes and bundles in transit live, in its run directory.
const REMOTE_DIR: &str = "remote";

/// Where an execution on a worker host without the workspace starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StartPoint {
    /// The commit holding the workspace at dispatch (named by the execution's start reference).
    pub commit: String,
    /// Where the execution works, relative to the top of the repository.
    pub subdir: PathBuf,
}

/// The part of a queued execution's payload (`queued::DispatchPayload`) the serving host
/// reads: where the execution works.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueuedWorkspace {
    workspace: PathBuf,
}

/// Where an execution on a worker host without the serving host's filesystem starts.
#[derive(Debug, Clone)]
pub struct RemoteStart {
    /// The start commit (its bundle's one reference: `refs/trellis/remote/RUN/N/start`).
    pub commit: String,
    /// Where the execution works, relative to the top of the repository.
    pub subdir: PathBuf,
    /// A git bundle of the start with the history of the run's source revision.
    pub bundle: Vec<u8>,
}

impl RemoteStart {
    /// [`RemoteStart::subdir`] as the `Trellis-Workspace-Subdir` header carries it.
    pub fn subdir_header(&self) -> String {
        encode_subdir(&self.subdir)
    }
}

/// The headers of a start bundle's answer: its commit, and where the execution works below
/// the repository's top (bytes other than letters, digits and `/._-` as `%XX`).
pub const START_COMMIT_HEADER: &str = "trellis-start-commit";
pub const WORKSPACE_SUBDIR_HEADER: &str = "trellis-workspace-subdir";

/// `subdir` as [`WORKSPACE_SUBDIR_HEADER`] carries it.
pub(crate) fn encode_subdir(subdir: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut text = String::new();
    for &byte in subdir.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-".contains(&byte) {
            text.push(char::from(byte));
        } else {
            text.push_str(&format!("%{byte:02X}"));
        }
    }
    text
}

/// The directory [`encode_subdir`] wrote; `None` for text it cannot have written.
pub(crate) fn decode_subdir(text: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
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
    // Recorded once: a retried request gets the start the worker's result will build on.
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

/// The workspace execution `execution` works in, while `claim_token` holds it.
fn claimed_workspace(
    store: &dyn RunStore,
    run_id: &RunId,
    execution: u64,
    claim_token: i64,
) -> Result<PathBuf, RuntimeError> {
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
    Ok(payload.workspace)
}

/// Records (once; a retried request gets the same) the start point of execution `execution`
/// for the worker host holding it with `claim_token`, and writes its bundle (with the history
/// of the run's source revision) to `file`.
pub(crate) fn write_start_bundle(
    store: &dyn RunStore,
    run_id: &RunId,
    execution: u64,
    claim_token: i64,
    run_dir: &Path,
    file: &Path,
) -> Result<StartPoint, RuntimeError> {
    let workspace = claimed_workspace(store, run_id, execution, claim_token)?;
    let start = record_start(&workspace, run_id, execution, run_dir)?.ok_or_else(|| {
        RuntimeError::NoStartPoint {
            run: run_id.to_string(),
            execution,
        }
    })?;
    let repo = Repository::open(&workspace, &Git::from_environment())?;
    let reference = remote_reference(run_id.as_str(), execution, RemoteEnd::Start)?;
    write_bundle(&repo, &reference, None, file)?;
    Ok(start)
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
    let workspace = claimed_workspace(store, run_id, execution, claim_token)?;
    let repo = Repository::open(&workspace, &Git::from_environment())?;
    let start_ref = remote_reference(run_id.as_str(), execution, RemoteEnd::Start)?;
    let reference = remote_reference(run_id.as_str(), execution, RemoteEnd::Result)?;
    let refused = |why: String, conflict: bool| RuntimeError::ResultRefused {
        run: run_id.to_string(),
        execution,
        why,
        conflict,
    };
    let unusable = |error: WorkspaceError| refused(error.to_string(), false);
    let start = commit_at(&repo, &start_ref)?
        .ok_or_else(|| refused("no start point was handed out for it".into(), false))?;
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
    if parent.as_ref() != Some(&start) {
        let _ = delete_references(&repo, &[(reference, offered)]);
        return Err(refused(
            "the result does not follow the execution's start point".into(),
            false,
        ));
    }
    Ok(offered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subdirectory_survives_its_header() {
        for subdir in ["", "pkg/app", "a b/ü%/x.y_z-1"] {
            let encoded = encode_subdir(Path::new(subdir));
            assert!(encoded.bytes().all(|b| b.is_ascii_graphic()), "{encoded}");
            assert_eq!(decode_subdir(&encoded), Some(PathBuf::from(subdir)));
        }
        assert_eq!(decode_subdir("bad%4"), None);
    }
}
