//! A checkpoint of a workspace that did not change since the previous one is recognised from
//! the tree's stat data alone: no git process starts, no file is written, and it names the
//! previous commit (kept by the previous checkpoint's reference).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use support::{git, repository, write};
use trellis_workspace::{Git, Repository, RunCheckpoints};

const RUN: &str = "run-unchanged";

/// Git behind a wrapper that counts its starts in `dir/starts`.
fn counted_git(dir: &Path) -> Git {
    let wrapper = dir.join("git");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .expect("sh runs")
            .stdout,
    )
    .expect("utf-8");
    let script = format!(
        "#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n",
        dir.join("starts").display(),
        real.trim()
    );
    std::fs::write(&wrapper, script).expect("write wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Git::with_env(vec![("PATH".to_owned(), path)])
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn checkpoints_with(git: &Git, root: &Path, state: &Path) -> RunCheckpoints {
    let repo = Repository::open(root, git).expect("repository");
    RunCheckpoints::new(repo, RUN, state.join("run.index"), None).expect("checkpoints")
}

/// Waits out the filesystem clock's tick, so files written so far count as settled (a stamp
/// of files written in the tick it is read in is not trusted).
fn let_the_clock_tick() {
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn an_unchanged_workspace_is_checkpointed_without_starting_git() {
    let repo = repository();
    let root = repo.path();
    let tools = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let git_runner = counted_git(tools.path());
    let run = checkpoints_with(&git_runner, root, state.path());
    let_the_clock_tick();

    let first = run.take(1, "before a").unwrap();
    let after_first = starts(tools.path());
    assert!(after_first > 0, "the first checkpoint asks git");

    // Files below an ignored directory change nothing git would record.
    write(root, "build/out.bin", b"artifact");
    write(root, "build/deeper/trace.log", b"log");
    let second = run.take(2, "before b").unwrap();
    assert_eq!(
        starts(tools.path()),
        after_first,
        "no git for an unchanged tree"
    );
    assert_eq!(
        (&second.commit, &second.tree, second.files_changed),
        (&first.commit, &first.tree, 0)
    );
    assert_eq!(
        git(root, &["rev-parse", &second.reference]),
        first.commit.as_str(),
        "its reference is one git reads"
    );

    let third = run.take(3, "before c").unwrap();
    assert_eq!(third.commit, first.commit);
    // Unchanged checkpoints write nothing: the first one's reference keeps them all.
    assert_eq!(
        (second.reference.as_str(), third.reference.as_str()),
        (first.reference.as_str(), first.reference.as_str())
    );
    let names: Vec<String> = run
        .references()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, vec![first.reference.clone()]);

    // A real change goes to git and is recorded on top of the previous checkpoint.
    let before_change = starts(tools.path());
    write(root, "src/lib.rs", b"pub fn answer() -> u32 { 43 }\n");
    let fourth = run.take(4, "before d").unwrap();
    assert!(starts(tools.path()) > before_change);
    assert_eq!(fourth.files_changed, 1);
    assert_eq!(
        git(root, &["rev-parse", &format!("{}^", fourth.reference)]),
        first.commit.as_str()
    );
    assert_eq!(
        git(root, &["show", &format!("{}:src/lib.rs", fourth.reference)]),
        "pub fn answer() -> u32 { 43 }"
    );
}

#[test]
fn every_kind_of_change_is_seen_after_an_unchanged_checkpoint() {
    type Change = (&'static str, fn(&Path));
    let changes: [Change; 6] = [
        ("a new untracked file", |root| {
            write(root, "notes.txt", b"n")
        }),
        ("a new file in a new directory", |root| {
            write(root, "docs/new/page.md", b"p")
        }),
        ("a deleted file", |root| {
            std::fs::remove_file(root.join("src/old.rs")).unwrap()
        }),
        ("a mode change", |root| {
            support::set_mode(&root.join("script.sh"), 0o644)
        }),
        ("a rewrite of the same size", |root| {
            write(root, "README.md", b"# PROJECT\n")
        }),
        ("a changed link", |root| {
            std::fs::remove_file(root.join("link")).unwrap();
            std::os::unix::fs::symlink("src/old.rs", root.join("link")).unwrap();
        }),
    ];
    for (what, change) in changes {
        let repo = repository();
        let root = repo.path();
        let state = tempfile::tempdir().unwrap();
        let run = checkpoints_with(&Git::from_environment(), root, state.path());
        let_the_clock_tick();
        let first = run.take(1, "before").unwrap();
        let second = run.take(2, "before").unwrap();
        assert_eq!(second.commit, first.commit, "{what}: unchanged first");
        change(root);
        let third = run.take(3, "before").unwrap();
        assert_ne!(third.tree, first.tree, "{what} was missed");
        assert_eq!(third.files_changed, 1, "{what}");
    }
}

#[test]
fn a_change_in_the_same_clock_tick_as_the_stamp_is_not_missed() {
    // Written and rewritten with the same size straight away: the stamp of the first write
    // is racy, so the next checkpoint asks git.
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints_with(&Git::from_environment(), root, state.path());
    for round in 0..20u32 {
        let content = format!("round {:04}\n", round);
        write(root, "README.md", content.as_bytes());
        let taken = run.take(round + 1, "before").unwrap();
        assert_eq!(
            git(root, &["show", &format!("{}:README.md", taken.reference)]),
            content.trim_end(),
            "round {round}"
        );
    }
}
