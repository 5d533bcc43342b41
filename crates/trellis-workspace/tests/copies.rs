//! Disposable verifier copies and run worktrees against real git repositories.

mod support;

use std::process::Command;

use support::{Entry, checkpoints, git, picture, repository, user_state, write};
use trellis_workspace::{
    DisposableCopy, Git, Repository, add_worktree, remove_worktree, worktree_base,
};

#[test]
fn a_copy_holds_the_candidate_as_it_is_and_nothing_done_there_reaches_it() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    write(root, "src/lib.rs", b"candidate change\n");
    write(root, "new.txt", b"untracked candidate file\n");
    std::fs::remove_file(root.join("src/old.rs")).unwrap();
    write(root, "build/artifact", b"ignored: copied, being small");
    let candidate = checkpoints(root, "run-1", state.path());
    let before = picture(root);
    let user = user_state(root);

    let copy = DisposableCopy::create(&candidate, root, &state.path().join("copies/7")).unwrap();
    // A small ignored directory is copied like the rest.
    assert_eq!(picture(copy.workdir()), before);
    assert!(
        !git(copy.workdir(), &["status", "--porcelain"]).contains("build"),
        "the ignored copy is not reported as a change"
    );
    // The copy's git sees the candidate's changes against the candidate's HEAD.
    let status = git(copy.workdir(), &["status", "--porcelain"]);
    assert!(
        status.lines().any(|l| l.trim() == "M src/lib.rs"),
        "{status}"
    );
    assert!(
        status.lines().any(|l| l.trim() == "D src/old.rs"),
        "{status}"
    );
    assert!(status.contains("?? new.txt"), "{status}");
    assert_eq!(
        git(copy.workdir(), &["rev-parse", "HEAD"]),
        git(root, &["rev-parse", "HEAD"])
    );

    // A reviewer that deletes everything, commits and makes a branch.
    let deleted = Command::new("sh")
        .args([
            "-c",
            "find . -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +",
        ])
        .current_dir(copy.workdir())
        .status()
        .unwrap();
    assert!(deleted.success());
    git(copy.workdir(), &["add", "--all"]);
    git(copy.workdir(), &["commit", "--quiet", "-m", "vandalism"]);
    git(copy.workdir(), &["branch", "reviewer-branch"]);
    assert_eq!(picture(root), before, "the candidate is untouched");
    assert_eq!(user_state(root), user, "the user's repository is untouched");

    let path = copy.root().to_path_buf();
    copy.remove().unwrap();
    assert!(!path.exists());
}

#[test]
fn a_copy_of_a_workspace_below_the_top_works_in_the_same_place() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let candidate = checkpoints(root, "run-2", state.path());
    let copy =
        DisposableCopy::create(&candidate, &root.join("src"), &state.path().join("copy")).unwrap();
    assert!(copy.workdir().ends_with("copy/src"));
    assert!(copy.workdir().join("lib.rs").is_file());
}

#[test]
fn a_dropped_copy_is_removed_even_when_made_read_only() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    let candidate = checkpoints(root, "run-3", state.path());
    let destination = state.path().join("copy");
    {
        let copy = DisposableCopy::create(&candidate, root, &destination).unwrap();
        support::set_mode(&copy.workdir().join("src"), 0o500);
    }
    assert!(!destination.exists());
}

#[test]
fn a_run_worktree_starts_at_head_and_leaves_the_users_checkout_alone() {
    let repo = repository();
    let root = repo.path();
    write(root, "README.md", b"the user's uncommitted edit\n");
    let user = user_state(root);
    let before = picture(root);
    let state = tempfile::tempdir().unwrap();
    let repository = Repository::open(root, &Git::from_environment()).unwrap();
    let base = worktree_base(&repository).unwrap();
    let path = state.path().join("runs/r/worktree");
    add_worktree(&repository, &path, &base).unwrap();

    assert_eq!(
        std::fs::read(path.join("README.md")).unwrap(),
        b"# project\n",
        "a fresh worktree of HEAD, without the user's edits"
    );
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), base.as_str());
    write(&path, "README.md", b"the run's work\n");
    let in_worktree = Repository::open(&path, &Git::from_environment()).unwrap();
    let run = trellis_workspace::RunCheckpoints::new(
        in_worktree,
        "r",
        state.path().join("r.index"),
        None,
    )
    .unwrap();
    let checkpoint = run.take(1, "before work").unwrap();
    assert_eq!(checkpoint.files_changed, 1);
    assert_eq!(picture(root), before);
    assert_eq!(user_state(root), user);

    remove_worktree(&repository, &path).unwrap();
    assert!(!path.exists());
    assert!(!git(root, &["worktree", "list"]).contains("runs/r/worktree"));
    // The checkpoint made in the worktree outlives it.
    assert_eq!(
        git(
            root,
            &["show", &format!("{}:README.md", checkpoint.reference)]
        ),
        "the run's work"
    );
    assert_eq!(user_state(root), user);
    remove_worktree(&repository, &path).unwrap();
}

#[test]
fn a_worktree_needs_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "--quiet"]);
    let repository = Repository::open(dir.path(), &Git::from_environment()).unwrap();
    assert_eq!(
        worktree_base(&repository).unwrap_err().code(),
        "workspace.no_commit"
    );
}

#[test]
fn pictures_see_modes() {
    // Guards the comparisons above: a mode change alone is a difference.
    let repo = repository();
    let root = repo.path();
    let before = picture(root);
    support::set_mode(&root.join("script.sh"), 0o644);
    assert_ne!(picture(root), before);
    assert!(matches!(
        picture(root).get("script.sh"),
        Some(Entry::File {
            executable: false,
            ..
        })
    ));
}

#[test]
fn ignored_entries_are_placed_so_that_emptying_or_removing_them_in_a_copy_reaches_nothing() {
    let repo = repository();
    let root = repo.path();
    let state = tempfile::tempdir().unwrap();
    write(root, ".gitignore", b"build/\n*.log\nnode_modules/\n");
    write(root, "build/out/app", b"compiled");
    std::os::unix::fs::symlink("out/app", root.join("build/current")).unwrap();
    write(root, "debug.log", b"log line\n");
    write(root, "big.log", &vec![b'x'; (1 << 20) + 1]);
    for i in 0..2_001 {
        write(root, &format!("node_modules/pkg{}/f{i}.js", i % 10), b"x");
    }
    let candidate = checkpoints(root, "run-2", state.path());
    let before = picture(root);
    let copy = DisposableCopy::create(&candidate, root, &state.path().join("copies/8")).unwrap();
    let placed = picture(copy.workdir());
    assert_eq!(placed.get("build/out/app"), before.get("build/out/app"));
    assert_eq!(
        placed.get("build/current"),
        Some(&Entry::Link("out/app".into()))
    );
    assert_eq!(placed.get("debug.log"), before.get("debug.log"));
    assert_eq!(
        placed.get("big.log"),
        Some(&Entry::Link(root.join("big.log")))
    );
    // A large directory gets directories of its own, its files linked to the candidate's.
    assert_eq!(placed.get("node_modules"), Some(&Entry::Dir));
    assert_eq!(placed.get("node_modules/pkg3"), Some(&Entry::Dir));
    assert_eq!(
        placed.get("node_modules/pkg3/f13.js"),
        Some(&Entry::Link(root.join("node_modules/pkg3/f13.js")))
    );
    assert_eq!(
        placed
            .keys()
            .filter(|k| k.starts_with("node_modules/"))
            .count(),
        2_001 + 10
    );
    assert_eq!(
        git(copy.workdir(), &["status", "--porcelain"]),
        "M .gitignore",
        "only the candidate's change is reported, nothing placed"
    );

    // A verifier that empties the ignored directories it was given, truncates a log and
    // reinstalls the dependencies.
    let emptied = Command::new("sh")
        .args([
            "-c",
            "rm -rf build/* build/.[!.]* && : > debug.log && rm -rf node_modules/ \
             && mkdir -p node_modules/pkg1 && echo new > node_modules/pkg1/f1.js",
        ])
        .current_dir(copy.workdir())
        .status()
        .unwrap();
    assert!(emptied.success());
    assert_eq!(
        picture(root),
        before,
        "the candidate's ignored files are untouched"
    );
    copy.remove().unwrap();
}
