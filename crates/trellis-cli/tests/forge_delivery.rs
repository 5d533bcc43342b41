//! Pull-request and merge delivery through `trellis run --pr|--ship` against the loopback fake
//! GitHub, a local bare repository as the remote (reached through `url.…insteadOf`, so the
//! remote still names `github.com/acme/widgets`) and the offline example workers: review
//! feedback sends the change back, a merge waits for green checks, a controller killed while
//! delivery waits is resumed without a second pull request, and every preparation failure is a
//! one-line error before any worker starts.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use trellis_testkit::git::git;
use trellis_testkit::github::Action;

mod forge_support;

use forge_support::*;

#[test]
fn a_review_comment_on_the_pull_request_sends_the_change_back() {
    let setup = Setup::new();
    setup.github.require_checks(REPO, &["ci"]);
    let child = setup.start("--pr");
    let mut commented_on: Option<String> = None;
    let mut greened: Vec<String> = Vec::new();
    let out = drive(child, || {
        let Some((number, head)) = setup.pull() else {
            return;
        };
        match &commented_on {
            None => {
                setup.github.add_review_comment(
                    REPO,
                    number,
                    "greeting.txt",
                    1,
                    "Please thank the reviewers too.",
                );
                commented_on = Some(head);
            }
            Some(first) if *first != head && !greened.contains(&head) => {
                setup.set_check(&head, "success");
                greened.push(head);
            }
            Some(_) => {}
        }
    });
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    let output = &result["output"];
    assert_eq!(output["pullRequestId"], "1");
    assert!(
        output["delivery"]
            .as_str()
            .unwrap()
            .contains("https://github.com/acme/widgets/pull/1"),
        "{output}"
    );
    assert_eq!(setup.pulls_opened(), 1);
    // The second round's head holds the repair the review asked for, and it is what the pull
    // request's branch points at.
    let branch = setup.github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&setup.origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nThanks for the review!"
    );
    assert_eq!(
        Value::String(setup.pull().unwrap().1),
        output["headRevision"]
    );
    assert_eq!(greened.len(), 1, "the first head was never judged green");
}

#[test]
fn ship_merges_only_after_the_checks_turn_green() {
    let setup = Setup::new();
    setup.github.require_checks(REPO, &["ci"]);
    let child = setup.start("--ship");
    let mut seen_waiting = false;
    let mut greened = false;
    let out = drive(child, || {
        let Some((number, head)) = setup.pull() else {
            return;
        };
        if !seen_waiting {
            // Delivery keeps looking while the check is queued; nothing is merged meanwhile.
            let looks = setup
                .github
                .calls()
                .iter()
                .filter(|c| c.method == "GET" && c.path.ends_with("/check-runs"))
                .count();
            if looks >= 3 {
                assert!(!setup.github.is_merged(REPO, number));
                seen_waiting = true;
            }
        } else if !greened {
            setup.set_check(&head, "success");
            greened = true;
        }
    });
    no_secret(&out);
    let result = terminal(&out);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert!(greened);
    assert!(setup.github.is_merged(REPO, 1));
    let merge_revision = result["output"]["mergeRevision"].as_str().unwrap();
    assert!(!merge_revision.is_empty(), "{result}");
    assert_eq!(setup.pulls_opened(), 1);
}

#[test]
fn a_controller_killed_while_delivery_waits_resumes_onto_the_same_pull_request() {
    let setup = Setup::new();
    setup.github.require_checks(REPO, &["ci"]);
    let out = setup.run(&[
        "run",
        "--template",
        "software-change",
        "--pr",
        "--task",
        TASK,
        "--runtime-config",
        "offline/plan.json",
        "--json",
        "--detach",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let receipt: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let run = receipt["runId"].as_str().unwrap().to_owned();
    // Wait until delivery opened the pull request and is polling its queued check.
    let started = Instant::now();
    while setup.pull().is_none() || check_looks(&setup) < 2 {
        assert!(started.elapsed() < WAIT, "delivery never started waiting");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = status_of(&setup, &run);
    let pid = status["controller"]["pid"].as_i64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The next observation finalizes the dead run.
    let started = Instant::now();
    while status_of(&setup, &run)["status"]["phase"] != "finished" {
        assert!(started.elapsed() < WAIT, "the killed run never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, head) = setup.pull().unwrap();
    setup.set_check(&head, "success");
    let resumed = setup.run(&["resume", &run, "--json"]);
    no_secret(&resumed);
    let result = terminal(&resumed);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(setup.pulls_opened(), 1, "a second pull request was opened");
    assert_eq!(setup.github.pull_numbers(REPO), vec![1]);
}

#[test]
fn a_controller_killed_after_github_merged_resumes_without_merging_again() {
    let setup = Setup::new();
    setup
        .github
        .apply(Action::HoldAnswers {
            method: "PUT".into(),
            path_suffix: "/merge".into(),
            millis: 60_000,
        })
        .unwrap();
    let out = setup.run(&[
        "run",
        "--template",
        "software-change",
        "--ship",
        "--task",
        TASK,
        "--runtime-config",
        "offline/plan.json",
        "--json",
        "--detach",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let receipt: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let run = receipt["runId"].as_str().unwrap().to_owned();
    // GitHub merged; the controller has not heard back yet.
    let started = Instant::now();
    while !setup.github.is_merged(REPO, 1) {
        assert!(
            started.elapsed() < WAIT,
            "the pull request was never merged"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    let pid = status_of(&setup, &run)["controller"]["pid"]
        .as_i64()
        .expect("a live controller");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let started = Instant::now();
    while status_of(&setup, &run)["status"]["phase"] != "finished" {
        assert!(started.elapsed() < WAIT, "the killed run never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    let resumed = setup.run(&["resume", &run, "--json"]);
    no_secret(&resumed);
    let result = terminal(&resumed);
    let calls: Vec<String> = setup
        .github
        .calls()
        .iter()
        .map(|c| format!("{} {} {:?} {}", c.method, c.path, c.query, c.status))
        .collect();
    assert_eq!(result["status"], "succeeded", "{result}\n{calls:#?}");
    assert!(
        !result["output"]["mergeRevision"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert_eq!(setup.pulls_opened(), 1, "a second pull request was opened");
    let merges = setup
        .github
        .calls()
        .iter()
        .filter(|c| c.method == "PUT" && c.path.ends_with("/merge"))
        .count();
    assert_eq!(merges, 1, "the resumed run merged again");
}

/// Each preparation failure: exit 2, one line on stderr, no run, no worker, no API write.
fn refused(setup: &Setup, command: &mut Command, expected: &str) {
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    assert!(!stderr.contains(TOKEN));
    assert!(!setup.work.join("greeting.txt").exists(), "a worker ran");
    assert!(
        setup.github.calls().iter().all(|c| c.method == "GET"),
        "something was written"
    );
}

fn pr_run(setup: &Setup) -> Command {
    setup.command(&[
        "run",
        "--template",
        "software-change",
        "--pr",
        "--task",
        TASK,
        "--runtime-config",
        "offline/plan.json",
        "--json",
    ])
}

#[test]
fn preparation_refuses_before_any_worker_starts() {
    let setup = Setup::new();
    refused(&setup, pr_run(&setup).env_remove("GH_TOKEN"), "$GH_TOKEN");
    refused(
        &setup,
        pr_run(&setup).env("GH_TOKEN", "ghp_wrong"),
        "token rejected",
    );

    git(
        &setup.work,
        &[
            "remote",
            "set-url",
            "origin",
            "https://github.com/acme/nothing.git",
        ],
    );
    git(
        &setup.work,
        &[
            "config",
            "--add",
            &format!("url.{}.insteadOf", setup.origin.display()),
            "https://github.com/acme/nothing.git",
        ],
    );
    refused(&setup, &mut pr_run(&setup), "acme/nothing not found");
    git(&setup.work, &["remote", "set-url", "origin", REMOTE_URL]);

    std::fs::write(setup.work.join("notes.txt"), "draft\n").unwrap();
    refused(&setup, &mut pr_run(&setup), "uncommitted change");
    std::fs::remove_file(setup.work.join("notes.txt")).unwrap();

    let head = git(&setup.work, &["rev-parse", "HEAD"]);
    git(&setup.work, &["checkout", "-q", "--detach", &head]);
    refused(&setup, &mut pr_run(&setup), "HEAD is detached");
    git(&setup.work, &["checkout", "-q", "main"]);

    git(&setup.work, &["checkout", "-q", "-b", "topic"]);
    refused(&setup, &mut pr_run(&setup), "has no branch topic");
}

#[test]
fn delivery_flags_are_checked_before_anything_runs() {
    let setup = Setup::new();
    let cases: [(&[&str], &str); 4] = [
        (
            &["--template", "single-worker", "--pr"],
            "cannot deliver by pull_request; it offers none",
        ),
        (
            &["--template", "software-change", "--no-pr-feedback"],
            "--no-pr-feedback goes with --pr or --ship",
        ),
        (
            &["--template", "software-change", "--delivery", "fax"],
            "\"fax\" is not a delivery",
        ),
        (
            &["--template", "software-change", "--pr", "--ship"],
            "cannot be used with",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec![
            "run",
            "--task",
            TASK,
            "--runtime-config",
            "offline/plan.json",
        ];
        args.extend_from_slice(flags);
        let out = setup.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{flags:?}");
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
        assert!(!setup.work.join("greeting.txt").exists(), "a worker ran");
    }
    assert!(setup.github.calls().is_empty());
}
