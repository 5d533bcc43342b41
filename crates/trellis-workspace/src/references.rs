//! Listing and deleting the references Trellis keeps in a repository (checkpoints and saved
//! workspace states), for pruning: only names below `refs/trellis/` are read or deleted.

use crate::checkpoint::CHECKPOINT_NAMESPACE;
use crate::error::WorkspaceError;
use crate::repo::{ObjectId, Repository};

/// Where a forced restore keeps the workspace state it replaced
/// (`refs/trellis/saved/<run>/<ms>`).
pub const SAVED_NAMESPACE: &str = "refs/trellis/saved";

/// One reference of Trellis's namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrellisReference {
    pub name: String,
    pub object: ObjectId,
    /// The committer time of the commit it names, in milliseconds since the epoch.
    pub committed_ms: u64,
}

/// Every reference below `refs/trellis/checkpoints/` and `refs/trellis/saved/` in `repo`.
pub fn trellis_references(repo: &Repository) -> Result<Vec<TrellisReference>, WorkspaceError> {
    let checkpoints = format!("{CHECKPOINT_NAMESPACE}/");
    let saved = format!("{SAVED_NAMESPACE}/");
    let format = "--format=%(objectname) %(committerdate:unix) %(refname)";
    let stdout = repo.run(&["for-each-ref", format, &checkpoints, &saved], &[])?;
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&stdout).lines() {
        let mut fields = line.splitn(3, ' ');
        let parsed = (
            fields.next().and_then(ObjectId::parse),
            fields.next().and_then(|s| s.parse::<u64>().ok()),
            fields.next(),
        );
        let (Some(object), Some(seconds), Some(name)) = parsed else {
            return Err(WorkspaceError::Unexpected {
                command: "for-each-ref".into(),
                detail: format!("cannot read {line:?}"),
            });
        };
        found.push(TrellisReference {
            name: name.to_owned(),
            object,
            committed_ms: seconds.saturating_mul(1000),
        });
    }
    Ok(found)
}

/// Deletes `references` (each still naming the object given) in one transaction; names
/// outside Trellis's namespaces are refused.
pub fn delete_references(
    repo: &Repository,
    references: &[(String, ObjectId)],
) -> Result<(), WorkspaceError> {
    if references.is_empty() {
        return Ok(());
    }
    let mut commands = String::new();
    for (name, object) in references {
        if !name.starts_with("refs/trellis/") || name.contains(['\n', ' ']) {
            return Err(WorkspaceError::InvalidName(name.clone()));
        }
        commands.push_str(&format!("delete {name} {object}\n"));
    }
    repo.git().run_with_input(
        repo.top(),
        &["update-ref", "--stdin"],
        &[],
        commands.into_bytes(),
    )?;
    Ok(())
}

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
