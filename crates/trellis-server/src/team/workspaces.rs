//! Where the runs a team server accepts work: one directory per run under the server's
//! workspace root, named by the client (`workspace`) or derived from the submission key, so a
//! retried submission finds the same directory (and therefore the same run); a run with a
//! `source` gets a checkout of that repository revision there (mirrors kept in `.mirrors`).

use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use trellis_runtime::{RunSource, SourceError, check_out_source};
use utoipa::ToSchema;

use crate::problem::Problem;

/// Where the mirrors of source repositories live under the root (a name no client may give).
const MIRRORS: &str = ".mirrors";

/// The repository revision a run works on: the server fetches it (into a cached mirror) and
/// checks it out into the run's workspace on a branch named `branch`, with `origin` set to
/// `repository`, so delivery pushes there. Never a URL with credentials (refused, not echoed):
/// the server fetches with its own git credentials.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceChoice {
    /// A URL git can fetch from (`https://`, `ssh://`, `git@host:path`, `file://`, an
    /// absolute path on the server).
    pub repository: String,
    /// The branch the revision is on (what a pull request targets).
    pub branch: String,
    /// The exact commit, 40 (or 64) hex digits.
    pub revision: String,
}

/// Checks `source` out into `workspace` (a retried submission finds it done), on a blocking
/// thread; a refusal is a problem with the source's code.
pub(super) async fn prepare_source(
    root: &WorkspaceRoot,
    workspace: &Path,
    source: SourceChoice,
) -> Result<(), Problem> {
    let mirrors = root.root().join(MIRRORS);
    let workspace = workspace.to_path_buf();
    let source = RunSource {
        repository: source.repository,
        branch: source.branch,
        revision: source.revision,
    };
    let checked =
        tokio::task::spawn_blocking(move || check_out_source(&mirrors, &workspace, &source)).await;
    match checked {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(source_problem(&error)),
        Err(_) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "runtime.internal",
            "the checkout's worker thread failed",
        )),
    }
}

fn source_problem(error: &SourceError) -> Problem {
    let status = match error {
        SourceError::Invalid(_) | SourceError::Credentials { .. } => StatusCode::BAD_REQUEST,
        SourceError::Unreachable { .. } | SourceError::RevisionMissing { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        SourceError::WorkspaceConflict { .. } => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Problem::new(status, error.code(), error.to_string())
}

/// The longest workspace name a client may give.
pub const MAX_WORKSPACE_NAME: usize = 64;

/// Why a workspace cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot create the workspace directory {}: {cause}", path.display())]
    Create {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "a workspace name is 1–64 letters, digits, `.`, `_` or `-`, not starting with `.`; {0:?} is not"
    )]
    BadName(String),
}

/// The directory holding the workspaces of submitted runs.
#[derive(Debug)]
pub struct WorkspaceRoot {
    root: PathBuf,
}

impl WorkspaceRoot {
    /// Creates `root` when missing and uses its canonical path.
    pub fn open(root: PathBuf) -> Result<Self, WorkspaceError> {
        std::fs::create_dir_all(&root).map_err(|cause| WorkspaceError::Create {
            path: root.clone(),
            cause,
        })?;
        let root = root
            .canonicalize()
            .map_err(|cause| WorkspaceError::Create {
                path: root.clone(),
                cause,
            })?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of a run: `name` when given, else one derived from the submission key,
    /// else a fresh one. Created when missing; never outside the root.
    pub fn directory(
        &self,
        name: Option<&str>,
        submission_key: Option<&str>,
    ) -> Result<PathBuf, WorkspaceError> {
        self.directory_created(name, submission_key)
            .map(|(path, _)| path)
    }

    /// Like [`WorkspaceRoot::directory`], and whether this call created it.
    pub fn directory_created(
        &self,
        name: Option<&str>,
        submission_key: Option<&str>,
    ) -> Result<(PathBuf, bool), WorkspaceError> {
        let name = match (name, submission_key) {
            (Some(name), _) => {
                check_name(name)?;
                name.to_owned()
            }
            (None, Some(key)) => {
                let digest = Sha256::digest(key.as_bytes());
                format!("key-{}", hex::encode(&digest[..12]))
            }
            (None, None) => format!("run-{}", trellis_runtime::RunId::generate().as_str()),
        };
        let path = self.root.join(name);
        let existed = path.is_dir();
        std::fs::create_dir_all(&path).map_err(|cause| WorkspaceError::Create {
            path: path.clone(),
            cause,
        })?;
        Ok((path, !existed))
    }
}

fn check_name(name: &str) -> Result<(), WorkspaceError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_WORKSPACE_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(WorkspaceError::BadName(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_root_are_refused() {
        let dir = std::env::temp_dir().join(format!("trellis-ws-{}", std::process::id()));
        let root = WorkspaceRoot::open(dir.clone()).expect("root");
        for name in ["..", ".hidden", "a/b", "", "a\0b", &"x".repeat(65)] {
            assert!(root.directory(Some(name), None).is_err(), "{name:?}");
        }
        let same = root.directory(None, Some("key-1")).expect("derived");
        assert_eq!(same, root.directory(None, Some("key-1")).expect("derived"));
        assert_ne!(same, root.directory(None, Some("key-2")).expect("derived"));
        assert!(same.starts_with(root.root()));
        let _ = std::fs::remove_dir_all(dir);
    }
}
