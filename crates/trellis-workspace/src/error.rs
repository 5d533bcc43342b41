//! The crate's closed error type, with stable codes.

use std::path::PathBuf;

/// Why a workspace operation failed. Messages name paths and git's own words, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The directory is not inside a git working tree, so it has no object store to use.
    #[error("{path} is not inside a git working tree")]
    NotARepository { path: PathBuf },
    /// A git command could not start, timed out, or failed.
    #[error("git {command} {how}: {stderr}")]
    Git {
        command: String,
        how: String,
        stderr: String,
    },
    /// Git answered something this crate does not understand.
    #[error("git {command} answered unexpectedly: {detail}")]
    Unexpected { command: String, detail: String },
    /// A file operation of our own failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A name that cannot be part of a git reference (a run id, a checkpoint number).
    #[error("{0:?} cannot name a checkpoint reference")]
    InvalidName(String),
    /// The repository has no commit to start a worktree from.
    #[error("{path} has no commit yet; a worktree needs one")]
    NoCommit { path: PathBuf },
    /// After a restore, the workspace still differs from the checkpoint (a clean/smudge filter
    /// or a concurrent writer changed what was written).
    #[error(
        "the workspace does not match checkpoint tree {expected} after restoring it (it holds {found})"
    )]
    RestoreMismatch { expected: String, found: String },
    /// A repository could not be fetched from (unreachable, unknown, or no such branch).
    #[error("cannot fetch {repository}: {stderr}")]
    SourceFetch { repository: String, stderr: String },
    /// The repository was fetched but does not hold the revision.
    #[error("{repository} has no commit {revision} (fetched its branch {branch})")]
    RevisionMissing {
        repository: String,
        branch: String,
        revision: String,
    },
}

impl WorkspaceError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotARepository { .. } => "workspace.not_a_repository",
            Self::Git { .. } => "workspace.git_failed",
            Self::Unexpected { .. } => "workspace.git_unexpected",
            Self::Io { .. } => "workspace.io",
            Self::InvalidName(_) => "workspace.invalid_name",
            Self::NoCommit { .. } => "workspace.no_commit",
            Self::RestoreMismatch { .. } => "workspace.restore_mismatch",
            Self::SourceFetch { .. } => "workspace.source_fetch",
            Self::RevisionMissing { .. } => "workspace.revision_missing",
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
