//! Writing one of Trellis's references the way git writes a loose one, without starting git:
//! for the checkpoint of an unchanged workspace, which must cost next to nothing.

use crate::repo::{ObjectId, Repository};

/// Names `object` by the reference `name` (below `refs/trellis/`) without starting git, by
/// git's own protocol for a loose reference: an exclusive `<name>.lock` written and renamed
/// into place. Returns `false`, having changed nothing, where that protocol is not the one
/// this repository uses (its references are in a reftable) or the reference cannot be
/// written so (the caller then asks git, which reports why).
pub(crate) fn write_loose_reference(repo: &Repository, name: &str, object: &ObjectId) -> bool {
    use std::io::Write;
    let common = repo.common_dir();
    if !name.starts_with("refs/trellis/") || common.join("reftable").exists() {
        return false;
    }
    let path = common.join(name);
    let Some(parent) = path.parent() else {
        return false;
    };
    let mut lock = path.clone().into_os_string();
    lock.push(".lock");
    let lock = std::path::PathBuf::from(lock);
    if std::fs::create_dir_all(parent).is_err() {
        return false;
    }
    // An existing lock is another writer's: leave it and the reference to git.
    let Ok(mut file) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
    else {
        return false;
    };
    let placed = file.write_all(format!("{object}\n").as_bytes()).is_ok()
        && std::fs::rename(&lock, &path).is_ok();
    if !placed {
        let _ = std::fs::remove_file(&lock);
    }
    placed
}
