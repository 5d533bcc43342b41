//! The state directory (`$TRELLIS_HOME`): the ledger file, per-run directories, and the file
//! leases that prove a controller is alive and that a workspace has one active run.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Resolves `$TRELLIS_HOME`, else `$XDG_STATE_HOME/trellis`, else `~/.local/state/trellis`.
pub fn default_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("TRELLIS_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home));
    }
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(state).join("trellis"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/trellis"))
}

/// The layout of one state directory.
#[derive(Debug, Clone)]
pub struct TrellisHome {
    root: PathBuf,
}

impl TrellisHome {
    /// Opens (creating with mode 0700) the state directory at `root`.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        create_private_dir(&root)?;
        create_private_dir(&root.join("runs"))?;
        create_private_dir(&root.join("workspaces"))?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn ledger_path(&self) -> PathBuf {
        self.root.join("ledger.sqlite3")
    }

    /// The private directory of one run (lease, controller log, scratch space), made if
    /// missing.
    pub fn run_dir(&self, run_id: &str) -> io::Result<PathBuf> {
        let dir = self.run_path(run_id);
        create_private_dir(&dir)?;
        Ok(dir)
    }

    /// Where [`TrellisHome::run_dir`] is, without making it (a run another host controlled
    /// has none here).
    pub fn run_path(&self, run_id: &str) -> PathBuf {
        self.root.join("runs").join(run_id)
    }

    pub fn controller_lease_path(&self, run_id: &str) -> io::Result<PathBuf> {
        Ok(self.run_dir(run_id)?.join("controller.lock"))
    }

    pub fn controller_log_path(&self, run_id: &str) -> io::Result<PathBuf> {
        Ok(self.run_dir(run_id)?.join("controller.log"))
    }

    /// One lease file per workspace, named by the hash of its canonical path.
    pub fn workspace_lease_path(&self, workspace: &Path) -> PathBuf {
        let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
        self.root
            .join("workspaces")
            .join(format!("{}.lock", hex::encode(&digest[..16])))
    }
}

fn create_private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// An exclusive advisory lock on a file, held for as long as this value (or a process that
/// inherited its descriptor) lives.
#[derive(Debug)]
pub struct Lease {
    file: File,
}

/// Whether a lease could be taken.
#[derive(Debug)]
pub enum LeaseAttempt {
    Acquired(Lease),
    HeldElsewhere,
}

impl Lease {
    /// Tries to take the lease without waiting.
    pub fn try_acquire(path: &Path) -> io::Result<LeaseAttempt> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(LeaseAttempt::Acquired(Self { file })),
            Err(TryLockError::WouldBlock) => Ok(LeaseAttempt::HeldElsewhere),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Adopts a lease whose locked descriptor this process inherited.
    pub fn from_inherited(file: File) -> Self {
        Self { file }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Records a note (e.g. the holder's run id) in the lease file for humans.
    pub fn describe(&self, note: &str) -> io::Result<()> {
        use std::io::Write;
        self.file.set_len(0)?;
        let mut file = &self.file;
        file.write_all(note.as_bytes())
    }
}

/// Reads the note left in a lease file (best effort).
pub fn lease_note(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let LeaseAttempt::Acquired(first) = Lease::try_acquire(&path).unwrap() else {
            panic!("first acquire failed");
        };
        assert!(matches!(
            Lease::try_acquire(&path).unwrap(),
            LeaseAttempt::HeldElsewhere
        ));
        drop(first);
        assert!(matches!(
            Lease::try_acquire(&path).unwrap(),
            LeaseAttempt::Acquired(_)
        ));
    }

    #[test]
    fn workspace_leases_are_per_path() {
        let dir = tempfile::tempdir().unwrap();
        let home = TrellisHome::open(dir.path().join("h")).unwrap();
        assert_ne!(
            home.workspace_lease_path(Path::new("/a")),
            home.workspace_lease_path(Path::new("/b"))
        );
    }
}
