//! A stat-only record of a working tree (every file and directory git's ignore rules leave in
//! it), so that a checkpoint of a workspace that did not change since the last one is
//! recognised by reading the tree's metadata, without starting git.
//!
//! A stamp is trusted only under three conditions, each checked when it is made:
//! - it was read *before* git staged the tree, so anything written in between makes the next
//!   stamp differ (a slower checkpoint, never a missed change);
//! - no entry changed at or after the moment the reading started, measured on the
//!   filesystem's own clock (git's "racy" rule: a second write within the same clock tick
//!   would leave the size and times as they were);
//! - the files it lists are exactly the paths git put in the private index, so this walk's
//!   reading of the ignore rules agrees with git's for this tree.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The metadata of one entry that any change of its content, mode or identity changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatKey {
    device: u64,
    inode: u64,
    mode: u32,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl StatKey {
    fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            device: metadata.dev(),
            inode: metadata.ino(),
            mode: metadata.mode(),
            size: metadata.size(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// Whether the entry changed at or after `clock` (a time on the filesystem's clock).
    fn at_or_after(&self, clock: (i64, i64)) -> bool {
        self.modified >= clock || self.changed >= clock
    }
}

/// One walked entry: its path relative to the top, whether it is a directory, its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamped {
    path: PathBuf,
    directory: bool,
    key: StatKey,
}

/// The stat data of every file and directory of a working tree that git's ignore rules leave
/// in it (`.git` excluded), in walk order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeStamp {
    entries: Vec<Stamped>,
}

impl TreeStamp {
    /// Walks the working tree under `top`; `None` when any part of it cannot be read (the
    /// caller then asks git, as it would without a stamp).
    pub(crate) fn read(top: &Path) -> Option<Self> {
        let walk = ignore::WalkBuilder::new(top)
            .standard_filters(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(true)
            .require_git(true)
            .parents(true)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|entry| entry.file_name() != ".git")
            .build();
        let mut entries = Vec::new();
        for item in walk {
            let entry = item.ok()?;
            if entry.depth() == 0 {
                continue;
            }
            let metadata = entry.path().symlink_metadata().ok()?;
            let path = entry.path().strip_prefix(top).ok()?.to_path_buf();
            entries.push(Stamped {
                path,
                directory: metadata.is_dir(),
                key: StatKey::of(&metadata),
            });
        }
        Some(Self { entries })
    }

    /// Whether some entry changed at or after `clock`, so that a second change within the
    /// same tick could leave its metadata as it is now.
    pub(crate) fn is_racy(&self, clock: (i64, i64)) -> bool {
        self.entries
            .iter()
            .any(|entry| entry.key.at_or_after(clock))
    }

    /// Whether the files (not directories) it lists are exactly `listed` (paths relative to
    /// the top, as git's index stores them, in any order).
    pub(crate) fn lists_exactly(&self, listed: &[Vec<u8>]) -> bool {
        let mut walked: Vec<&[u8]> = self
            .entries
            .iter()
            .filter(|entry| !entry.directory)
            .map(|entry| entry.path.as_os_str().as_bytes())
            .collect();
        let mut listed: Vec<&[u8]> = listed.iter().map(Vec::as_slice).collect();
        walked.sort_unstable();
        listed.sort_unstable();
        walked == listed
    }
}

/// The filesystem's clock now, read as the modification time of `marker` after writing it
/// (the clock that stamps the tree's files, which may be coarser than the system's).
pub(crate) fn filesystem_now(marker: &Path) -> Option<(i64, i64)> {
    std::fs::write(marker, b"trellis: clock of the last checkpoint's stamp\n").ok()?;
    let metadata = std::fs::symlink_metadata(marker).ok()?;
    Some((metadata.mtime(), metadata.mtime_nsec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        git(dir.path(), &["init", "--quiet"]);
        std::fs::write(dir.path().join(".gitignore"), "target/\n*.log\n").expect("write");
        std::fs::create_dir_all(dir.path().join("src/deep")).expect("mkdir");
        std::fs::write(dir.path().join("src/deep/a.txt"), "a").expect("write");
        std::fs::create_dir_all(dir.path().join("target/debug")).expect("mkdir");
        dir
    }

    #[test]
    fn ignored_entries_are_left_out_and_changes_elsewhere_are_seen() {
        let dir = repository();
        let top = dir.path();
        let first = TreeStamp::read(top).expect("readable");
        let files: Vec<Vec<u8>> = vec![b".gitignore".to_vec(), b"src/deep/a.txt".to_vec()];
        assert!(first.lists_exactly(&files), "{first:?}");

        std::fs::write(top.join("target/debug/out.bin"), "x").expect("write");
        std::fs::write(top.join("src/deep/trace.log"), "x").expect("write");
        let after_ignored = TreeStamp::read(top).expect("readable");
        assert!(after_ignored.lists_exactly(&files));

        std::fs::create_dir_all(top.join("empty/inner")).expect("mkdir");
        let with_empty_dirs = TreeStamp::read(top).expect("readable");
        std::fs::write(top.join("empty/inner/new.txt"), "n").expect("write");
        let with_new_file = TreeStamp::read(top).expect("readable");
        assert_ne!(
            with_empty_dirs, with_new_file,
            "a new file in an empty directory"
        );
        assert!(!with_new_file.lists_exactly(&files));
    }

    #[test]
    fn a_change_of_content_mode_or_name_changes_the_stamp() {
        let dir = repository();
        let top = dir.path();
        let file = top.join("src/deep/a.txt");
        let before = TreeStamp::read(top).expect("readable");
        assert_eq!(before, TreeStamp::read(top).expect("readable"), "stable");

        std::fs::write(&file, "ab").expect("write");
        let grown = TreeStamp::read(top).expect("readable");
        assert_ne!(before, grown);

        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let executable = TreeStamp::read(top).expect("readable");
        assert_ne!(grown, executable);

        std::fs::rename(&file, top.join("src/deep/b.txt")).expect("rename");
        assert_ne!(executable, TreeStamp::read(top).expect("readable"));
    }

    #[test]
    fn entries_changed_since_the_clock_make_it_racy() {
        let dir = repository();
        let marker = dir.path().join(".git/stamp-clock");
        let stamp = TreeStamp::read(dir.path()).expect("readable");
        let far_past = (0, 0);
        assert!(stamp.is_racy(far_past));
        let later = filesystem_now(&marker).expect("clock");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = filesystem_now(&marker).expect("clock");
        assert!(now >= later, "the filesystem clock never runs back");
        let touched = dir.path().join("src/deep/a.txt");
        std::fs::write(&touched, "changed").expect("write");
        let after = TreeStamp::read(dir.path()).expect("readable");
        assert!(after.is_racy(now), "written at or after the clock");
    }
}
