//! A run's source on another host, in git terms: what a checkout says about itself (revision,
//! branch, upstream, uncommitted changes), what a remote holds (`ls-remote`, ancestry), a bare
//! mirror fetched from a repository URL, and a clone of that mirror at an exact revision.
//! Policy (what is refused, where mirrors live, locking) belongs to the caller.

use std::path::{Path, PathBuf};

use crate::error::WorkspaceError;
use crate::git::{Git, one_line};

/// Hooks of the user's repository do not run for checkouts Trellis makes on its own.
const NO_HOOKS: [&str; 2] = ["-c", "core.hooksPath=/dev/null"];

/// Variables a fetch may need besides the basics: SSH agents, proxies and certificate files.
const NETWORK_ENV: [&str; 11] = [
    "SSH_AUTH_SOCK",
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "GIT_SSL_CAINFO",
];

/// Git for talking to remotes: [`Git::from_environment`] plus the network variables above.
pub fn network_git() -> Git {
    let env: Vec<(String, String)> = ["PATH", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"]
        .iter()
        .chain(NETWORK_ENV.iter())
        .filter_map(|name| std::env::var(name).ok().map(|v| ((*name).to_owned(), v)))
        .collect();
    Git::with_env(env)
}

/// What a checkout says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutState {
    /// The top of its working tree.
    pub top: PathBuf,
    /// `HEAD`'s full commit id.
    pub revision: String,
    /// The branch `HEAD` is attached to; `None` when detached.
    pub branch: Option<String>,
    /// The remote the branch tracks (`branch.<name>.remote`), if any.
    pub upstream_remote: Option<String>,
    /// Paths with staged or unstaged changes to tracked files.
    pub tracked_changes: Vec<String>,
    /// Untracked paths (not ignored), directories collapsed as `git status` shows them.
    pub untracked: Vec<String>,
}

fn text(command: &str, stdout: &[u8]) -> Result<String, WorkspaceError> {
    one_line(command, stdout)
}

/// Reads the checkout holding `dir`.
pub fn read_checkout(git: &Git, dir: &Path) -> Result<CheckoutState, WorkspaceError> {
    let top = match git.query(dir, &["rev-parse", "--show-toplevel"], &[])? {
        Some(out) => PathBuf::from(text("rev-parse", &out)?),
        None => {
            return Err(WorkspaceError::NotARepository {
                path: dir.to_path_buf(),
            });
        }
    };
    let revision = match git.query(&top, &["rev-parse", "--verify", "HEAD^{commit}"], &[])? {
        Some(out) => text("rev-parse", &out)?,
        None => return Err(WorkspaceError::NoCommit { path: top }),
    };
    let branch = git
        .query(&top, &["symbolic-ref", "--quiet", "--short", "HEAD"], &[])?
        .map(|out| text("symbolic-ref", &out))
        .transpose()?;
    let upstream_remote = match &branch {
        Some(name) => git
            .query(
                &top,
                &["config", "--get", &format!("branch.{name}.remote")],
                &[],
            )?
            .map(|out| text("config", &out))
            .transpose()?,
        None => None,
    };
    let status = git.run(
        &top,
        &["status", "--porcelain=v1", "-z", "--untracked-files=normal"],
        &[],
    )?;
    let (tracked_changes, untracked) = parse_status(&status);
    Ok(CheckoutState {
        top,
        revision,
        branch,
        upstream_remote,
        tracked_changes,
        untracked,
    })
}

/// Splits `git status --porcelain=v1 -z` into changed tracked paths and untracked paths.
fn parse_status(status: &[u8]) -> (Vec<String>, Vec<String>) {
    let mut tracked = Vec::new();
    let mut untracked = Vec::new();
    let mut entries = status.split(|byte| *byte == 0).filter(|e| e.len() > 3);
    while let Some(entry) = entries.next() {
        let code = &entry[..2];
        let path = String::from_utf8_lossy(&entry[3..]).into_owned();
        if code == b"??" {
            untracked.push(path);
        } else {
            // A rename or copy is followed by its original path, which is not a change of its own.
            if matches!(code[0], b'R' | b'C') {
                entries.next();
            }
            tracked.push(path);
        }
    }
    (tracked, untracked)
}

/// The configured URL of the remote `name` (before any `insteadOf` rewriting), if any.
pub fn remote_url(git: &Git, dir: &Path, name: &str) -> Result<Option<String>, WorkspaceError> {
    git.query(
        dir,
        &["config", "--get", &format!("remote.{name}.url")],
        &[],
    )?
    .map(|out| text("config", &out))
    .transpose()
}

/// The branch heads a repository holds, as `(commit, branch name)`.
pub fn remote_heads(
    git: &Git,
    dir: &Path,
    repository: &str,
) -> Result<Vec<(String, String)>, WorkspaceError> {
    let out = git.run(dir, &["ls-remote", "--heads", repository], &[])?;
    let listing = text("ls-remote", &out)?;
    Ok(listing
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter_map(|(commit, name)| {
            name.strip_prefix("refs/heads/")
                .map(|branch| (commit.to_owned(), branch.to_owned()))
        })
        .collect())
}

/// Whether the repository at `dir` holds commit `revision`.
pub fn has_commit(git: &Git, dir: &Path, revision: &str) -> Result<bool, WorkspaceError> {
    let object = format!("{revision}^{{commit}}");
    Ok(git.query(dir, &["cat-file", "-e", &object], &[])?.is_some())
}

/// Whether `ancestor` is `descendant` or one of its ancestors (both must be present).
pub fn is_ancestor(
    git: &Git,
    dir: &Path,
    ancestor: &str,
    descendant: &str,
) -> Result<bool, WorkspaceError> {
    Ok(git
        .query(
            dir,
            &["merge-base", "--is-ancestor", ancestor, descendant],
            &[],
        )?
        .is_some())
}

/// Makes sure the bare mirror at `mirror` (created when missing) holds `revision`: fetches
/// `branch` from `repository` unless the commit is already there, then the revision itself
/// when the branch no longer leads to it.
pub fn fetch_into_mirror(
    git: &Git,
    mirror: &Path,
    repository: &str,
    branch: &str,
    revision: &str,
) -> Result<(), WorkspaceError> {
    if !mirror.join("HEAD").exists() {
        std::fs::create_dir_all(mirror)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", mirror.display()), e))?;
        git.run(mirror, &["init", "--quiet", "--bare"], &[])?;
    }
    if has_commit(git, mirror, revision)? {
        return Ok(());
    }
    let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    git.run(
        mirror,
        &["fetch", "--quiet", "--no-tags", repository, &refspec],
        &[],
    )
    .map_err(|error| match error {
        WorkspaceError::Git { stderr, .. } => WorkspaceError::SourceFetch {
            repository: repository.to_owned(),
            stderr,
        },
        other => other,
    })?;
    if !has_commit(git, mirror, revision)? {
        // The branch moved on without it; a server may still hand out the commit by id.
        let _ = git.query(
            mirror,
            &["fetch", "--quiet", "--no-tags", repository, revision],
            &[],
        )?;
    }
    if has_commit(git, mirror, revision)? {
        Ok(())
    } else {
        Err(WorkspaceError::RevisionMissing {
            repository: repository.to_owned(),
            branch: branch.to_owned(),
            revision: revision.to_owned(),
        })
    }
}

/// Clones `mirror` into `dest` (which must not exist) with `HEAD` on `branch` at `revision`
/// and `origin` set to `repository`, so delivery pushes to the repository the run came from.
pub fn clone_at(
    git: &Git,
    mirror: &Path,
    dest: &Path,
    repository: &str,
    branch: &str,
    revision: &str,
) -> Result<(), WorkspaceError> {
    let parent = dest.parent().unwrap_or(Path::new("/"));
    let (from, to) = (mirror.to_string_lossy(), dest.to_string_lossy());
    git.run(
        parent,
        &["clone", "--quiet", "--no-checkout", &from, &to],
        &[],
    )?;
    git.run(dest, &["remote", "set-url", "origin", repository], &[])?;
    let mut checkout = NO_HOOKS.to_vec();
    checkout.extend(["checkout", "--quiet", "-B", branch, revision]);
    git.run(dest, &checkout, &[])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_entries_are_split_into_tracked_and_untracked() {
        let status = b" M src/a.rs\0R  new.rs\0old.rs\0?? notes/\0A  added.rs\0";
        let (tracked, untracked) = parse_status(status);
        assert_eq!(tracked, ["src/a.rs", "new.rs", "added.rs"]);
        assert_eq!(untracked, ["notes/"]);
    }
}
