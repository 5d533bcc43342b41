//! Listing and deleting the references Trellis keeps in a repository (checkpoints, saved
//! workspace states, worker hosts' transfers), for pruning: only names below `refs/trellis/`
//! are read or deleted.

use crate::checkpoint::CHECKPOINT_NAMESPACE;
use crate::error::WorkspaceError;
use crate::repo::{ObjectId, Repository};
use crate::transfer::REMOTE_NAMESPACE;

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

/// Every reference below `refs/trellis/checkpoints/`, `refs/trellis/saved/` and
/// `refs/trellis/remote/` in `repo`.
pub fn trellis_references(repo: &Repository) -> Result<Vec<TrellisReference>, WorkspaceError> {
    let checkpoints = format!("{CHECKPOINT_NAMESPACE}/");
    let saved = format!("{SAVED_NAMESPACE}/");
    let remote = format!("{REMOTE_NAMESPACE}/");
    let format = "--format=%(objectname) %(committerdate:unix) %(refname)";
    let stdout = repo.run(
        &["for-each-ref", format, &checkpoints, &saved, &remote],
        &[],
    )?;
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

/// Every reference below `prefix` (which must be inside `refs/trellis/`) with the object it
/// names and, when that is a commit, its message (empty otherwise).
pub fn references_with_messages(
    repo: &Repository,
    prefix: &str,
) -> Result<Vec<(String, ObjectId, String)>, WorkspaceError> {
    if !prefix.starts_with("refs/trellis/") {
        return Err(WorkspaceError::InvalidName(prefix.to_owned()));
    }
    let stdout = repo.run(
        &["for-each-ref", "--format=%(objectname) %(refname)", prefix],
        &[],
    )?;
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&stdout).lines() {
        let parsed = line
            .split_once(' ')
            .and_then(|(id, name)| Some((ObjectId::parse(id)?, name.to_owned())));
        let Some((object, name)) = parsed else {
            return Err(WorkspaceError::Unexpected {
                command: "for-each-ref".into(),
                detail: format!("cannot read {line:?}"),
            });
        };
        let args = ["log", "-1", "--format=%B", object.as_str()];
        let message = match repo.git().query(repo.top(), &args, &[])? {
            Some(stdout) => String::from_utf8_lossy(&stdout).into_owned(),
            None => String::new(),
        };
        found.push((name, object, message));
    }
    Ok(found)
}
