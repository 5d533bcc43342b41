//! Disposable copies for verifiers: a repository that borrows the candidate repository's
//! objects (its `.git` written by hand as `git clone --shared` would leave it, so nothing is
//! copied but the files themselves), holding the candidate's working tree as it is at that
//! moment, with `HEAD` and the index at the candidate's `HEAD` so `git status` and `git diff`
//! show the candidate's changes. The copy has its own references, index and configuration:
//! whatever a verifier does there, the candidate and the user's repository never see it.
//! Ignored entries (dependencies, build outputs, tools) are placed so a verifier finds them
//! where they are in the candidate: small ones are copied (directories rebuilt, files up to a
//! size copied); a large directory (an installed dependency tree) is rebuilt with real
//! directories whose files link to the candidate's, so removing or reinstalling it in the copy
//! never reaches the candidate; only a huge directory or a big file is linked whole. Removed
//! when dropped.

use std::path::{Path, PathBuf};

use crate::checkpoint::RunCheckpoints;
use crate::error::WorkspaceError;
use crate::repo::{ObjectId, Repository};

/// Most entries below an ignored directory that are copied one by one; a larger directory (an
/// installed dependency tree, a build cache) is rebuilt with its files linked, as copying it
/// per verifier would cost seconds.
const MAX_COPIED_ENTRIES: usize = 2_000;
/// Most entries below an ignored directory rebuilt with linked files (one directory or link
/// made per entry: ~0.1 s per 20,000 in memory, ~0.6 s on a virtual disk); a larger one is
/// linked whole.
const MAX_LINKED_ENTRIES: usize = 100_000;
/// Largest ignored file copied; a larger one is linked.
const MAX_COPIED_FILE_BYTES: u64 = 1 << 20;

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
        std::fs::create_dir(destination).map_err(|e| {
            WorkspaceError::io(format!("cannot create {}", destination.display()), e)
        })?;
        // From here on the directory exists: a failure must not leave it behind.
        let copy = Self {
            root: destination.to_path_buf(),
            workdir: destination.join(relative),
            removed: false,
        };
        let branches = candidate_branches(repo)?;
        write_borrowing_git_dir(repo, destination, head.as_ref(), &tree, &branches)?;
        let git = repo.git();
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
            place_ignored(repo.top(), destination, entry)?;
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

/// The candidate's branches and tags as `(object, reference)`, sorted by reference.
fn candidate_branches(repo: &Repository) -> Result<Vec<(String, String)>, WorkspaceError> {
    let args = [
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        "refs/heads",
        "refs/tags",
    ];
    let stdout = repo.run(&args, &[])?;
    Ok(String::from_utf8_lossy(&stdout)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(object, name)| (object.to_owned(), name.to_owned()))
        .collect())
}

/// Writes the copy's `.git` by hand, as `git clone --shared --no-checkout` would leave it
/// (objects borrowed through `alternates`, the candidate's branches as `origin`'s, its tags)
/// but with `HEAD` detached at the candidate's: a handful of small files instead of a clone's
/// three processes and its transport.
fn write_borrowing_git_dir(
    repo: &Repository,
    destination: &Path,
    head: Option<&ObjectId>,
    tree: &ObjectId,
    references: &[(String, String)],
) -> Result<(), WorkspaceError> {
    use std::os::unix::ffi::OsStrExt;
    let git_dir = destination.join(".git");
    for dir in [
        "objects/info",
        "objects/pack",
        "refs/heads",
        "refs/tags",
        "info",
    ] {
        let path = git_dir.join(dir);
        std::fs::create_dir_all(&path)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", path.display()), e))?;
    }
    let write = |name: &str, content: &[u8]| {
        let path = git_dir.join(name);
        std::fs::write(&path, content)
            .map_err(|e| WorkspaceError::io(format!("cannot write {}", path.display()), e))
    };
    let head_file = match head {
        Some(head) => format!("{head}\n"),
        None => "ref: refs/heads/main\n".to_owned(),
    };
    write("HEAD", head_file.as_bytes())?;
    // A SHA-256 repository's ids are 64 digits; its copy must say so to read its objects.
    let sha256 = tree.as_str().len() == 64;
    let mut config = format!(
        "[core]\n\trepositoryformatversion = {}\n\tfilemode = true\n\tbare = false\n\
         \tlogallrefupdates = true\n",
        u8::from(sha256)
    );
    if sha256 {
        config.push_str("[extensions]\n\tobjectformat = sha256\n");
    }
    let source = repo.top().to_string_lossy();
    let quoted = source.replace('\\', "\\\\").replace('"', "\\\"");
    config.push_str(&format!(
        "[remote \"origin\"]\n\turl = \"{quoted}\"\n\
         \tfetch = +refs/heads/*:refs/remotes/origin/*\n"
    ));
    write("config", config.as_bytes())?;
    let mut alternates = repo
        .common_dir()
        .join("objects")
        .as_os_str()
        .as_bytes()
        .to_vec();
    alternates.push(b'\n');
    write("objects/info/alternates", &alternates)?;
    let mut packed = String::new();
    for (object, name) in references {
        let name = match name.strip_prefix("refs/heads/") {
            Some(branch) => format!("refs/remotes/origin/{branch}"),
            None => name.clone(),
        };
        packed.push_str(&format!("{object} {name}\n"));
    }
    write("packed-refs", packed.as_bytes())
}

/// How an ignored directory is rebuilt in a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebuild {
    /// Small files copied, larger ones linked.
    Copy,
    /// Every file linked to the candidate's. The directories are the copy's own, so deleting,
    /// renaming or adding entries there (`rm -rf node_modules/`, a reinstall) never reaches
    /// the candidate; only writing into a linked file would.
    Link,
}

/// Puts the candidate's ignored `entry` into the copy at the same place (parent directories
/// created as needed; an entry the checkout already made is left alone): copied when small,
/// rebuilt with linked files when large, linked whole when huge.
fn place_ignored(top: &Path, destination: &Path, entry: &Path) -> Result<(), WorkspaceError> {
    let source = top.join(entry);
    let target = destination.join(entry);
    if std::fs::symlink_metadata(&target).is_ok() {
        return Ok(());
    }
    let Ok(metadata) = std::fs::symlink_metadata(&source) else {
        // Gone since git listed it: nothing to place.
        return Ok(());
    };
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| WorkspaceError::io(format!("cannot create {}", parent.display()), e))?;
    }
    let rebuild = match metadata.is_dir() {
        true => match entries_below(&source, MAX_LINKED_ENTRIES) {
            count if count <= MAX_COPIED_ENTRIES => Some(Rebuild::Copy),
            count if count <= MAX_LINKED_ENTRIES => Some(Rebuild::Link),
            _ => None,
        },
        false => None,
    };
    match rebuild {
        Some(rebuild) => rebuild_tree(&source, &target, rebuild),
        None => place_one(&source, &target, &metadata, Rebuild::Copy),
    }
}

/// How many entries are below `dir`, counting no further than just past `limit`.
fn entries_below(dir: &Path, limit: usize) -> usize {
    let mut count = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            count += 1;
            if count > limit {
                return count;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    count
}

/// Rebuilds directory `source` at `target`: directories made, entries placed one by one.
fn rebuild_tree(source: &Path, target: &Path, rebuild: Rebuild) -> Result<(), WorkspaceError> {
    std::fs::create_dir(target)
        .map_err(|e| WorkspaceError::io(format!("cannot create {}", target.display()), e))?;
    let entries = std::fs::read_dir(source)
        .map_err(|e| WorkspaceError::io(format!("cannot read {}", source.display()), e))?;
    for entry in entries.flatten() {
        let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let inner = target.join(entry.file_name());
        if metadata.is_dir() {
            rebuild_tree(&entry.path(), &inner, rebuild)?;
        } else {
            place_one(&entry.path(), &inner, &metadata, rebuild)?;
        }
    }
    Ok(())
}

/// Places one entry: a small file is copied (mode included) unless files are to be linked,
/// a symbolic link is made again with the same target, and anything else (a large file, a
/// huge directory, a socket) is linked to the candidate's.
fn place_one(
    source: &Path,
    target: &Path,
    metadata: &std::fs::Metadata,
    rebuild: Rebuild,
) -> Result<(), WorkspaceError> {
    let failed = |e| WorkspaceError::io(format!("cannot place {}", target.display()), e);
    let copied = rebuild == Rebuild::Copy && metadata.len() <= MAX_COPIED_FILE_BYTES;
    if metadata.is_file() && copied {
        std::fs::copy(source, target).map_err(failed)?;
    } else if metadata.file_type().is_symlink() {
        let pointee = std::fs::read_link(source).map_err(failed)?;
        std::os::unix::fs::symlink(pointee, target).map_err(failed)?;
    } else {
        std::os::unix::fs::symlink(source, target).map_err(failed)?;
    }
    Ok(())
}

/// Tells the copy's git to ignore the placed entries (a `dir/` rule does not match a link to
/// a directory), so `git status` there shows the candidate's changes and nothing else.
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
