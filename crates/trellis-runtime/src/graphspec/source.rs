//! A remote run's source: a repository URL, branch and exact revision. A client resolves it
//! from its checkout ([`resolve_source`]: clean tree, revision present on the remote, no
//! credentials in the URL); the serving host checks it out into the run's own workspace
//! ([`check_out_source`]: a cached bare mirror per repository, then a clone at the revision).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use trellis_workspace::WorkspaceError;
use trellis_workspace::source::{
    CheckoutState, clone_at, fetch_into_mirror, has_commit, is_ancestor, network_git,
    read_checkout, remote_heads, remote_url,
};

/// Longest repository URL accepted.
const MAX_REPOSITORY_BYTES: usize = 2048;
/// Longest branch name accepted.
const MAX_BRANCH_BYTES: usize = 255;
/// Paths named in a refusal of a dirty tree.
const LISTED_PATHS: usize = 8;
/// Where a served workspace records the source it was checked out from.
const SOURCE_MARKER: &str = "trellis-source.json";

/// Where a remote run's files come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSource {
    /// A URL git can fetch from (`https://`, `ssh://`, `git@host:path`, `file://`, an absolute
    /// path), never with credentials in it.
    pub repository: String,
    /// The branch the revision is on: the checkout is made on a branch of this name, so a pull
    /// request targets it.
    pub branch: String,
    /// The exact commit (full hex id).
    pub revision: String,
}

/// Why a source cannot be resolved or checked out. Messages never carry a credential.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "the repository URL {shown} carries credentials: Trellis never sends or stores them; \
         give the serving host its own git credentials and use the URL without them \
         (--source-remote URL)"
    )]
    Credentials { shown: String },
    #[error(
        "{path} is not a git checkout with a commit: run from one, or pass --no-source for a run that needs no files"
    )]
    NotACheckout { path: PathBuf },
    #[error(
        "HEAD is detached in {path}: check out the branch the run is for, or name it with --source-branch"
    )]
    Detached { path: PathBuf },
    #[error("{0}")]
    Dirty(String),
    #[error(
        "branch {branch} tracks no remote and there is no `origin`: name the repository with --source-remote URL"
    )]
    NoRemote { branch: String },
    #[error(
        "{repository} does not have revision {revision}: push it first (git push {remote} {branch})"
    )]
    NotPushed {
        repository: String,
        remote: String,
        branch: String,
        revision: String,
    },
    #[error("cannot reach {repository}: {reason}")]
    Unreachable { repository: String, reason: String },
    #[error("{repository} has no commit {revision} on or behind branch {branch}: push it first")]
    RevisionMissing {
        repository: String,
        branch: String,
        revision: String,
    },
    #[error("the workspace {path} already holds {holds}: a run's workspace holds one source")]
    WorkspaceConflict { path: PathBuf, holds: String },
    #[error("git failed: {0}")]
    Git(String),
    #[error("{context}: {cause}")]
    Io {
        context: String,
        cause: std::io::Error,
    },
}

impl SourceError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "source.invalid",
            Self::Credentials { .. } => "source.credentials",
            Self::NotACheckout { .. } => "source.not_a_checkout",
            Self::Detached { .. } => "source.detached",
            Self::Dirty(_) => "source.dirty",
            Self::NoRemote { .. } => "source.no_remote",
            Self::NotPushed { .. } => "source.not_pushed",
            Self::Unreachable { .. } => "source.unreachable",
            Self::RevisionMissing { .. } => "source.revision_missing",
            Self::WorkspaceConflict { .. } => "source.workspace_conflict",
            Self::Git(_) => "source.git",
            Self::Io { .. } => "source.io",
        }
    }

    fn io(context: impl Into<String>, cause: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            cause,
        }
    }
}

impl From<WorkspaceError> for SourceError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::SourceFetch { repository, stderr } => Self::Unreachable {
                repository,
                reason: stderr,
            },
            WorkspaceError::RevisionMissing {
                repository,
                branch,
                revision,
            } => Self::RevisionMissing {
                repository,
                branch,
                revision,
            },
            other => Self::Git(other.to_string()),
        }
    }
}

/// Whether a repository URL carries credentials: any user info in an `http(s)`/`ftp(s)` URL
/// (a token may stand in the user name), a password (`user:secret@`) in any other URL. The
/// user of an SSH URL (`git@host:path`, `ssh://git@host/…`) is not a credential.
pub fn url_has_credentials(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let Some((user_info, _)) = authority.rsplit_once('@') else {
        return false;
    };
    let web = matches!(
        scheme.to_ascii_lowercase().as_str(),
        "http" | "https" | "ftp" | "ftps"
    );
    web || user_info.contains(':')
}

/// A URL as it may be shown: without any user info.
fn shown_url(url: &str) -> String {
    crate::delivery::without_userinfo(url)
}

impl RunSource {
    /// Checks the shapes a server accepts: a credential-free URL that cannot be read as an
    /// option, a plausible branch name and a full commit id.
    pub fn check(&self) -> Result<(), SourceError> {
        let repository = &self.repository;
        if url_has_credentials(repository) {
            return Err(SourceError::Credentials {
                shown: shown_url(repository),
            });
        }
        if repository.is_empty()
            || repository.len() > MAX_REPOSITORY_BYTES
            || repository.starts_with('-')
            || repository.chars().any(char::is_control)
        {
            return Err(SourceError::Invalid(format!(
                "`repository` is a git URL of at most {MAX_REPOSITORY_BYTES} bytes, without \
                 control characters, not starting with `-`"
            )));
        }
        if !repository.contains(':') && !repository.starts_with('/') {
            return Err(SourceError::Invalid(format!(
                "`repository` {repository:?} is a relative path, which means nothing on the \
                 serving host: give a URL or an absolute path"
            )));
        }
        if !branch_name_is_plausible(&self.branch) {
            return Err(SourceError::Invalid(format!(
                "`branch` {:?} is not a branch name",
                self.branch
            )));
        }
        if trellis_workspace::ObjectId::parse(&self.revision).is_none() {
            return Err(SourceError::Invalid(
                "`revision` is a full commit id (40 or 64 lowercase hex digits)".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Git's reference name rules, enough to keep a name from being read as anything else
/// (git itself refuses the rest).
fn branch_name_is_plausible(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_BRANCH_BYTES
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
}

/// What a client asks of its checkout for a remote run.
#[derive(Debug, Clone, Default)]
pub struct SourceRequest {
    /// The directory of the checkout (any directory inside it).
    pub checkout: PathBuf,
    /// The repository URL; `None`: the URL of the branch's upstream remote, else `origin`.
    pub repository: Option<String>,
    /// The branch; `None`: the branch `HEAD` is on.
    pub branch: Option<String>,
    /// Accept untracked files (they are not part of the revision, so the run will not see
    /// them); tracked changes are always refused.
    pub allow_untracked: bool,
}

/// Resolves a remote run's source from a client's checkout: `HEAD`'s commit on its branch and
/// remote. Refuses uncommitted changes, a URL with credentials and a revision the remote does
/// not hold (asking to push it).
pub fn resolve_source(request: &SourceRequest) -> Result<RunSource, SourceError> {
    let git = network_git();
    let state = read_checkout(&git, &request.checkout).map_err(|error| match error {
        WorkspaceError::NotARepository { .. } | WorkspaceError::NoCommit { .. } => {
            SourceError::NotACheckout {
                path: request.checkout.clone(),
            }
        }
        other => other.into(),
    })?;
    refuse_changes(&state, request.allow_untracked)?;
    let branch = match (&request.branch, &state.branch) {
        (Some(branch), _) | (None, Some(branch)) => branch.clone(),
        (None, None) => return Err(SourceError::Detached { path: state.top }),
    };
    let remote_name = state
        .upstream_remote
        .clone()
        .filter(|name| name != ".")
        .unwrap_or_else(|| "origin".to_owned());
    let (repository, remote_shown) = match &request.repository {
        Some(url) => (url.clone(), url.clone()),
        None => match remote_url(&git, &state.top, &remote_name)? {
            Some(url) => (url, remote_name),
            None => return Err(SourceError::NoRemote { branch }),
        },
    };
    if url_has_credentials(&repository) {
        return Err(SourceError::Credentials {
            shown: shown_url(&repository),
        });
    }
    let repository = absolute_path_url(&repository, &state.top);
    let source = RunSource {
        repository,
        branch,
        revision: state.revision.clone(),
    };
    source.check()?;
    check_pushed(&git, &state.top, &source, &remote_shown)?;
    Ok(source)
}

fn refuse_changes(state: &CheckoutState, allow_untracked: bool) -> Result<(), SourceError> {
    let untracked: &[String] = if allow_untracked {
        &[]
    } else {
        &state.untracked
    };
    if state.tracked_changes.is_empty() && untracked.is_empty() {
        return Ok(());
    }
    let listed: Vec<&str> = state
        .tracked_changes
        .iter()
        .chain(untracked)
        .take(LISTED_PATHS)
        .map(String::as_str)
        .collect();
    let total = state.tracked_changes.len() + untracked.len();
    let more = total.saturating_sub(listed.len());
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let hint = if state.tracked_changes.is_empty() {
        "commit them, ignore them, or pass --allow-untracked (the run will not see them)"
    } else {
        "commit and push them, or stash them: a remote run works on a pushed revision"
    };
    Err(SourceError::Dirty(format!(
        "{} has {} uncommitted change(s) and {} untracked path(s) ({}{tail}): {hint}",
        state.top.display(),
        state.tracked_changes.len(),
        untracked.len(),
        listed.join(", "),
    )))
}

/// A relative path remote means a directory on this host: made absolute, so the serving host
/// (the same machine, or one sharing the file system) reads the same directory.
fn absolute_path_url(repository: &str, top: &Path) -> String {
    if repository.contains(':') || repository.starts_with('/') {
        return repository.to_owned();
    }
    let joined = top.join(repository);
    joined
        .canonicalize()
        .unwrap_or(joined)
        .to_string_lossy()
        .into_owned()
}

/// The revision is on the remote when a remote branch head is it or descends from it (heads
/// this checkout does not hold cannot be judged and do not count).
fn check_pushed(
    git: &trellis_workspace::Git,
    top: &Path,
    source: &RunSource,
    remote_shown: &str,
) -> Result<(), SourceError> {
    let heads = remote_heads(git, top, &source.repository).map_err(|error| match error {
        WorkspaceError::Git { stderr, .. } => SourceError::Unreachable {
            repository: shown_url(&source.repository),
            reason: stderr,
        },
        other => other.into(),
    })?;
    // The source branch first: the usual answer, and the cheapest.
    let mut ordered: Vec<&(String, String)> =
        heads.iter().filter(|(_, b)| *b == source.branch).collect();
    ordered.extend(heads.iter().filter(|(_, b)| *b != source.branch));
    for (head, _) in ordered {
        if *head == source.revision
            || (has_commit(git, top, head)? && is_ancestor(git, top, &source.revision, head)?)
        {
            return Ok(());
        }
    }
    Err(SourceError::NotPushed {
        repository: shown_url(&source.repository),
        remote: remote_shown.to_owned(),
        branch: source.branch.clone(),
        revision: source.revision.clone(),
    })
}

/// What [`check_out_source`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckedOut {
    /// The workspace was made from the source now.
    Fresh,
    /// The workspace already held this source (a retried submission): left as it is.
    Already,
}

/// Checks `source` out into `workspace` (missing or empty): the repository is fetched into a
/// bare mirror under `mirrors` (one per URL, kept for later runs, locked while used), then
/// cloned at the exact revision on a branch named like the source branch, with `origin` set to
/// the repository. A workspace that already holds the same source is left alone; one holding
/// anything else is refused.
pub fn check_out_source(
    mirrors: &Path,
    workspace: &Path,
    source: &RunSource,
) -> Result<CheckedOut, SourceError> {
    source.check()?;
    if let Some(done) = already_checked_out(workspace, source)? {
        return Ok(done);
    }
    std::fs::create_dir_all(mirrors)
        .map_err(|e| SourceError::io(format!("cannot create {}", mirrors.display()), e))?;
    let digest = Sha256::digest(source.repository.as_bytes());
    let name = hex::encode(&digest[..16]);
    let _lock = lock(&mirrors.join(format!("{name}.lock")))?;
    // A concurrent identical submission may have finished while we waited.
    if let Some(done) = already_checked_out(workspace, source)? {
        return Ok(done);
    }
    let git = network_git();
    let mirror = mirrors.join(format!("{name}.git"));
    fetch_into_mirror(
        &git,
        &mirror,
        &source.repository,
        &source.branch,
        &source.revision,
    )?;
    // Cloned beside the workspace and moved into place, so a failure never leaves a half-made
    // checkout where a retry would find it.
    let file_name = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = workspace.with_file_name(format!(".{file_name}.checkout"));
    remove_dir_if_present(&partial)?;
    let made = clone_at(
        &git,
        &mirror,
        &partial,
        &source.repository,
        &source.branch,
        &source.revision,
    )
    .map_err(SourceError::from)
    .and_then(|()| write_marker(&partial, source))
    .and_then(|()| {
        std::fs::rename(&partial, workspace).map_err(|e| {
            SourceError::io(
                format!("cannot move the checkout to {}", workspace.display()),
                e,
            )
        })
    });
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    made.map(|()| CheckedOut::Fresh)
}

fn marker_path(workspace: &Path) -> PathBuf {
    workspace.join(".git").join(SOURCE_MARKER)
}

fn write_marker(workspace: &Path, source: &RunSource) -> Result<(), SourceError> {
    let path = marker_path(workspace);
    let text = serde_json::to_vec(source)
        .map_err(|e| SourceError::Invalid(format!("cannot record the source: {e}")))?;
    std::fs::write(&path, text)
        .map_err(|e| SourceError::io(format!("cannot write {}", path.display()), e))
}

/// `Some` when the workspace already holds this source; an error when it holds anything else.
fn already_checked_out(
    workspace: &Path,
    source: &RunSource,
) -> Result<Option<CheckedOut>, SourceError> {
    match std::fs::read(marker_path(workspace)) {
        Ok(bytes) => {
            let held: Option<RunSource> = serde_json::from_slice(&bytes).ok();
            return match held {
                Some(held) if held == *source => Ok(Some(CheckedOut::Already)),
                Some(held) => Err(SourceError::WorkspaceConflict {
                    path: workspace.to_path_buf(),
                    holds: format!(
                        "{} {} at {}",
                        shown_url(&held.repository),
                        held.branch,
                        held.revision
                    ),
                }),
                None => Err(SourceError::WorkspaceConflict {
                    path: workspace.to_path_buf(),
                    holds: "an unreadable source record".to_owned(),
                }),
            };
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(SourceError::io(
                format!("cannot read {}", marker_path(workspace).display()),
                error,
            ));
        }
    }
    let occupied = match std::fs::read_dir(workspace) {
        Ok(mut entries) => entries.next().is_some(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(error) => {
            return Err(SourceError::io(
                format!("cannot read {}", workspace.display()),
                error,
            ));
        }
    };
    if occupied {
        return Err(SourceError::WorkspaceConflict {
            path: workspace.to_path_buf(),
            holds: "files of another run".to_owned(),
        });
    }
    Ok(None)
}

fn remove_dir_if_present(path: &Path) -> Result<(), SourceError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(SourceError::io(
            format!("cannot remove {}", path.display()),
            error,
        )),
    }
}

/// Waits for an exclusive lock on `path` (released when the file is dropped).
fn lock(path: &Path) -> Result<File, SourceError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| SourceError::io(format!("cannot open {}", path.display()), e))?;
    file.lock()
        .map_err(|e| SourceError::io(format!("cannot lock {}", path.display()), e))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_where_they_can_hide() {
        for url in [
            "https://user:token@example.com/repo.git",
            "https://token@example.com/repo.git",
            "HTTP://a:b@host/x",
            "ssh://git:secret@host/repo",
        ] {
            assert!(url_has_credentials(url), "{url}");
        }
        for url in [
            "https://example.com/repo.git",
            "git@github.com:owner/repo.git",
            "ssh://git@host/repo",
            "/srv/git/repo.git",
            "file:///srv/git/repo.git",
            "https://example.com/a@b",
        ] {
            assert!(!url_has_credentials(url), "{url}");
        }
    }

    #[test]
    fn a_credential_is_never_part_of_the_refusal() {
        let source = RunSource {
            repository: "https://me:canary-5f1e@example.com/r.git".into(),
            branch: "main".into(),
            revision: "a".repeat(40),
        };
        let error = source.check().expect_err("refused");
        assert_eq!(error.code(), "source.credentials");
        assert!(!error.to_string().contains("canary-5f1e"), "{error}");
    }

    #[test]
    fn shapes_that_could_be_read_as_something_else_are_refused() {
        let good = RunSource {
            repository: "/srv/git/r.git".into(),
            branch: "feature/x".into(),
            revision: "0123456789abcdef0123456789abcdef01234567".into(),
        };
        assert!(good.check().is_ok());
        for (repository, branch, revision) in [
            ("--upload-pack=evil", "main", good.revision.as_str()),
            ("relative/path", "main", good.revision.as_str()),
            ("/srv/r.git", "-f", good.revision.as_str()),
            ("/srv/r.git", "a..b", good.revision.as_str()),
            ("/srv/r.git", "main", "HEAD"),
            ("/srv/r.git", "main", "0123"),
        ] {
            let source = RunSource {
                repository: repository.into(),
                branch: branch.into(),
                revision: revision.into(),
            };
            assert_eq!(
                source.check().map_err(|e| e.code()),
                Err("source.invalid"),
                "{source:?}"
            );
        }
    }
}
