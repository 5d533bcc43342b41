//! Test repositories made with the real git, and exact pictures of directory trees.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use trellis_workspace::{Git, Repository, RunCheckpoints};

/// Runs git in `dir` for test set-up; panics with git's words when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "user@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "user@example.invalid")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_DIR")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

pub fn write(root: &Path, relative: &str, content: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

/// A repository with one commit: tracked files, a `.gitignore` for `build/` and `*.log`.
pub fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "--quiet", "--initial-branch=main"]);
    write(root, ".gitignore", b"build/\n*.log\n");
    write(root, "README.md", b"# project\n");
    write(root, "src/lib.rs", b"pub fn answer() -> u32 { 42 }\n");
    write(root, "src/old.rs", b"// to be deleted\n");
    write(root, "script.sh", b"#!/bin/sh\necho hi\n");
    set_mode(&root.join("script.sh"), 0o755);
    std::os::unix::fs::symlink("src/lib.rs", root.join("link")).expect("symlink");
    git(root, &["add", "--all"]);
    git(root, &["commit", "--quiet", "-m", "initial"]);
    dir
}

pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// One entry of a directory picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { executable: bool, bytes: Vec<u8> },
    Link(PathBuf),
    Dir,
}

/// Every file, link and directory below `root` except `.git`, exactly.
pub fn picture(root: &Path) -> BTreeMap<String, Entry> {
    let mut entries = BTreeMap::new();
    walk(root, root, &mut entries);
    entries
}

fn walk(root: &Path, dir: &Path, entries: &mut BTreeMap<String, Entry>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let path = entry.path();
        let relative = path
            .strip_prefix(root)
            .expect("below root")
            .to_string_lossy()
            .into_owned();
        if relative == ".git" {
            continue;
        }
        let metadata = std::fs::symlink_metadata(&path).expect("metadata");
        if metadata.file_type().is_symlink() {
            entries.insert(
                relative,
                Entry::Link(std::fs::read_link(&path).expect("link")),
            );
        } else if metadata.is_dir() {
            entries.insert(relative, Entry::Dir);
            walk(root, &path, entries);
        } else {
            let executable = metadata.permissions().mode() & 0o100 != 0;
            let bytes = std::fs::read(&path).expect("read");
            entries.insert(relative, Entry::File { executable, bytes });
        }
    }
}

/// What the user's git state is: index bytes, HEAD, branches, stash and other references
/// outside Trellis's namespace.
#[derive(Debug, PartialEq, Eq)]
pub struct UserState {
    index: Option<Vec<u8>>,
    head: String,
    references: String,
    stash: String,
}

pub fn user_state(root: &Path) -> UserState {
    UserState {
        index: std::fs::read(root.join(".git/index")).ok(),
        head: std::fs::read_to_string(root.join(".git/HEAD")).expect("HEAD"),
        references: git(root, &["for-each-ref", "--format=%(refname) %(objectname)"])
            .lines()
            .filter(|line| !line.starts_with("refs/trellis/"))
            .collect::<Vec<_>>()
            .join("\n"),
        stash: git(root, &["stash", "list", "--format=%H"]),
    }
}

pub fn checkpoints(root: &Path, run: &str, state: &Path) -> RunCheckpoints {
    let repo = Repository::open(root, &Git::from_environment()).expect("repository");
    RunCheckpoints::new(repo, run, state.join(format!("{run}.index")), None).expect("checkpoints")
}
