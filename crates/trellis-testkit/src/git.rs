//! `git` for test set-up: runs it in a directory with a fixed author and committer (so a
//! commit never depends on the machine's git config) and fails the test when it fails.

use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir` and answers its standard output, trimmed; panics with git's
/// standard error when it fails (test support: a failed set-up step is a failed test).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output();
    let output = match output {
        Ok(output) => output,
        Err(error) => panic!("git {args:?} cannot start: {error}"),
    };
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
