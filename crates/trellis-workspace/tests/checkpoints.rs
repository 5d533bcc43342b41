//! Checkpoints and restores against real git repositories: what is recorded, what a restore
//! brings back byte for byte, and that the user's index, HEAD, branches and stash never move.

mod support;

use support::{Entry, checkpoints, git, picture, repository, set_mode, user_state, write};
use trellis_workspace::{Git, ObjectId, Repository, RunCheckpoints};

const RUN: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

fn listed_files(root: &std::path::Path, tree: &ObjectId) -> Vec<String> {
    git(root, &["ls-tree", "-r", "--name-only", tree.as_str()])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_checkpoint_holds_tracked_modified_and_untracked_files_but_not_ignored_ones() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    write(root, "src/lib.rs", b"pub fn answer() -> u32 { 43 }\n");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    write(root, "notes/untracked.txt", b"scribbles\n");
    write(root, "build/out.bin", b"\0\x01ignored");
    write(root, "debug.log", b"ignored too\n");

    let run = checkpoints(root, RUN, state.path());
    let checkpoint = run.take(1, "before work").unwrap();

    assert_eq!(
        listed_files(root, &checkpoint.tree),
        [
            ".gitignore",
            "README.md",
            "link",
            "notes/untracked.txt",
            "script.sh",
            "src/lib.rs"
        ]
    );
    let stored = git(root, &["show", &format!("{}:src/lib.rs", checkpoint.tree)]);
    assert_eq!(stored, "pub fn answer() -> u32 { 43 }");
    assert_eq!(
        git(root, &["rev-parse", &checkpoint.reference]),
        checkpoint.commit.as_str()
    );
    assert_eq!(
        git(
            root,
            &["rev-parse", &format!("{}^{{tree}}", checkpoint.reference)]
        ),
        checkpoint.tree.as_str()
    );
    assert_eq!(
        checkpoint.reference,
        format!("refs/trellis/checkpoints/{RUN}/1")
    );
    // Against HEAD: one modified, one deleted, one new file.
    assert_eq!(checkpoint.files_changed, 3);
    let expected_bytes = "pub fn answer() -> u32 { 43 }\n".len() + "scribbles\n".len();
    assert_eq!(checkpoint.bytes_changed, expected_bytes as u64);
    // A commit off the user's HEAD by the checkpoint identity, saying what it precedes.
    assert_eq!(
        git(root, &["rev-parse", &format!("{}^", checkpoint.reference)]),
        git(root, &["rev-parse", "HEAD"])
    );
    assert_eq!(
        git(
            root,
            &["log", "-1", "--format=%an <%ae>|%s", &checkpoint.reference]
        ),
        "Trellis <checkpoints@trellis.invalid>|before work"
    );
}

#[test]
fn later_checkpoints_count_changes_since_the_previous_one_and_reuse_an_unchanged_tree() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, RUN, state.path());
    let first = run.take(1, "before work").unwrap();
    assert_eq!(first.files_changed, 0, "a clean tree equals HEAD");

    write(root, "a.txt", b"aaaa");
    write(root, "README.md", b"# project, edited\n");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    set_mode(&root.join("script.sh"), 0o644);
    let second = run.take(2, "before work").unwrap();
    assert_eq!(second.files_changed, 4);
    assert_eq!(
        second.bytes_changed,
        (4 + "# project, edited\n".len() + "#!/bin/sh\necho hi\n".len()) as u64
    );
    assert_eq!(
        git(
            root,
            &["diff", "--name-only", &first.reference, &second.reference]
        ),
        "README.md\na.txt\nscript.sh\nsrc/old.rs"
    );

    // Nothing changed: the third holds the second's tree (an unchanged workspace may be
    // named by the second's own commit, see tests/unchanged.rs).
    let third = run.take(3, "before work").unwrap();
    assert_eq!((&third.tree, third.files_changed), (&second.tree, 0));
    assert_eq!(
        git(
            root,
            &["rev-parse", &format!("{}^{{tree}}", third.reference)]
        ),
        second.tree.as_str()
    );

    // A snapshot between checkpoints (a verifier's copy) does not change what is counted.
    write(root, "a.txt", b"aaaaaa");
    run.snapshot().unwrap();
    write(root, "b.txt", b"bb");
    let fourth = run.take(4, "before work").unwrap();
    assert_eq!((fourth.files_changed, fourth.bytes_changed), (2, 8));
    // Each checkpoint's parent is the one before it.
    assert_eq!(
        git(root, &["rev-parse", &format!("{}^", fourth.reference)]),
        third.commit.as_str()
    );
    let names: Vec<String> = run
        .references()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    // Every checkpoint is kept by a reference: its own, or (unchanged) the one it repeats.
    for taken in [&first, &second, &third, &fourth] {
        assert!(names.contains(&taken.reference), "{names:?}");
    }
}

#[test]
fn restore_brings_back_every_byte_mode_link_untracked_and_deleted_file() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    // The state to come back to: edits, an untracked file, a deleted tracked file.
    write(root, "src/lib.rs", b"pub fn answer() -> u32 { 7 }\n");
    write(root, "untracked.txt", b"\xff\xfe binary \0 bytes");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    write(root, "build/cache", b"ignored and kept");
    let run = checkpoints(root, RUN, state.path());
    let checkpoint = run.take(1, "before work").unwrap();
    let before = picture(root);

    // Everything a worker could do afterwards.
    write(root, "src/lib.rs", b"broken");
    std::fs::remove_file(root.join("untracked.txt")).unwrap();
    write(root, "src/old.rs", b"resurrected\n");
    write(root, "new/dir/file.txt", b"new\n");
    set_mode(&root.join("script.sh"), 0o644);
    std::fs::remove_file(root.join("link")).unwrap();
    std::os::unix::fs::symlink("README.md", root.join("link")).unwrap();
    std::fs::remove_file(root.join("README.md")).unwrap();
    std::fs::create_dir(root.join("README.md")).unwrap();
    write(root, "README.md/inside", b"a directory where a file was");

    let restored = run.restore(&checkpoint.tree, None).unwrap();
    assert_ne!(restored.previous_tree, checkpoint.tree);
    assert_eq!(restored.kept_as, None);
    let after = picture(root);
    assert_eq!(after, before);
    assert!(matches!(after.get("build/cache"), Some(Entry::File { .. })));
}

#[test]
fn the_users_index_head_branches_and_stash_never_move() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    // The user has a branch, a stash and a staged change.
    git(root, &["branch", "feature"]);
    write(root, "README.md", b"stashed change\n");
    git(root, &["stash", "--quiet"]);
    write(root, "src/lib.rs", b"staged\n");
    git(root, &["add", "src/lib.rs"]);
    let user = user_state(root);

    let run = checkpoints(root, RUN, state.path());
    let first = run.take(1, "before work").unwrap();
    write(root, "worker.txt", b"output\n");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    run.take(2, "before work").unwrap();
    run.snapshot().unwrap();
    run.restore(&first.tree, Some(&format!("refs/trellis/saved/{RUN}")))
        .unwrap();
    assert_eq!(run.recorded_end().unwrap(), None);
    let end = run.record_end().unwrap();
    assert_eq!(run.recorded_end().unwrap(), Some(end));
    assert_eq!(user_state(root), user, "after checkpoints and a restore");
    assert_eq!(run.prune().unwrap(), 3, "two checkpoints and the end");
    assert_eq!(user_state(root), user, "after pruning");
    // The staged change is still staged, exactly as the user left it.
    assert_eq!(
        git(root, &["diff", "--cached", "--name-only"]),
        "src/lib.rs"
    );
}

#[test]
fn a_forced_restore_keeps_the_replaced_state_under_the_given_reference() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, RUN, state.path());
    let checkpoint = run.take(1, "before work").unwrap();
    write(root, "users-own-work.txt", b"precious\n");
    let keep = format!("refs/trellis/saved/{RUN}/1");
    let restored = run.restore(&checkpoint.tree, Some(&keep)).unwrap();
    assert_eq!(restored.kept_as.as_deref(), Some(keep.as_str()));
    assert!(!root.join("users-own-work.txt").exists());
    assert_eq!(
        git(root, &["show", &format!("{keep}:users-own-work.txt")]),
        "precious"
    );
    // Restoring the state the workspace already holds keeps nothing and changes nothing.
    let again = run
        .restore(&checkpoint.tree, Some("refs/trellis/saved/other"))
        .unwrap();
    assert_eq!(again.kept_as, None);
    assert_eq!(again.previous_tree, checkpoint.tree);
}

#[test]
fn pruning_deletes_the_runs_references_and_private_index_only() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, RUN, state.path());
    let other = checkpoints(root, "other-run", state.path());
    run.take(1, "before work").unwrap();
    write(root, "x", b"x");
    run.take(2, "before work").unwrap();
    run.record_end().unwrap();
    let kept = other.take(1, "before work").unwrap();
    assert!(state.path().join(format!("{RUN}.index")).exists());

    assert_eq!(run.prune().unwrap(), 3);
    assert!(run.references().unwrap().is_empty());
    assert!(!state.path().join(format!("{RUN}.index")).exists());
    assert_eq!(other.references().unwrap(), [(kept.reference, kept.commit)]);
    assert_eq!(run.prune().unwrap(), 0, "pruning twice is harmless");
}

#[test]
fn the_private_index_starts_from_a_seed_and_survives_a_corrupt_one() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let first = checkpoints(root, RUN, state.path());
    write(root, "a.txt", b"a");
    let taken = first.take(1, "before work").unwrap();

    let git_runner = Git::from_environment();
    let seeded = RunCheckpoints::new(
        Repository::open(root, &git_runner).unwrap(),
        "successor",
        state.path().join("successor.index"),
        Some(state.path().join(format!("{RUN}.index"))),
    )
    .unwrap();
    assert_eq!(seeded.snapshot().unwrap(), taken.tree);

    let corrupt_seed = state.path().join("garbage.index");
    std::fs::write(&corrupt_seed, b"DIRC this is not an index").unwrap();
    let recovering = RunCheckpoints::new(
        Repository::open(root, &git_runner).unwrap(),
        "recovering",
        state.path().join("recovering.index"),
        Some(corrupt_seed),
    )
    .unwrap();
    assert_eq!(recovering.take(1, "before work").unwrap().tree, taken.tree);
}

/// A controller killed while git held the private index leaves `<index>.lock`; every later
/// checkpoint then fails until the run's next owner clears it.
#[test]
fn a_lock_left_by_a_dead_checkpoint_is_cleared_by_the_next_owner() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let first = checkpoints(root, RUN, state.path());
    write(root, "a.txt", b"a");
    let taken = first.take(1, "before work").unwrap();
    let lock = state.path().join(format!("{RUN}.index.lock"));
    std::fs::write(&lock, b"half-written by a killed git").unwrap();

    let successor = checkpoints(root, RUN, state.path());
    assert!(
        successor.take(2, "blocked").is_err(),
        "git refuses an index whose lock exists"
    );
    assert!(successor.clear_stale_index_lock().unwrap());
    assert!(!lock.exists());
    assert!(!successor.clear_stale_index_lock().unwrap(), "nothing left");
    write(root, "b.txt", b"b");
    let next = successor.take(2, "after the crash").unwrap();
    assert_ne!(next.tree, taken.tree);
    assert_eq!(
        listed_files(root, &next.tree)
            .iter()
            .filter(|f| *f == "b.txt")
            .count(),
        1
    );
}

#[test]
fn a_repository_without_commits_is_checkpointed_from_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "--quiet"]);
    write(root, "first.txt", b"1");
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, RUN, state.path());
    let checkpoint = run.take(1, "before work").unwrap();
    assert_eq!(listed_files(root, &checkpoint.tree), ["first.txt"]);
    assert_eq!(checkpoint.files_changed, 1);
    std::fs::remove_file(root.join("first.txt")).unwrap();
    run.restore(&checkpoint.tree, None).unwrap();
    assert_eq!(std::fs::read(root.join("first.txt")).unwrap(), b"1");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", "HEAD"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        !head.status.success(),
        "no commit was made on the user's branch"
    );
}

#[test]
fn a_workspace_below_the_top_is_checkpointed_whole_and_outside_git_is_no_repository() {
    let repo = repository();
    let root = repo.path();
    let git_runner = Git::from_environment();
    let found = Repository::discover(&root.join("src"), &git_runner)
        .unwrap()
        .unwrap();
    assert_eq!(
        found.top().canonicalize().unwrap(),
        root.canonicalize().unwrap()
    );
    let outside = tempfile::tempdir().unwrap();
    assert!(
        Repository::discover(outside.path(), &git_runner)
            .unwrap()
            .is_none()
    );
    let error = Repository::open(outside.path(), &git_runner).unwrap_err();
    assert_eq!(error.code(), "workspace.not_a_repository");
}

#[test]
fn checkpoints_survive_the_users_garbage_collection() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    write(root, "untracked.txt", b"only in the checkpoint\n");
    let run = checkpoints(root, RUN, state.path());
    let checkpoint = run.take(1, "before work").unwrap();
    std::fs::remove_file(root.join("untracked.txt")).unwrap();
    git(root, &["gc", "--quiet", "--prune=now"]);
    run.restore(&checkpoint.tree, None).unwrap();
    assert_eq!(
        std::fs::read(root.join("untracked.txt")).unwrap(),
        b"only in the checkpoint\n"
    );
}

/// Loose objects in the repository's store (`git count-objects`' first line).
fn loose_objects(root: &std::path::Path) -> u64 {
    let counted = git(root, &["count-objects"]);
    let first = counted.split(' ').next().unwrap_or_default();
    first.parse().unwrap()
}

#[test]
fn a_later_checkpoint_writes_its_blobs_trees_and_commit_into_packs_not_loose_files() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let run = checkpoints(root, RUN, state.path());
    let first = run.take(1, "before work").unwrap();
    let loose_before = loose_objects(root);
    write(root, "deep/er/new.txt", b"new file\n");
    write(root, "src/lib.rs", b"pub fn answer() -> u32 { 43 }\n");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    let second = run.take(2, "before the repair").unwrap();
    assert_eq!(loose_objects(root), loose_before, "no loose object written");
    assert_eq!(second.files_changed, 3);
    assert_eq!(
        git(root, &["rev-parse", &format!("{}^", second.reference)]),
        first.commit.as_str()
    );
    assert_eq!(
        git(
            root,
            &["rev-parse", &format!("{}^{{tree}}", second.reference)]
        ),
        second.tree.as_str()
    );
    assert_eq!(
        git(
            root,
            &["log", "-1", "--format=%B%an <%ae>", &second.reference]
        ),
        "before the repair\nTrellis <checkpoints@trellis.invalid>"
    );
    let fresh = checkpoints(root, "fresh", state.path()).snapshot().unwrap();
    assert_eq!(
        fresh,
        second.tree,
        "{}",
        git(
            root,
            &["diff", "--raw", second.tree.as_str(), fresh.as_str()]
        )
    );
    git(root, &["fsck", "--no-dangling"]);
}
