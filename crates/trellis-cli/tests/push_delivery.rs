//! `trellis run --template software-change --push` against a local bare repository, with the
//! offline example workers standing in for the agents: after a repair round the accepted change
//! is committed on the run branch `trellis/<run>` and pushed to `origin`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use trellis_testkit::git::git;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline")
}

fn trellis(dir: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .current_dir(dir)
        .env("TRELLIS_HOME", home)
        .output()
        .expect("trellis runs")
}

#[test]
fn an_accepted_change_is_pushed_on_the_run_branch() {
    let dir = tempfile::tempdir().unwrap();
    let origin = dir.path().join("origin.git");
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("offline")).unwrap();
    for file in ["worker.py", "review.py", "plan.json"] {
        std::fs::copy(examples().join(file), work.join("offline").join(file)).unwrap();
    }
    git(
        dir.path(),
        &["init", "-q", "--bare", origin.to_str().unwrap()],
    );
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join(".gitignore"), "offline/\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "init"]);
    git(
        &work,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&work, &["push", "-q", "origin", "main"]);
    let user_head = git(&work, &["rev-parse", "HEAD"]);
    let user_index = std::fs::read(work.join(".git/index")).unwrap();

    let home = dir.path().join("home");
    let out = trellis(
        &work,
        &home,
        &[
            "run",
            "--template",
            "software-change",
            "--push",
            "--task",
            "Write a friendly greeting to greeting.txt",
            "--runtime-config",
            "offline/plan.json",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let receipt: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let run = receipt["runId"].as_str().unwrap();
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let output = &last["status"]["terminalResult"]["output"];
    let branch = output["headBranch"].as_str().unwrap().to_owned();
    assert!(
        branch.starts_with("trellis/")
            && run
                .replace('-', "")
                .starts_with(&branch["trellis/".len()..]),
        "{branch} for {run}"
    );

    let pushed = git(&origin, &["rev-parse", &format!("refs/heads/{branch}")]);
    assert_eq!(Value::String(pushed), output["headRevision"]);
    assert_eq!(
        git(&origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!"
    );
    assert_eq!(
        git(&origin, &["log", "-1", "--format=%s", &branch]),
        "Write a friendly greeting to greeting.txt"
    );
    // main is untouched on the remote.
    assert_eq!(git(&origin, &["rev-list", "--count", "main"]), "1");
    // ...and so are the user's checkout, branch and index: the commit exists only on the run
    // branch (and under refs/trellis/).
    assert_eq!(
        std::fs::read(work.join(".git/index")).unwrap(),
        user_index,
        "the user's index changed"
    );
    assert_eq!(git(&work, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(git(&work, &["rev-parse", "HEAD"]), user_head);
    assert_eq!(git(&work, &["rev-parse", "main"]), user_head);
    assert_eq!(
        git(
            &work,
            &["for-each-ref", "--format=%(refname)", "refs/heads"]
        ),
        "refs/heads/main"
    );
    // The work tree still holds the accepted change, uncommitted, as the user left it to review.
    assert_eq!(
        std::fs::read_to_string(work.join("greeting.txt"))
            .unwrap()
            .trim(),
        "Hello, world!"
    );
}
