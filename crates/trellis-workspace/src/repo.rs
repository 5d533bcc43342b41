//! The git repository a workspace belongs to: where its working tree, git directories and the
//! user's index are, and object ids.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::WorkspaceError;
use crate::git::{Git, one_line};

/// A git object id (SHA-1 or SHA-256 hex), checked on construction.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(String);

impl ObjectId {
    /// Accepts 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (hex && (text.len() == 40 || text.len() == 64)).then(|| Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses git's one-line answer as an object id.
    pub(crate) fn from_answer(command: &str, stdout: &[u8]) -> Result<Self, WorkspaceError> {
        let line = one_line(command, stdout)?;
        Self::parse(&line).ok_or_else(|| WorkspaceError::Unexpected {
            command: command.to_owned(),
            detail: format!("{line:?} is not an object id"),
        })
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A non-bare repository seen from one of its working trees.
#[derive(Debug, Clone)]
pub struct Repository {
    git: Git,
    top: PathBuf,
    git_dir: PathBuf,
    common_dir: PathBuf,
    user_index: PathBuf,
}

impl Repository {
    /// The repository whose working tree holds `path`, or `None` when there is none.
    pub fn discover(path: &Path, git: &Git) -> Result<Option<Self>, WorkspaceError> {
        let args = [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
            "--git-path",
            "index",
        ];
        let Some(stdout) = git.query(path, &args, &[])? else {
            return Ok(None);
        };
        let text = one_line("rev-parse", &stdout)?;
        let lines: Vec<&str> = text.split('\n').collect();
        let [top, git_dir, common_dir, index] = lines[..] else {
            return Err(WorkspaceError::Unexpected {
                command: "rev-parse".into(),
                detail: format!("expected four paths, got {}", lines.len()),
            });
        };
        Ok(Some(Self {
            git: git.clone(),
            top: PathBuf::from(top),
            git_dir: PathBuf::from(git_dir),
            common_dir: PathBuf::from(common_dir),
            user_index: PathBuf::from(index),
        }))
    }

    /// Like [`Repository::discover`], but a directory outside git is an error.
    pub fn open(path: &Path, git: &Git) -> Result<Self, WorkspaceError> {
        Self::discover(path, git)?.ok_or_else(|| WorkspaceError::NotARepository {
            path: path.to_path_buf(),
        })
    }

    /// The top of the working tree: what a checkpoint records.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// This working tree's own git directory (a linked worktree's is below the common one).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The directory shared by every working tree: objects and references.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// The user's index of this working tree. Read (copied) only, never written.
    pub fn user_index(&self) -> &Path {
        &self.user_index
    }

    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The commit `HEAD` names, or `None` before the first commit.
    pub fn head(&self) -> Result<Option<ObjectId>, WorkspaceError> {
        let args = ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"];
        match self.git.query(&self.top, &args, &[])? {
            Some(stdout) => ObjectId::from_answer("rev-parse", &stdout).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the object store holds `object`.
    pub fn has_object(&self, object: &ObjectId) -> Result<bool, WorkspaceError> {
        let args = ["cat-file", "-e", object.as_str()];
        Ok(self.git.query(&self.top, &args, &[])?.is_some())
    }

    /// Runs git in the top of the working tree.
    pub(crate) fn run(
        &self,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Result<Vec<u8>, WorkspaceError> {
        self.git.run(&self.top, args, env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_full_lowercase_hex() {
        assert!(ObjectId::parse(&"a".repeat(40)).is_some());
        assert!(ObjectId::parse(&"0".repeat(64)).is_some());
        for bad in ["", "abc", &"A".repeat(40), &"g".repeat(40), &"a".repeat(41)] {
            assert!(ObjectId::parse(bad).is_none(), "{bad}");
        }
    }
}
