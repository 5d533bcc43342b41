//! Disposable copies for verifiers: a clone that borrows the candidate repository's objects
//! (`git clone --shared`, so nothing is copied but the files themselves), holding the
//! candidate's working tree as it is at that moment, with `HEAD` and the index at the
//! candidate's `HEAD` so `git status` and `git diff` show the candidate's changes. The copy
//! has its own references, index and configuration: whatever a verifier does there, the
//! candidate and the user's repository never see it. Ignored entries (dependencies, build
//! outputs, tools) are not copied but linked: a verifier finds them where they are in the
//! candidate, and what it builds there is not part of the candidate anyway. Removed when
//! dropped.

use std::path::{Path, PathBuf};

use crate::checkpoint::RunCheckpoints;
use crate::error::WorkspaceError;

/// A throwaway copy of a candidate workspace.
#[derive(Debug)]
pub struct DisposableCopy {
    root: PathBuf,
    workdir: PathBuf,
    removed: bool,
}

impl DisposableCopy {
    /// Copies the working tree of `candidate`'s repository to `destination` (which must not
    /// exist). `workspace` is the candidate's workspace directory, the top of its working
    /// tree or a directory below it; [`DisposableCopy::workdir`] is the same place in the copy.
    pub fn create(
        candidate: &RunCheckpoints,
        workspace: &Path,
        destination: &Path,
    ) -> Result<Self, WorkspaceError> {
        let repo = candidate.repository();
        let relative = workspace.strip_prefix(repo.top()).unwrap_or(Path::new(""));
        let tree = candidate.snapshot()?;
        let head = repo.head()?;
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                WorkspaceError::io(format!("cannot create {}", parent.display()), e)
            })?;
        }
        let source = repo.top().to_string_lossy();
        let target = destination.to_string_lossy();
        let clone = [
            "-c",
            "core.hooksPath=/dev/null",
            "clone",
            "--quiet",
            // No hook samples or other template files: fewer files to write per copy.
            "--template=",
            "--shared",
            "--no-checkout",
            &source,
            &target,
        ];
        repo.run(&clone, &[])?;
        // From here on the directory exists: a failure must not leave it behind.
        let copy = Self {
            root: destination.to_path_buf(),
            workdir: destination.join(relative),
            removed: false,
        };
        let git = repo.git();
        if let Some(head) = &head {
            git.run(
                destination,
                &["update-ref", "--no-deref", "HEAD", head.as_str()],
                &[],
            )?;
        }
        git.run(
            destination,
            &["read-tree", "--reset", "-u", tree.as_str()],
            &[],
        )?;
        let index_to_head = match &head {
            Some(head) => vec!["read-tree", "-m", head.as_str()],
            None => vec!["read-tree", "--empty"],
        };
        git.run(destination, &index_to_head, &[])?;
        let ignored = candidate.ignored_entries()?;
        for entry in &ignored {
            link_ignored(repo.top(), destination, entry)?;
        }
        exclude_links(destination, &ignored)?;
        Ok(copy)
    }

    /// The directory in the copy that corresponds to the candidate's workspace.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// The top of the copy.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Deletes the copy, whatever a verifier left in it (read-only directories included).
    pub fn remove(mut self) -> Result<(), WorkspaceError> {
        self.removed = true;
        force_remove_dir(&self.root)
    }
}

impl Drop for DisposableCopy {
    fn drop(&mut self) {
        if !self.removed {
            // Best effort on an error path; `remove` reports failures.
            let _ = force_remove_dir(&self.root);
        }
    }
}

/// Links the candidate's ignored `entry` into the copy at the same place (its parent
/// directories created as needed; an entry the checkout already made is left alone).
fn link_ignored(top: &Path, destination: &Path, entry: &Path) -> Result<(), WorkspaceError> {
    let link = destination.join(entry);
    if std::fs::symlink_metadata(&link).is_ok() {
        return Ok(());
    }
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", parent.display()), e))?;
    }
    std::os::unix::fs::symlink(top.join(entry), &link)
        .map_err(|e| WorkspaceError::io(format!("cannot link {}", link.display()), e))
}

/// Tells the copy's git to ignore the links (a `dir/` rule does not match a link to a
/// directory), so `git status` there shows the candidate's changes and nothing else.
fn exclude_links(destination: &Path, ignored: &[PathBuf]) -> Result<(), WorkspaceError> {
    use std::os::unix::ffi::OsStrExt;
    if ignored.is_empty() {
        return Ok(());
    }
    let exclude = destination.join(".git/info/exclude");
    let mut rules = std::fs::read(&exclude).unwrap_or_default();
    for entry in ignored {
        rules.push(b'/');
        rules.extend_from_slice(entry.as_os_str().as_bytes());
        rules.push(b'\n');
    }
    if let Some(parent) = exclude.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", parent.display()), e))?;
    }
    std::fs::write(&exclude, rules)
        .map_err(|e| WorkspaceError::io(format!("cannot write {}", exclude.display()), e))
}

/// Removes a directory tree, first giving back write permission a process took away.
pub fn force_remove_dir(path: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    make_writable(path);
    std::fs::remove_dir_all(path)
        .map_err(|e| WorkspaceError::io(format!("cannot remove {}", path.display()), e))
}

/// Adds owner write and search permission to every directory below `path` (best effort).
fn make_writable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !metadata.is_dir() {
        return;
    }
    let mode = metadata.permissions().mode() | 0o700;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            make_writable(&entry.path());
        }
    }
}
