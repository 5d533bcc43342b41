//! Checkpoints of one run: the working tree (tracked, modified and untracked files, honouring
//! the ignore rules) written as a tree into the repository's own object store, wrapped in a
//! commit whose parent is the run's previous checkpoint (the first's is `HEAD`) and named by a
//! reference in a private namespace. A private index, kept between checkpoints, makes a
//! checkpoint cost about what `git write-tree` of the changed files costs (plus one `lstat`
//! per file); the user's index, `HEAD`, branches and stash are never written.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::WorkspaceError;
use crate::fast_commit::{PathChange, commit_changes, read_index_entries};
use crate::index_file::listed_paths;
use crate::packs::{OwnPacks, pack_dir, pack_names};
use crate::repo::{ObjectId, Repository};
use crate::staged::{Staged, bytes_path, changes_between};
use crate::stamp::{TreeStamp, filesystem_now};

/// The reference namespace every run's checkpoints live under.
pub const CHECKPOINT_NAMESPACE: &str = "refs/trellis/checkpoints";
/// Longest run name accepted in a reference.
const MAX_RUN_NAME: usize = 128;
/// The reference (below a run's namespace) that holds the workspace as the run left it.
const END_REFERENCE: &str = "end";
/// Most changed paths a checkpoint names on a command line (`ls-files`); more take the path
/// that rebuilds the whole tree.
const MAX_FAST_PATHS: usize = 512;
/// `git add` writes the blobs it hashes into one pack (a "big file" is any file over one
/// byte) rather than one loose file each, without a reverse index file.
const ADD_INTO_A_PACK: [&str; 4] = [
    "-c",
    "core.bigFileThreshold=1",
    "-c",
    "pack.writeReverseIndex=false",
];

/// One recorded checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub number: u32,
    /// The commit that holds the checkpoint (its message names the run and what came next).
    pub commit: ObjectId,
    /// The tree of the working tree at the checkpoint.
    pub tree: ObjectId,
    /// The reference that keeps the commit alive (an unchanged checkpoint shares the one of
    /// the checkpoint it repeats).
    pub reference: String,
    /// Files added, modified, deleted or changed in mode or type since the previous checkpoint
    /// (for the first: since `HEAD`).
    pub files_changed: u64,
    /// Bytes of the files added or modified since then, as they are on disk.
    pub bytes_changed: u64,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The tree the workspace held just before.
    pub previous_tree: ObjectId,
    /// Where that previous state was kept (as a commit), when the caller asked for it and it
    /// differed.
    pub kept_as: Option<String>,
}

/// The commit and tree of a checkpoint a run continues from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    pub commit: ObjectId,
    pub tree: ObjectId,
}

/// What the private index holds, as far as the next checkpoint is concerned.
#[derive(Debug, Default)]
struct IndexState {
    /// The previous checkpoint (the parent of the next one).
    previous: Option<Previous>,
    /// Whether the private index still holds exactly that tree, so that what `git add`
    /// reports updating is exactly what changed since it.
    holds_previous: bool,
    /// The working tree's stat data as it was when the previous checkpoint staged it, when
    /// that can be trusted (see `stamp`): while it still matches, nothing changed. Beside it,
    /// the reference that checkpoint wrote.
    stamp: Option<(TreeStamp, String)>,
}

impl IndexState {
    /// Something other than a checkpoint used the private index (or the run continues from
    /// elsewhere): the next checkpoint has to ask git what changed.
    fn forget_previous_staging(&mut self) {
        self.holds_previous = false;
        self.stamp = None;
    }
}

/// The checkpoints of one run in one repository.
#[derive(Debug)]
pub struct RunCheckpoints {
    repo: Repository,
    namespace: String,
    /// The run's private index; its content is always brought up to the working tree before
    /// use, so it only has to exist to save work, never to be right.
    index: PathBuf,
    /// A previous run's private index to start this one's from (its stat data is current).
    seed: Option<PathBuf>,
    /// Serializes every use of the private index.
    state: Mutex<IndexState>,
    /// The packs Trellis's checkpoints wrote in this repository, rolled up as they grow.
    own_packs: OwnPacks,
}

/// The reference namespace of `run`'s checkpoints, refusing names git would refuse or that
/// could escape the namespace.
pub fn run_namespace(run: &str) -> Result<String, WorkspaceError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if run.is_empty() || run.len() > MAX_RUN_NAME || !run.chars().all(allowed) {
        return Err(WorkspaceError::InvalidName(run.to_owned()));
    }
    Ok(format!("{CHECKPOINT_NAMESPACE}/{run}"))
}

impl RunCheckpoints {
    /// The checkpoints of `run` in `repo`, using `index` as the private index (created on
    /// first use from `seed`, else from a copy of the user's index, else empty).
    pub fn new(
        repo: Repository,
        run: &str,
        index: PathBuf,
        seed: Option<PathBuf>,
    ) -> Result<Self, WorkspaceError> {
        Ok(Self {
            namespace: run_namespace(run)?,
            own_packs: OwnPacks::of(&repo),
            repo,
            index,
            seed,
            state: Mutex::new(IndexState::default()),
        })
    }

    pub fn repository(&self) -> &Repository {
        &self.repo
    }

    /// The reference of checkpoint `number`.
    pub fn reference(&self, number: u32) -> String {
        format!("{}/{number}", self.namespace)
    }

    /// The reference that keeps the workspace as the run left it.
    pub fn end_reference(&self) -> String {
        format!("{}/{END_REFERENCE}", self.namespace)
    }

    /// Tells the next checkpoint which checkpoint came before it (a controller that continues
    /// a run, or a successor, knows it from the ledger).
    pub fn set_previous(&self, previous: Previous) {
        let mut state = self.guard();
        state.previous = Some(previous);
        state.forget_previous_staging();
    }

    /// Clears what a process that died while using the private index left behind: git's
    /// `<index>.lock` (which makes every later use fail) and the index beside it, which is
    /// rebuilt on next use. Returns whether a lock was found. Call it only while holding the
    /// run's lease, before the first use: then no live process of this run can own the lock.
    pub fn clear_stale_index_lock(&self) -> Result<bool, WorkspaceError> {
        let _state = self.guard();
        let mut lock = self.index.clone().into_os_string();
        lock.push(".lock");
        let lock = PathBuf::from(lock);
        if !lock.exists() {
            return Ok(false);
        }
        remove_if_present(&lock)?;
        remove_if_present(&self.index)?;
        Ok(true)
    }

    fn guard(&self) -> MutexGuard<'_, IndexState> {
        // A panic while holding the lock leaves nothing half-done that matters: every use
        // starts by bringing the private index up to date.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records the working tree as checkpoint `number`; `message` (one line) says what it
    /// precedes and becomes the commit's message. The packs it writes count as Trellis's own
    /// in this repository and are rolled up when they grow past a few (see `packs`).
    pub fn take(&self, number: u32, message: &str) -> Result<Checkpoint, WorkspaceError> {
        let mut state = self.guard();
        if let Some(unchanged) = self.unchanged_checkpoint(&state, number) {
            return Ok(unchanged);
        }
        // Read before git stages the tree, so a write in between shows at the next one.
        let clock = filesystem_now(&self.clock_marker());
        let stamp = clock.and_then(|_| TreeStamp::read(self.repo.top()));
        let packs_before = pack_names(&pack_dir(&self.repo));
        let staged = self.stage_everything()?;
        let reference = self.reference(number);
        let fast = match &state.previous {
            Some(previous) if state.holds_previous && !staged.unclear => self
                .fast_changes(&staged)?
                .map(|changes| (previous.clone(), changes)),
            _ => None,
        };
        let (commit, tree, files_changed, bytes_changed) = match fast {
            Some((previous, changes)) => {
                let written =
                    commit_changes(&self.repo, &previous.commit, &reference, message, &changes)?;
                (written.commit, written.tree, staged.files, staged.bytes)
            }
            None => self.commit_slowly(&state, &reference, message)?,
        };
        state.previous = Some(Previous {
            commit: commit.clone(),
            tree: tree.clone(),
        });
        state.holds_previous = true;
        state.stamp = match (clock, stamp) {
            (Some(clock), Some(stamp)) if self.stamp_is_trusted(&stamp, clock, &tree) => {
                Some((stamp, reference.clone()))
            }
            _ => None,
        };
        // Upkeep: a list or roll-up that fails leaves more packs to read, never a wrong
        // checkpoint, and is tried again after the next one.
        let _ = self.own_packs.record(&pack_dir(&self.repo), &packs_before);
        let _ = self.own_packs.consolidate(&self.repo);
        Ok(Checkpoint {
            number,
            commit,
            tree,
            reference,
            files_changed,
            bytes_changed,
        })
    }

    /// The previous checkpoint again, as checkpoint `number`, when the working tree's stat
    /// data still matches the stamp the previous one left: kept by the reference that one
    /// wrote, with no git process started and no file written. (A reference of its own cost
    /// an inode a step: ~1 ms on ext4 once files have been deleted nearby.) `None` sends the
    /// checkpoint to git.
    fn unchanged_checkpoint(&self, state: &IndexState, number: u32) -> Option<Checkpoint> {
        let (Some(previous), Some((stamp, reference))) = (&state.previous, &state.stamp) else {
            return None;
        };
        if !state.holds_previous || TreeStamp::read(self.repo.top()).as_ref() != Some(stamp) {
            return None;
        }
        let reference = reference.clone();
        Some(Checkpoint {
            number,
            commit: previous.commit.clone(),
            tree: previous.tree.clone(),
            reference,
            files_changed: 0,
            bytes_changed: 0,
        })
    }

    /// Whether `stamp`, read just before staging `tree`, may stand for it: nothing in it
    /// changed on or after `clock`, and it lists exactly the files git staged.
    fn stamp_is_trusted(&self, stamp: &TreeStamp, clock: (i64, i64), tree: &ObjectId) -> bool {
        if stamp.is_racy(clock) {
            return false;
        }
        let id_bytes = tree.as_str().len() / 2;
        listed_paths(&self.index, id_bytes).is_some_and(|listed| stamp.lists_exactly(&listed))
    }

    /// The file whose modification time reads the filesystem's clock for a stamp.
    fn clock_marker(&self) -> PathBuf {
        let mut marker = self.index.clone().into_os_string();
        marker.push(".clock");
        PathBuf::from(marker)
    }

    /// The staged changes as (mode, object) per path, read back from the private index, when
    /// they are few enough to name on a command line and every path is readable; `None` sends
    /// the checkpoint down the slow path.
    fn fast_changes(&self, staged: &Staged) -> Result<Option<Vec<PathChange>>, WorkspaceError> {
        if staged.added.len() + staged.removed.len() > MAX_FAST_PATHS {
            return Ok(None);
        }
        let mut added: Vec<&str> = Vec::with_capacity(staged.added.len());
        for path in &staged.added {
            match std::str::from_utf8(path) {
                Ok(path) => added.push(path),
                Err(_) => return Ok(None),
            }
        }
        let mut changes: Vec<PathChange> = staged
            .removed
            .iter()
            .map(|path| PathChange {
                path: path.clone(),
                entry: None,
            })
            .collect();
        if !added.is_empty() {
            let mut args = vec!["--literal-pathspecs", "ls-files", "-s", "-z", "--"];
            args.extend(added.iter().copied());
            let listed = read_index_entries(&self.with_index(&args)?)?;
            let mut wanted: Vec<&[u8]> = staged.added.iter().map(Vec::as_slice).collect();
            let mut found: Vec<&[u8]> = listed.iter().map(|c| c.path.as_slice()).collect();
            wanted.sort_unstable();
            found.sort_unstable();
            if wanted != found {
                return Ok(None);
            }
            changes.extend(listed);
        }
        Ok(Some(changes))
    }

    /// Writes the whole staged tree, counts its changes from the trees, commits and names it:
    /// for a first checkpoint, or when what `git add` reported cannot be trusted.
    fn commit_slowly(
        &self,
        state: &IndexState,
        reference: &str,
        message: &str,
    ) -> Result<(ObjectId, ObjectId, u64, u64), WorkspaceError> {
        let tree = self.write_tree()?;
        let ((files, bytes), parent) = match &state.previous {
            Some(previous) if previous.tree == tree => ((0, 0), Some(previous.commit.clone())),
            Some(previous) => (
                changes_between(&self.repo, Some(&previous.tree), &tree)?,
                Some(previous.commit.clone()),
            ),
            None => {
                let head = self.repo.head()?;
                (changes_between(&self.repo, head.as_ref(), &tree)?, head)
            }
        };
        let commit = self.commit(&tree, parent.as_ref(), message)?;
        self.repo
            .run(&["update-ref", reference, commit.as_str()], &[])?;
        Ok((commit, tree, files, bytes))
    }

    /// The tree the working tree holds now (written to the object store, named by nothing).
    pub fn snapshot(&self) -> Result<ObjectId, WorkspaceError> {
        let mut state = self.guard();
        state.forget_previous_staging();
        let packs_before = pack_names(&pack_dir(&self.repo));
        self.stage_everything()?;
        let _ = self.own_packs.record(&pack_dir(&self.repo), &packs_before);
        self.write_tree()
    }

    /// The bytes of the files the private index listed when it was last brought up to the
    /// working tree, or before its first use the user's index (an estimate of what a copy of
    /// the working tree holds, read without starting git); `None` when neither can be read.
    pub fn listed_bytes(&self) -> Option<u64> {
        let state = self.guard();
        let known = state.previous.as_ref().map(|p| p.tree.as_str().len() / 2);
        let read = |index: &Path| match known {
            Some(id_bytes) => crate::index_file::listed_bytes(index, id_bytes),
            None => crate::index_file::listed_bytes(index, 20)
                .or_else(|| crate::index_file::listed_bytes(index, 32)),
        };
        read(&self.index).or_else(|| read(self.repo.user_index()))
    }

    /// Records the working tree as the run left it under [`RunCheckpoints::end_reference`]
    /// (a commit whose parent is the last checkpoint); returns its tree.
    pub fn record_end(&self) -> Result<ObjectId, WorkspaceError> {
        let mut state = self.guard();
        state.forget_previous_staging();
        self.stage_everything()?;
        let tree = self.write_tree()?;
        let parent = match &state.previous {
            Some(previous) => Some(previous.commit.clone()),
            None => self.repo.head()?,
        };
        let commit = self.commit(
            &tree,
            parent.as_ref(),
            "trellis: the workspace as the run left it",
        )?;
        self.repo
            .run(&["update-ref", &self.end_reference(), commit.as_str()], &[])?;
        Ok(tree)
    }

    /// Records the working tree as a commit of `parent` (else `HEAD`) named by `reference`,
    /// outside the run's numbered checkpoints: the start or the result of a step run on
    /// another host.
    pub fn record_as(
        &self,
        reference: &str,
        parent: Option<&ObjectId>,
        message: &str,
    ) -> Result<Previous, WorkspaceError> {
        let mut state = self.guard();
        state.holds_previous = false;
        self.stage_everything()?;
        let tree = self.write_tree()?;
        let parent = match parent {
            Some(parent) => Some(parent.clone()),
            None => self.repo.head()?,
        };
        let commit = self.commit(&tree, parent.as_ref(), message)?;
        self.repo
            .run(&["update-ref", reference, commit.as_str()], &[])?;
        Ok(Previous { commit, tree })
    }

    /// The ignored files and directories of the working tree (a directory whose content is
    /// all ignored is listed once), relative to its top, as git's ignore rules name them.
    pub fn ignored_entries(&self) -> Result<Vec<PathBuf>, WorkspaceError> {
        let _state = self.guard();
        let args = [
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ];
        let stdout = self.with_index(&args)?;
        Ok(stdout
            .split(|&b| b == 0)
            .filter(|entry| !entry.is_empty())
            .map(|entry| bytes_path(entry.strip_suffix(b"/").unwrap_or(entry)))
            .collect())
    }

    /// The tree recorded by [`RunCheckpoints::record_end`], if the run recorded one.
    pub fn recorded_end(&self) -> Result<Option<ObjectId>, WorkspaceError> {
        let name = format!("{}^{{tree}}", self.end_reference());
        let args = ["rev-parse", "--verify", "--quiet", name.as_str()];
        match self.repo.git().query(self.repo.top(), &args, &[])? {
            Some(stdout) => ObjectId::from_answer("rev-parse", &stdout).map(Some),
            None => Ok(None),
        }
    }

    /// Makes the working tree hold exactly `tree`: files it lacks are written, files it has
    /// that `tree` lacks are deleted (ignored files are neither), modes and symbolic links
    /// included. When `keep_as` names a reference and the working tree differed, its state is
    /// first kept there so nothing is lost. The result is checked before returning.
    pub fn restore(
        &self,
        tree: &ObjectId,
        keep_as: Option<&str>,
    ) -> Result<Restored, WorkspaceError> {
        let mut state = self.guard();
        state.forget_previous_staging();
        self.stage_everything()?;
        let previous_tree = self.write_tree()?;
        let mut kept_as = None;
        if previous_tree != *tree {
            if let Some(reference) = keep_as {
                let parent = self.repo.head()?;
                let message = "trellis: the workspace as a restore found it";
                let commit = self.commit(&previous_tree, parent.as_ref(), message)?;
                self.repo
                    .run(&["update-ref", reference, commit.as_str()], &[])?;
                kept_as = Some(reference.to_owned());
            }
            // The index now lists every file of the working tree: a reset to `tree` rewrites
            // what differs and deletes what `tree` lacks, leaving identical files alone.
            self.with_index(&["read-tree", "--reset", "-u", tree.as_str()])?;
            self.stage_everything()?;
            let found = self.write_tree()?;
            if found != *tree {
                return Err(WorkspaceError::RestoreMismatch {
                    expected: tree.to_string(),
                    found: found.to_string(),
                });
            }
        }
        Ok(Restored {
            previous_tree,
            kept_as,
        })
    }

    /// Every reference of this run's namespace with the object it names.
    pub fn references(&self) -> Result<Vec<(String, ObjectId)>, WorkspaceError> {
        let prefix = format!("{}/", self.namespace);
        let stdout = self.repo.run(
            &["for-each-ref", "--format=%(objectname) %(refname)", &prefix],
            &[],
        )?;
        let text = String::from_utf8_lossy(&stdout);
        let mut references = Vec::new();
        for line in text.lines() {
            let parsed = line
                .split_once(' ')
                .and_then(|(id, name)| Some((name.to_owned(), ObjectId::parse(id)?)));
            let Some(entry) = parsed else {
                return Err(WorkspaceError::Unexpected {
                    command: "for-each-ref".into(),
                    detail: format!("cannot read {line:?}"),
                });
            };
            references.push(entry);
        }
        Ok(references)
    }

    /// Deletes every reference of this run (the objects go with git's next garbage
    /// collection) and the private index. Returns how many references were deleted.
    pub fn prune(&self) -> Result<usize, WorkspaceError> {
        let mut state = self.guard();
        state.forget_previous_staging();
        let references = self.references()?;
        if !references.is_empty() {
            let commands: String = references
                .iter()
                .map(|(name, _)| format!("delete {name}\n"))
                .collect();
            self.repo.git().run_with_input(
                self.repo.top(),
                &["update-ref", "--stdin"],
                &[],
                commands.into_bytes(),
            )?;
        }
        remove_if_present(&self.index)?;
        remove_if_present(&self.clock_marker())?;
        Ok(references.len())
    }

    /// A commit of `tree` (by the fixed checkpoint identity), not on any branch.
    fn commit(
        &self,
        tree: &ObjectId,
        parent: Option<&ObjectId>,
        message: &str,
    ) -> Result<ObjectId, WorkspaceError> {
        let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
        if let Some(parent) = parent {
            args.extend(["-p", parent.as_str()]);
        }
        let stdout = self.repo.run(&args, &[])?;
        ObjectId::from_answer("commit-tree", &stdout)
    }

    fn write_tree(&self) -> Result<ObjectId, WorkspaceError> {
        let stdout = self.with_index(&["write-tree"])?;
        ObjectId::from_answer("write-tree", &stdout)
    }

    /// `git add --all` into the private index, seeding it first when it does not exist. A
    /// seeded index git cannot use (a split or sparse index whose other half is gone) is
    /// dropped and the working tree staged from nothing: slower, never wrong.
    fn stage_everything(&self) -> Result<Staged, WorkspaceError> {
        let seeded = self.seed_index()?;
        let mut add = ADD_INTO_A_PACK.to_vec();
        add.extend(["add", "--all", "--verbose"]);
        let stdout = match self.with_index(&add) {
            Ok(stdout) => stdout,
            Err(_) if seeded => {
                remove_if_present(&self.index)?;
                self.with_index(&add)?
            }
            Err(error) => return Err(error),
        };
        Ok(Staged::read(&stdout, self.repo.top()))
    }

    /// Creates the private index from the seed or the user's index, when it is missing.
    /// Returns whether it copied one.
    fn seed_index(&self) -> Result<bool, WorkspaceError> {
        if self.index.exists() {
            return Ok(false);
        }
        if let Some(parent) = self.index.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                WorkspaceError::io(format!("cannot create {}", parent.display()), e)
            })?;
        }
        let sources = [self.seed.as_deref(), Some(self.repo.user_index())];
        for source in sources.into_iter().flatten() {
            match std::fs::copy(source, &self.index) {
                Ok(_) => {
                    keep_modification_time(source, &self.index)?;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(WorkspaceError::io(
                        format!("cannot copy the index {}", source.display()),
                        e,
                    ));
                }
            }
        }
        Ok(false)
    }

    /// Runs git on the private index. The index is ours alone, so it skips the checksum over
    /// the whole index that every write would otherwise compute, and keeps git's untracked
    /// cache (directory stat data) so unchanged directories are not read again; both are
    /// what git's own `feature.manyFiles` turns on.
    fn with_index(&self, args: &[&str]) -> Result<Vec<u8>, WorkspaceError> {
        let mut full = vec![
            "-c",
            "index.skipHash=true",
            "-c",
            "core.untrackedCache=true",
        ];
        full.extend_from_slice(args);
        self.repo
            .run(&full, &[("GIT_INDEX_FILE", self.index.as_path())])
    }
}

/// Gives the copied index its source's modification time: git treats an entry whose file
/// changed in the same second as the index was written as "racy" and compares contents, and a
/// copy stamped later would hide a same-size edit made in that second.
fn keep_modification_time(source: &Path, copy: &Path) -> Result<(), WorkspaceError> {
    let stamp = |e| WorkspaceError::io(format!("cannot stamp {}", copy.display()), e);
    let modified = std::fs::metadata(source)
        .and_then(|m| m.modified())
        .map_err(stamp)?;
    std::fs::File::options()
        .write(true)
        .open(copy)
        .and_then(|file| file.set_modified(modified))
        .map_err(stamp)
}

fn remove_if_present(path: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(WorkspaceError::io(
            format!("cannot remove {}", path.display()),
            e,
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_that_could_leave_the_namespace_are_refused() {
        assert_eq!(
            run_namespace("0190a1b2-c3d4-7e5f").unwrap(),
            "refs/trellis/checkpoints/0190a1b2-c3d4-7e5f"
        );
        for bad in [
            "",
            "../x",
            "a/b",
            "a..b",
            "x.lock",
            "a b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(run_namespace(bad).is_err(), "{bad}");
        }
    }
}
