//! Run worktrees: a fresh git worktree of a commit for a run that must leave the user's
//! checkout alone, and its removal.

use std::path::Path;

use crate::error::WorkspaceError;
use crate::repo::{ObjectId, Repository};

/// Hooks of the user's repository do not run for checkouts Trellis makes on its own.
const NO_HOOKS: [&str; 2] = ["-c", "core.hooksPath=/dev/null"];

/// Creates a worktree of `commit` at `path` (which must not exist yet), `HEAD` detached there
/// so no branch is created or moved.
pub fn add_worktree(
    repo: &Repository,
    path: &Path,
    commit: &ObjectId,
) -> Result<(), WorkspaceError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", parent.display()), e))?;
    }
    let target = path.to_string_lossy();
    let mut args = NO_HOOKS.to_vec();
    args.extend([
        "worktree",
        "add",
        "--quiet",
        "--detach",
        &target,
        commit.as_str(),
    ]);
    repo.run(&args, &[]).map(|_| ())
}

/// The commit a new run worktree starts from: `HEAD`, which must exist.
pub fn worktree_base(repo: &Repository) -> Result<ObjectId, WorkspaceError> {
    repo.head()?.ok_or_else(|| WorkspaceError::NoCommit {
        path: repo.top().to_path_buf(),
    })
}

/// Removes the worktree at `path` and git's record of it. A directory already gone is fine:
/// the record is pruned all the same.
pub fn remove_worktree(repo: &Repository, path: &Path) -> Result<(), WorkspaceError> {
    if path.exists() {
        let target = path.to_string_lossy();
        let removed = repo.run(&["worktree", "remove", "--force", &target], &[]);
        if removed.is_err() && path.exists() {
            // Not (or no longer) a worktree git knows: the directory is still ours to delete.
            std::fs::remove_dir_all(path)
                .map_err(|e| WorkspaceError::io(format!("cannot remove {}", path.display()), e))?;
        }
    }
    repo.run(&["worktree", "prune"], &[]).map(|_| ())
}
