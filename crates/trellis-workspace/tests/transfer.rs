//! Workspaces moved between hosts as git objects, against real repositories: a start point
//! bundled and built into a private workspace elsewhere (files, modes and links as they were,
//! `HEAD` at the source revision), the result bundled back and applied as the step's own
//! changes (another writer's change in the meantime survives), a truncated bundle refused
//! before anything is written, and the user's git state never moved.

mod support;

use support::{Entry, checkpoints, git, picture, repository, set_mode, user_state, write};
use trellis_workspace::{
    Git, RemoteEnd, Repository, apply_changes, bundle_head, commit_at, fetch_bundle,
    remote_reference, start_workspace, write_bundle,
};

const RUN: &str = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

#[test]
fn a_step_run_elsewhere_comes_back_as_its_own_changes() {
    let origin = repository();
    let root = origin.path();
    let state = tempfile::tempdir().unwrap();
    // What the run changed so far travels with the start point.
    write(root, "notes/draft.txt", b"so far\n");
    let user_before = user_state(root);
    let start_ref = remote_reference(RUN, 3, RemoteEnd::Start).unwrap();
    let result_ref = remote_reference(RUN, 3, RemoteEnd::Result).unwrap();
    let start = checkpoints(root, RUN, state.path())
        .record_as(&start_ref, None, "start")
        .unwrap();
    let repo = Repository::open(root, &Git::from_environment()).unwrap();
    let start_bundle = state.path().join("start.bundle");
    write_bundle(&repo, &start_ref, None, &start_bundle).unwrap();

    // Elsewhere: the private workspace holds the start's files; HEAD is the source revision.
    let elsewhere = tempfile::tempdir().unwrap();
    let private_dir = elsewhere.path().join("work");
    let (private, commit) = start_workspace(
        &Git::from_environment(),
        &private_dir,
        &start_bundle,
        &start_ref,
    )
    .unwrap();
    assert_eq!(commit, start.commit);
    assert_eq!(picture(&private_dir), picture(root));
    assert_eq!(
        git(&private_dir, &["rev-parse", "HEAD"]),
        git(root, &["rev-parse", "HEAD"])
    );
    assert_eq!(git(&private_dir, &["status", "--porcelain"]), "?? notes/");

    // The step edits, deletes, adds and changes a mode there.
    write(
        &private_dir,
        "src/lib.rs",
        b"pub fn answer() -> u32 { 44 }\n",
    );
    std::fs::remove_file(private_dir.join("src/old.rs")).unwrap();
    write(&private_dir, "src/new.rs", b"// new\n");
    set_mode(&private_dir.join("script.sh"), 0o644);
    let result = checkpoints(&private_dir, RUN, elsewhere.path())
        .record_as(&result_ref, Some(&commit), "result")
        .unwrap();
    let result_bundle = elsewhere.path().join("result.bundle");
    write_bundle(&private, &result_ref, Some(&commit), &result_bundle).unwrap();

    // Meanwhile another writer changed a file the step did not touch.
    write(root, "README.md", b"# project, edited beside the step\n");
    let received = fetch_bundle(&repo, &result_bundle, &result_ref, &result_ref).unwrap();
    assert_eq!(received, result.commit);
    assert_eq!(
        bundle_head(&repo, &result_bundle, &result_ref).unwrap(),
        Some(result.commit.clone())
    );
    let changed = apply_changes(
        &repo,
        &start.commit,
        &received,
        &state.path().join("apply.index"),
    )
    .unwrap();
    assert_eq!(changed, 4);
    let mut expected = picture(&private_dir);
    expected.insert(
        "README.md".into(),
        Entry::File {
            executable: false,
            bytes: b"# project, edited beside the step\n".to_vec(),
        },
    );
    assert_eq!(picture(root), expected);
    assert_eq!(user_state(root), user_before);
}

#[test]
fn a_truncated_result_bundle_is_refused_and_stores_nothing() {
    let origin = repository();
    let root = origin.path();
    let state = tempfile::tempdir().unwrap();
    let start_ref = remote_reference(RUN, 1, RemoteEnd::Start).unwrap();
    let result_ref = remote_reference(RUN, 1, RemoteEnd::Result).unwrap();
    checkpoints(root, RUN, state.path())
        .record_as(&start_ref, None, "start")
        .unwrap();
    let repo = Repository::open(root, &Git::from_environment()).unwrap();
    let start_bundle = state.path().join("start.bundle");
    write_bundle(&repo, &start_ref, None, &start_bundle).unwrap();
    // A result made elsewhere: this repository holds none of its new objects.
    let elsewhere = tempfile::tempdir().unwrap();
    let private_dir = elsewhere.path().join("work");
    let (private, commit) = start_workspace(
        &Git::from_environment(),
        &private_dir,
        &start_bundle,
        &start_ref,
    )
    .unwrap();
    let noise: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
    write(&private_dir, "big.bin", &noise);
    let result = checkpoints(&private_dir, RUN, elsewhere.path())
        .record_as(&result_ref, Some(&commit), "result")
        .unwrap();
    let bundle = state.path().join("result.bundle");
    write_bundle(&private, &result_ref, Some(&commit), &bundle).unwrap();
    let whole = std::fs::read(&bundle).unwrap();
    let cut = state.path().join("cut.bundle");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();

    assert!(fetch_bundle(&repo, &cut, &result_ref, &result_ref).is_err());
    assert_eq!(commit_at(&repo, &result_ref).unwrap(), None);
    // The whole bundle, twice: the same commit, the reference unchanged.
    for _ in 0..2 {
        let received = fetch_bundle(&repo, &bundle, &result_ref, &result_ref).unwrap();
        assert_eq!(received, result.commit);
    }
}

#[test]
fn run_names_that_could_leave_the_namespace_name_no_transfer() {
    assert_eq!(
        remote_reference(RUN, 7, RemoteEnd::Result).unwrap(),
        format!("refs/trellis/remote/{RUN}/7/result")
    );
    assert!(remote_reference("../x", 7, RemoteEnd::Start).is_err());
}
