//! What a checkpoint changed: the paths `git add --all --verbose` reports staging (added or
//! removed) and the bytes they hold, or, when that cannot be trusted, the diff of two trees.

use std::path::{Path, PathBuf};

use crate::error::WorkspaceError;
use crate::repo::{ObjectId, Repository};

/// What `git add --all --verbose` reported updating in the index.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub files: u64,
    pub bytes: u64,
    /// Paths added or modified, and removed, as git printed them.
    pub added: Vec<Vec<u8>>,
    pub removed: Vec<Vec<u8>>,
    /// A line that was not `add 'PATH'` or `remove 'PATH'` (a path with a line break):
    /// the counts are then taken from the trees instead.
    pub unclear: bool,
}

impl Staged {
    pub(crate) fn read(stdout: &[u8], top: &Path) -> Self {
        let mut staged = Self::default();
        for line in stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Some(path) = quoted(line, b"add '") {
                staged.files += 1;
                staged.bytes += on_disk_size(&top.join(bytes_path(path)));
                staged.added.push(path.to_vec());
            } else if let Some(path) = quoted(line, b"remove '") {
                staged.files += 1;
                staged.removed.push(path.to_vec());
            } else {
                staged.unclear = true;
            }
        }
        staged
    }
}

/// The text between `prefix` and the closing quote that ends `line`.
fn quoted<'a>(line: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    line.strip_prefix(prefix)?.strip_suffix(b"'")
}

/// A path git printed, as a path (git paths are bytes; Unix paths are too).
pub(crate) fn bytes_path(raw: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(raw))
}

/// The size of a file or symbolic link (not its target); 0 when it is gone already.
pub(crate) fn on_disk_size(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| m.len())
}

/// Files that differ between `base` (nothing, when `None`) and `tree`, and the bytes of
/// those added or modified.
pub(crate) fn changes_between(
    repo: &Repository,
    base: Option<&ObjectId>,
    tree: &ObjectId,
) -> Result<(u64, u64), WorkspaceError> {
    let stdout = match base {
        Some(base) => repo.run(
            &[
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                base.as_str(),
                tree.as_str(),
            ],
            &[],
        )?,
        None => repo.run(&["ls-tree", "-r", "-z", "--full-tree", tree.as_str()], &[])?,
    };
    let mut files = 0;
    let mut bytes = 0;
    let mut fields = stdout.split(|&b| b == 0).filter(|f| !f.is_empty());
    while let Some(meta) = fields.next() {
        // diff-tree: ":old-mode new-mode old-id new-id STATUS" NUL path NUL;
        // ls-tree: "mode type id" TAB path NUL.
        let (meta, path) = match base {
            Some(_) => {
                let Some(path) = fields.next() else {
                    return Err(WorkspaceError::Unexpected {
                        command: "diff-tree".into(),
                        detail: "a change without a path".into(),
                    });
                };
                (String::from_utf8_lossy(meta).into_owned(), path)
            }
            None => {
                let tab = meta.iter().position(|&b| b == b'\t').unwrap_or(meta.len());
                let (head, rest) = meta.split_at(tab);
                (
                    format!("A {}", String::from_utf8_lossy(head)),
                    rest.get(1..).unwrap_or_default(),
                )
            }
        };
        files += 1;
        let added_or_modified = match base {
            Some(_) => matches!(meta.rsplit(' ').next(), Some("A" | "M" | "T")),
            None => true,
        };
        // The new mode is the second field of both forms; 160000 is a submodule's commit.
        let submodule = meta.split(' ').nth(1) == Some("160000");
        if added_or_modified && !submodule {
            bytes += on_disk_size(&repo.top().join(bytes_path(path)));
        }
    }
    Ok((files, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_add_output_is_counted_and_anything_else_makes_it_unclear() {
        let top = Path::new("/nonexistent");
        let staged = Staged::read(b"add 'a'\nremove 'b c'\nadd 'it's'\n", top);
        assert_eq!((staged.files, staged.unclear), (3, false));
        let broken = Staged::read(b"add 'line\nbreak'\n", top);
        assert!(broken.unclear);
        assert_eq!(Staged::read(b"", top).files, 0);
    }
}
