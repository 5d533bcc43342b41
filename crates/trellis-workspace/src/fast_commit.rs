//! A checkpoint commit that differs from its parent in a few known paths, written by one
//! `git fast-import` process: the changed blobs are already in the object store (staged by
//! `git add`), and the rebuilt trees, the commit and its reference go into one pack. On a
//! busy disk, creating a file costs more than hashing one, so one pack beats a loose object
//! file per tree and commit (`write-tree`, `commit-tree`, `update-ref`: three processes).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::WorkspaceError;
use crate::git::CHECKPOINT_AUTHOR;
use crate::repo::{ObjectId, Repository};

/// Options for every fast-import: keep even a small pack (the default unpacks fewer than 100
/// objects into loose files, through another process), and no reverse index file.
const FAST_IMPORT_OPTIONS: [&str; 4] = [
    "-c",
    "fastimport.unpackLimit=0",
    "-c",
    "pack.writeReverseIndex=false",
];

/// A path of the new commit: its mode and object, or `None` when it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathChange {
    pub path: Vec<u8>,
    pub entry: Option<(String, ObjectId)>,
}

/// The commit written and its tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    pub commit: ObjectId,
    pub tree: ObjectId,
}

/// Writes a commit of `parent`'s tree with `changes` applied, with `message`, and points
/// `reference` at it.
pub(crate) fn commit_changes(
    repo: &Repository,
    parent: &ObjectId,
    reference: &str,
    message: &str,
    changes: &[PathChange],
) -> Result<Written, WorkspaceError> {
    let input = script(parent, reference, message, changes, now_seconds());
    let mut args = FAST_IMPORT_OPTIONS.to_vec();
    args.extend(["fast-import", "--quiet", "--force", "--cat-blob-fd=1"]);
    let stdout = repo.git().run_with_input(repo.top(), &args, &[], input)?;
    read_answer(&stdout)
}

/// The fast-import commands: the commit (mark 1) on top of `parent`, deletions before
/// additions (a file may replace a directory of the same name), then questions for its id and
/// its root tree, answered on stdout.
fn script(
    parent: &ObjectId,
    reference: &str,
    message: &str,
    changes: &[PathChange],
    seconds: u64,
) -> Vec<u8> {
    let (name, email) = CHECKPOINT_AUTHOR;
    let mut out = Vec::new();
    let message = format!("{message}\n");
    out.extend_from_slice(
        format!(
            "commit {reference}\nmark :1\ncommitter {name} <{email}> {seconds} +0000\n\
             data {}\n{message}from {parent}\n",
            message.len()
        )
        .as_bytes(),
    );
    for change in changes.iter().filter(|c| c.entry.is_none()) {
        out.extend_from_slice(b"D ");
        quote_path(&change.path, &mut out);
        out.push(b'\n');
    }
    for change in changes {
        if let Some((mode, object)) = &change.entry {
            out.extend_from_slice(format!("M {mode} {object} ").as_bytes());
            quote_path(&change.path, &mut out);
            out.push(b'\n');
        }
    }
    out.extend_from_slice(b"\nget-mark :1\nls :1 \"\"\n");
    out
}

/// A path in C-style quotes, as fast-import reads it: any byte may appear, quotes,
/// backslashes and control characters escaped.
fn quote_path(path: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in path {
        match byte {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', byte]),
            b'\n' => out.extend_from_slice(b"\\n"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\{byte:03o}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

/// Reads `COMMIT\n040000 tree TREE\t\n` (the answers to `get-mark` and `ls`).
fn read_answer(stdout: &[u8]) -> Result<Written, WorkspaceError> {
    let unexpected = |detail: &str| WorkspaceError::Unexpected {
        command: "fast-import".into(),
        detail: detail.to_owned(),
    };
    let text = std::str::from_utf8(stdout).map_err(|_| unexpected("its answer is not UTF-8"))?;
    let mut lines = text.lines();
    let commit = lines
        .next()
        .and_then(|line| ObjectId::parse(line.trim()))
        .ok_or_else(|| unexpected("no commit id"))?;
    let tree = lines
        .next()
        .and_then(|line| line.strip_prefix("040000 tree "))
        .and_then(|rest| ObjectId::parse(rest.trim_end_matches('\t').trim()))
        .ok_or_else(|| unexpected("no root tree"))?;
    Ok(Written { commit, tree })
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Parses `git ls-files -s -z` output (`MODE OBJECT STAGE\tPATH` NUL) into changes.
pub(crate) fn read_index_entries(stdout: &[u8]) -> Result<Vec<PathChange>, WorkspaceError> {
    let mut changes = Vec::new();
    for record in stdout.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let parsed = record
            .iter()
            .position(|&b| b == b'\t')
            .and_then(|tab| {
                let meta = std::str::from_utf8(&record[..tab]).ok()?;
                let mut fields = meta.split(' ');
                let mode = fields.next()?.to_owned();
                let object = ObjectId::parse(fields.next()?)?;
                // Only stage 0: a private index never holds a conflict.
                (fields.next()? == "0").then_some(())?;
                Some(PathChange {
                    path: record.get(tab + 1..)?.to_vec(),
                    entry: Some((mode, object)),
                })
            })
            .ok_or_else(|| WorkspaceError::Unexpected {
                command: "ls-files".into(),
                detail: format!("cannot read {:?}", String::from_utf8_lossy(record)),
            })?;
        changes.push(parsed);
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_so_any_byte_survives() {
        let mut out = Vec::new();
        quote_path(b"a \"b\"\\c\nd\x01\xc3\xa9", &mut out);
        assert_eq!(out, b"\"a \\\"b\\\"\\\\c\\nd\\001\xc3\xa9\"");
    }

    #[test]
    fn the_script_deletes_before_it_adds_and_asks_for_the_commit_and_tree() {
        let id = ObjectId::parse(&"a".repeat(40)).unwrap();
        let changes = [
            PathChange {
                path: b"b/c".to_vec(),
                entry: Some(("100644".into(), id.clone())),
            },
            PathChange {
                path: b"b".to_vec(),
                entry: None,
            },
        ];
        let text = String::from_utf8(script(&id, "refs/x", "msg", &changes, 7)).unwrap();
        let expected = format!(
            "commit refs/x\nmark :1\ncommitter Trellis <checkpoints@trellis.invalid> 7 +0000\n\
             data 4\nmsg\nfrom {id}\nD \"b\"\nM 100644 {id} \"b/c\"\n\nget-mark :1\nls :1 \"\"\n"
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn answers_and_listings_are_read_or_refused() {
        let commit = "c".repeat(40);
        let tree = "d".repeat(40);
        let answer = format!("{commit}\n040000 tree {tree}\t\n");
        let written = read_answer(answer.as_bytes()).unwrap();
        assert_eq!(
            (written.commit.as_str(), written.tree.as_str()),
            (commit.as_str(), tree.as_str())
        );
        assert!(read_answer(b"nonsense\n").is_err());
        let listing = format!("120000 {tree} 0\tsrc/a b\0");
        let entries = read_index_entries(listing.as_bytes()).unwrap();
        assert_eq!(entries[0].path, b"src/a b");
        assert!(read_index_entries(b"100644 zz 0\tx\0").is_err());
    }
}
