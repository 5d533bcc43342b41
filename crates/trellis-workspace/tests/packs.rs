//! The packs a run's checkpoints write stay few over many checkpoints, every checkpoint stays
//! readable, and the user's own packs and loose objects are left as they were.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use support::{checkpoints, git, repository, write};

/// The names of the packs in the repository.
fn packs(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root.join(".git/objects/pack"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".pack"))
        .collect()
}

fn loose_objects(root: &Path) -> String {
    git(root, &["count-objects"])
}

#[test]
fn many_checkpoints_leave_few_packs_every_one_readable_and_the_users_packs_alone() {
    const ROUNDS: u32 = 40;
    let repo = repository();
    let root = repo.path();
    // The user's objects: some packed, some loose.
    git(root, &["gc", "--quiet"]);
    write(root, "user-loose.txt", b"a loose object of the user's\n");
    git(root, &["add", "user-loose.txt"]);
    git(root, &["commit", "--quiet", "-m", "loose"]);
    let users_packs = packs(root);
    assert!(!users_packs.is_empty());
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, "many", state.path());
    run.take(1, "before work").unwrap();
    let loose_after_first = loose_objects(root);

    let mut taken = Vec::new();
    for round in 2..ROUNDS + 2 {
        for file in 0..3 {
            let body = format!("round {round} file {file}\n");
            write(root, &format!("work/f{file}.txt"), body.as_bytes());
        }
        write(root, &format!("new/{round}.txt"), b"one more\n");
        taken.push((round, run.take(round, "before work").unwrap()));
    }

    let now = packs(root);
    assert!(
        users_packs.is_subset(&now),
        "the user's packs stay: {users_packs:?} {now:?}"
    );
    // Two packs per checkpoint (blobs; trees and commit) would be 80 here.
    let own = now.len() - users_packs.len();
    assert!(own <= 9, "{own} packs of the run's own");
    assert_eq!(
        loose_objects(root),
        loose_after_first,
        "no loose object comes or goes"
    );
    for (round, checkpoint) in &taken {
        let shown = git(
            root,
            &["show", &format!("{}:work/f1.txt", checkpoint.reference)],
        );
        assert_eq!(shown, format!("round {round} file 1"));
        assert_eq!(
            git(
                root,
                &["rev-parse", &format!("{}^{{tree}}", checkpoint.reference)]
            ),
            checkpoint.tree.as_str()
        );
    }
    git(root, &["fsck", "--no-dangling", "--strict"]);
}

#[test]
fn the_bytes_a_copy_would_hold_are_read_from_the_index() {
    let repo = repository();
    let root = repo.path();
    write(root, "big.txt", &vec![b'x'; 10_000]);
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, "sized", state.path());
    // Before the run's first checkpoint: the user's index (without big.txt).
    let before = run.listed_bytes().unwrap();
    assert!(before > 0 && before < 10_000, "{before}");
    run.take(1, "before work").unwrap();
    let files: u64 = git(root, &["ls-files", "-z"])
        .split('\0')
        .chain(["big.txt"])
        .filter(|p| !p.is_empty())
        .map(|p| std::fs::symlink_metadata(root.join(p)).unwrap().len())
        .sum();
    assert_eq!(run.listed_bytes(), Some(files));
}

/// Issue 31: forty runs in one repository, a few checkpoints each, leave as few of Trellis's
/// packs as one long run does: the packs are rolled up per repository, not per run, and the
/// user's packs stay.
#[test]
fn successive_runs_in_one_repository_leave_few_packs_all_told() {
    const RUNS: u32 = 40;
    let repo = repository();
    let root = repo.path();
    git(root, &["gc", "--quiet"]);
    let users_packs = packs(root);
    let state = tempfile::tempdir().unwrap();
    let mut last = None;
    for run_number in 0..RUNS {
        let run = checkpoints(root, &format!("run{run_number}"), state.path());
        for step in 1..=3 {
            let body = format!("run {run_number} step {step}\n");
            write(root, &format!("work/r{run_number}.txt"), body.as_bytes());
            last = Some(run.take(step, "before work").unwrap());
        }
    }
    let now = packs(root);
    assert!(users_packs.is_subset(&now), "{users_packs:?} {now:?}");
    let own = now.len() - users_packs.len();
    // Without the roll-up across runs: two packs per checkpoint, 240 here.
    assert!(own <= 9, "{own} packs of Trellis's own after {RUNS} runs");
    let last = last.unwrap();
    assert_eq!(
        git(root, &["show", &format!("{}:work/r39.txt", last.reference)]),
        "run 39 step 3"
    );
    git(root, &["fsck", "--no-dangling", "--strict"]);
}
