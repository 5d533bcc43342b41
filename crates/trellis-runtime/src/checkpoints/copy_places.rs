//! Where a run's verifier copies are made: in memory (a tmpfs such as `/dev/shm`) when the
//! workspace is small and the tmpfs has room, else in the run directory. A copy is written
//! whole and deleted minutes later; on a disk every one of its file creations waits on the
//! file system's journal, on a tmpfs none does.

use std::path::{Path, PathBuf};

use trellis_workspace::WorkspaceError;

use crate::shared::home::TrellisHome;

/// Where a run's verifier copies live while they exist, in its run directory, when they are
/// not in memory (see [`CopyPlaces`]).
pub const COPIES_DIR: &str = "copies";

/// Names the tmpfs that holds copies (`off`: never in memory). Unset: `/dev/shm`.
pub const COPIES_TMPFS_ENV: &str = "TRELLIS_COPIES_TMPFS";
const DEFAULT_TMPFS: &str = "/dev/shm";
/// Largest workspace (bytes of the files it tracks) copied into memory.
const MAX_BYTES_IN_MEMORY: u64 = 256 << 20;
/// Room the tmpfs keeps for everything else after a copy is counted four times over (two
/// verifiers at once, and what git's estimate misses: ignored files, growth since).
const KEEP_FREE_BYTES: u64 = 1 << 30;

/// The places of one run's copies.
#[derive(Debug, Clone)]
pub struct CopyPlaces {
    /// In the run directory.
    disk: PathBuf,
    /// This run's directory in the tmpfs, when one is usable.
    memory: Option<PathBuf>,
}

impl CopyPlaces {
    /// The places of run `run`'s copies, whose run directory is `run_dir`: `disk`, and the
    /// tmpfs [`COPIES_TMPFS_ENV`] names.
    pub fn new(run_dir: &Path, disk: PathBuf, run: &str) -> Self {
        let tmpfs = match std::env::var_os(COPIES_TMPFS_ENV) {
            Some(value) if value == "off" => None,
            Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
            _ => Some(PathBuf::from(DEFAULT_TMPFS)),
        };
        Self::with_tmpfs(run_dir, disk, run, tmpfs.as_deref())
    }

    /// The places of run `run`'s copies, whose run directory is `run_dir`, where every
    /// controller of it makes them.
    pub fn of_run(run_dir: &Path, run: &str) -> Self {
        Self::new(run_dir, run_dir.join(COPIES_DIR), run)
    }

    /// The places of run `run`'s copies when its run directory exists in `home` (a run
    /// another host controlled has neither directory nor copies here).
    pub fn of_existing_run(home: &TrellisHome, run: &str) -> Option<Self> {
        let run_dir = home.run_path(run);
        run_dir.is_dir().then(|| Self::of_run(&run_dir, run))
    }

    /// Like [`CopyPlaces::new`] with the tmpfs named (`None`: copies stay on disk).
    pub fn with_tmpfs(run_dir: &Path, disk: PathBuf, run: &str, tmpfs: Option<&Path>) -> Self {
        Self {
            disk,
            memory: tmpfs
                .and_then(|tmpfs| memory_root(run_dir, tmpfs))
                .map(|root| root.join(run)),
        }
    }

    /// Where the copy for `execution` goes, given the bytes its workspace holds (`None`:
    /// unknown, so on disk).
    pub fn for_copy(&self, execution: u64, workspace_bytes: Option<u64>) -> PathBuf {
        let fits = |memory: &&PathBuf| {
            workspace_bytes.is_some_and(|bytes| {
                bytes <= MAX_BYTES_IN_MEMORY
                    && free_bytes(memory).is_some_and(|free| {
                        free >= KEEP_FREE_BYTES.saturating_add(bytes.saturating_mul(4))
                    })
            })
        };
        match self.memory.as_ref().filter(fits) {
            Some(memory) => memory.join(execution.to_string()),
            None => self.on_disk(execution),
        }
    }

    /// Where the copy for `execution` goes on disk.
    pub fn on_disk(&self, execution: u64) -> PathBuf {
        self.disk.join(execution.to_string())
    }

    /// Whether `path` is a place in memory.
    pub fn in_memory(&self, path: &Path) -> bool {
        self.memory
            .as_ref()
            .is_some_and(|memory| path.starts_with(memory))
    }

    /// The run's copy directories that exist (in memory, on disk).
    pub fn existing(&self) -> Vec<PathBuf> {
        self.memory
            .iter()
            .chain(std::iter::once(&self.disk))
            .filter(|place| std::fs::symlink_metadata(place).is_ok())
            .cloned()
            .collect()
    }

    /// Removes every copy of the run, in memory and on disk.
    pub fn remove_all(&self) -> Result<(), WorkspaceError> {
        if let Some(memory) = &self.memory {
            trellis_workspace::force_remove_dir(memory)?;
        }
        trellis_workspace::force_remove_dir(&self.disk)
    }
}

/// `<tmpfs>/trellis-<uid>`, this user's private directory in the tmpfs, when the tmpfs is one
/// and the directory is (or can be made) a real directory only this user can enter. The user
/// is the owner of the run directory (which this process made).
fn memory_root(run_dir: &Path, tmpfs: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let stat = nix::sys::statfs::statfs(tmpfs).ok()?;
    if stat.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
        return None;
    }
    let uid = std::fs::metadata(run_dir).ok()?.uid();
    let root = tmpfs.join(format!("trellis-{uid}"));
    // Made private from the start; an existing one (another user could have made it, the
    // tmpfs being shared) must be a directory of ours that nobody else can enter.
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&root);
    let found = std::fs::symlink_metadata(&root).ok()?;
    let private = found.is_dir() && found.uid() == uid && found.permissions().mode() & 0o077 == 0;
    private.then_some(root)
}

/// Bytes an unprivileged process can still write to the file system holding `path`.
fn free_bytes(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let stat = nix::sys::statvfs::statvfs(existing).ok()?;
    Some(stat.fragment_size().saturating_mul(stat.blocks_available()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn small_workspaces_go_to_a_private_tmpfs_directory_and_the_rest_to_disk() {
        let run_dir = tempfile::tempdir().unwrap();
        let disk = run_dir.path().join("copies");
        // A disk directory is no tmpfs: copies stay on disk.
        let plain = CopyPlaces::with_tmpfs(run_dir.path(), disk.clone(), "r", Some(run_dir.path()));
        assert_eq!(plain.for_copy(3, Some(10)), disk.join("3"));
        let Ok(shm) = tempfile::tempdir_in(DEFAULT_TMPFS) else {
            return; // no tmpfs on this machine: nothing more to see
        };
        let places = CopyPlaces::with_tmpfs(run_dir.path(), disk.clone(), "r", Some(shm.path()));
        let small = places.for_copy(3, Some(10_000));
        assert!(
            small.starts_with(shm.path()) && small.ends_with("r/3"),
            "{small:?}"
        );
        assert!(places.in_memory(&small));
        let root = small.parent().and_then(Path::parent).unwrap();
        let mode = std::fs::metadata(root).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "only this user can enter it");
        assert_eq!(
            places.for_copy(3, Some(MAX_BYTES_IN_MEMORY + 1)),
            disk.join("3")
        );
        assert_eq!(places.for_copy(3, None), disk.join("3"));

        assert!(places.existing().is_empty());
        std::fs::create_dir_all(&small).unwrap();
        std::fs::create_dir_all(disk.join("4")).unwrap();
        assert_eq!(places.existing().len(), 2);
        places.remove_all().unwrap();
        assert!(!small.exists() && !disk.exists());
        assert!(places.existing().is_empty());

        // A directory others can enter (made by someone else, say) is not used.
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shared = CopyPlaces::with_tmpfs(run_dir.path(), disk.clone(), "r", Some(shm.path()));
        assert_eq!(shared.for_copy(3, Some(10)), disk.join("3"));
    }
}
