//! Git objects between hosts: a step's start point bundled for a worker host that does not
//! share the serving host's filesystem, the private workspace a worker builds from it, and the
//! step's result fetched back from a bundle and applied to the run's working tree as the
//! step's own changes (what a step run in place would have written).

use std::path::Path;

use crate::checkpoint::run_namespace;
use crate::error::WorkspaceError;
use crate::git::Git;
use crate::repo::{ObjectId, Repository};
use crate::staged::bytes_path;

/// The reference namespace of steps run on other hosts: `<run>/<execution>/start|result`.
pub const REMOTE_NAMESPACE: &str = "refs/trellis/remote";

/// Which end of a remote step a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteEnd {
    /// The working tree the step starts from (its parent: `HEAD`, the run's source revision).
    Start,
    /// The working tree the step left (its parent: the start).
    Result,
}

/// The reference of one end of execution `execution` of `run`, refusing run names git would
/// refuse or that could leave the namespace.
pub fn remote_reference(
    run: &str,
    execution: u64,
    end: RemoteEnd,
) -> Result<String, WorkspaceError> {
    // The same rule as checkpoint names.
    run_namespace(run)?;
    let end = match end {
        RemoteEnd::Start => "start",
        RemoteEnd::Result => "result",
    };
    Ok(format!("{REMOTE_NAMESPACE}/{run}/{execution}/{end}"))
}

/// The commit `reference` names, or `None` when it names none.
pub fn commit_at(repo: &Repository, reference: &str) -> Result<Option<ObjectId>, WorkspaceError> {
    let name = format!("{reference}^{{commit}}");
    let args = ["rev-parse", "--verify", "--quiet", name.as_str()];
    match repo.git().query(repo.top(), &args, &[])? {
        Some(stdout) => ObjectId::from_answer("rev-parse", &stdout).map(Some),
        None => Ok(None),
    }
}

/// The tree of `commit`.
pub fn tree_of(repo: &Repository, commit: &ObjectId) -> Result<ObjectId, WorkspaceError> {
    let name = format!("{commit}^{{tree}}");
    let stdout = repo.run(&["rev-parse", "--verify", name.as_str()], &[])?;
    ObjectId::from_answer("rev-parse", &stdout)
}

/// Writes a bundle of `reference` to `file`: with its whole history, or only what `excluding`
/// (a commit the receiver holds) lacks.
pub fn write_bundle(
    repo: &Repository,
    reference: &str,
    excluding: Option<&ObjectId>,
    file: &Path,
) -> Result<(), WorkspaceError> {
    let file = file.to_string_lossy();
    let not = excluding.map(|commit| format!("^{commit}"));
    let mut args = vec!["bundle", "create", "-q", file.as_ref(), reference];
    if let Some(not) = &not {
        args.push(not);
    }
    repo.run(&args, &[]).map(drop)
}

/// Checks the bundle `file` (complete, and every commit it builds on present here), fetches
/// its `reference` into `into` (created, or moved forward only) and answers the commit. A
/// truncated or foreign bundle is refused before anything is written.
pub fn fetch_bundle(
    repo: &Repository,
    file: &Path,
    reference: &str,
    into: &str,
) -> Result<ObjectId, WorkspaceError> {
    let file = file.to_string_lossy();
    repo.run(&["bundle", "verify", "-q", file.as_ref()], &[])?;
    let refspec = format!("{reference}:{into}");
    repo.run(
        &[
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            file.as_ref(),
            refspec.as_str(),
        ],
        &[],
    )?;
    commit_at(repo, into)?.ok_or_else(|| WorkspaceError::Unexpected {
        command: "fetch".into(),
        detail: format!("the bundle holds no commit for {reference}"),
    })
}

/// The commit the bundle `file` (already checked by [`fetch_bundle`] or `bundle verify`)
/// holds for `reference`, read from its header.
pub fn bundle_head(
    repo: &Repository,
    file: &Path,
    reference: &str,
) -> Result<Option<ObjectId>, WorkspaceError> {
    let file = file.to_string_lossy();
    let listed = repo.run(&["bundle", "list-heads", file.as_ref(), reference], &[])?;
    let text = String::from_utf8_lossy(&listed);
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(_, name)| *name == reference)
        .and_then(|(id, _)| ObjectId::parse(id)))
}

/// Builds a private workspace in `dir` (created, must not hold a repository) from the start
/// bundle `file` whose `reference` names the start: its working tree is the start's, `HEAD`
/// and the index are the start's parent (the run's source revision), so `git status` and
/// `git diff` show what the run changed so far, as in the run's own workspace.
pub fn start_workspace(
    git: &Git,
    dir: &Path,
    file: &Path,
    reference: &str,
) -> Result<(Repository, ObjectId), WorkspaceError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| WorkspaceError::io(format!("cannot create {}", dir.display()), e))?;
    git.run(dir, &["init", "-q"], &[])?;
    let repo = Repository::open(dir, git)?;
    let start = fetch_bundle(&repo, file, reference, reference)?;
    repo.run(&["read-tree", "--reset", "-u", start.as_str()], &[])?;
    let parent = format!("{start}^");
    match commit_at(&repo, &parent)? {
        Some(parent) => {
            repo.run(&["update-ref", "--no-deref", "HEAD", parent.as_str()], &[])?;
            repo.run(&["read-tree", parent.as_str()], &[])?;
        }
        None => {
            repo.run(&["read-tree", "--empty"], &[])?;
        }
    }
    Ok((repo, start))
}

/// Applies the changes from commit `from` to commit `to` to `repo`'s working tree: files
/// `to` deleted are removed, files it added or changed (content, mode, type) are written;
/// every other file, and ignored files, stay as they are. `index` is a scratch index file
/// (removed afterwards). Answers how many paths changed.
pub fn apply_changes(
    repo: &Repository,
    from: &ObjectId,
    to: &ObjectId,
    index: &Path,
) -> Result<u64, WorkspaceError> {
    let listed = repo.run(
        &[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            from.as_str(),
            to.as_str(),
        ],
        &[],
    )?;
    let mut fields = listed.split(|&b| b == 0).filter(|f| !f.is_empty());
    let mut written: Vec<u8> = Vec::new();
    let mut changed = 0u64;
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        changed += 1;
        if status == b"D" {
            let on_disk = repo.top().join(bytes_path(path));
            match std::fs::symlink_metadata(&on_disk) {
                Ok(meta) if !meta.is_dir() => std::fs::remove_file(&on_disk).map_err(|e| {
                    WorkspaceError::io(format!("cannot remove {}", on_disk.display()), e)
                })?,
                _ => {}
            }
        } else {
            written.extend_from_slice(path);
            written.push(0);
        }
    }
    if !written.is_empty() {
        let env = [("GIT_INDEX_FILE", index)];
        let outcome = repo.run(&["read-tree", to.as_str()], &env).and_then(|_| {
            repo.git().run_with_input(
                repo.top(),
                &["checkout-index", "-f", "-z", "--stdin"],
                &env,
                written,
            )
        });
        let _ = std::fs::remove_file(index);
        outcome?;
    }
    Ok(changed)
}
