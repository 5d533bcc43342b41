//! `trellis run --template issue-review|pr-review --task-from URL` against the loopback fake
//! GitHub with the offline review worker standing in for the agents: each posts exactly one
//! marked report comment, also when the controller is killed right after GitHub took the
//! comment (before the run heard back) and the run is resumed, or when GitHub stored the comment
//! but answered 502; server errors that outlast the delivery's retries fail the run, and a
//! resume once GitHub is back posts the one report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use trellis_testkit::github::{Action, FakeGitHub};

const TOKEN: &str = "ghp_canary_review_comments_51c2";
const REPO: &str = "acme/widgets";
const WAIT: Duration = Duration::from_secs(120);

struct Setup {
    _dir: tempfile::TempDir,
    work: PathBuf,
    home: PathBuf,
    github: FakeGitHub,
    issue: u64,
    pull: u64,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("offline")).unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline");
        for file in ["review_worker.py", "review_plan.json"] {
            std::fs::copy(examples.join(file), work.join("offline").join(file)).unwrap();
        }
        let github = FakeGitHub::start_blocking(TOKEN).unwrap();
        let base = "1111111111111111111111111111111111111111";
        github.add_repository(REPO, "main", base);
        github.set_branch(REPO, "feature", "2222222222222222222222222222222222222222");
        let issue = github.add_issue(REPO, "Greeting lacks punctuation", "It says hi.", &["bug"]);
        let pull = github.add_pull(
            REPO,
            "Punctuate the greeting",
            "Fixes #1",
            "feature",
            "main",
        );
        Setup {
            home: dir.path().join("home"),
            _dir: dir,
            work,
            github,
            issue,
            pull,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command
            .args(args)
            .current_dir(&self.work)
            .env("TRELLIS_HOME", &self.home)
            .env("GH_TOKEN", TOKEN)
            .env("GITHUB_API_URL", self.github.api_url())
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("TRELLIS_DELIVERY_RETRY_MS", "50");
        command
    }

    fn review(&self, template: &str, url: &str, detach: bool) -> Output {
        let mut args = vec![
            "run",
            "--template",
            template,
            "--task-from",
            url,
            "--uniform-runtime-config",
            "offline/review_plan.json",
            "--json",
        ];
        if detach {
            args.push("--detach");
        }
        self.command(&args).output().unwrap()
    }

    fn comments(&self, number: u64) -> Vec<String> {
        self.github.comment_bodies(REPO, number)
    }
}

fn succeeded(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(TOKEN));
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let result = last["status"]["terminalResult"].clone();
    assert_eq!(result["status"], "succeeded", "{result}");
    result
}

fn one_marked_comment(bodies: &[String], says: &str) {
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let mut lines = bodies[0].lines();
    let marker = lines.next().unwrap();
    assert!(marker.starts_with("<!-- trellis-report:run-"), "{marker}");
    assert!(bodies[0].contains(says), "{}", bodies[0]);
}

#[test]
fn issue_review_posts_one_report_on_the_issue() {
    let setup = Setup::new();
    let url = format!("https://github.com/{REPO}/issues/{}", setup.issue);
    let result = succeeded(&setup.review("issue-review", &url, false));
    one_marked_comment(&setup.comments(setup.issue), "Greeting lacks punctuation");
    assert_eq!(result["output"]["receipt"]["discussionKind"], "issue");
    assert!(setup.comments(setup.pull).is_empty());
}

#[test]
fn pr_review_posts_one_report_on_the_pull_request() {
    let setup = Setup::new();
    let url = format!("https://github.com/{REPO}/pull/{}", setup.pull);
    let result = succeeded(&setup.review("pr-review", &url, false));
    one_marked_comment(&setup.comments(setup.pull), "Punctuate the greeting");
    let receipt = &result["output"]["receipt"];
    assert_eq!(receipt["discussionKind"], "pull_request");
    assert_eq!(
        receipt["sourceRevision"],
        "2222222222222222222222222222222222222222"
    );
}

#[test]
fn a_controller_killed_after_posting_resumes_without_a_second_comment() {
    let setup = Setup::new();
    setup
        .github
        .apply(Action::HoldAnswers {
            method: "POST".into(),
            path_suffix: "/comments".into(),
            millis: 30_000,
        })
        .unwrap();
    let url = format!("https://github.com/{REPO}/issues/{}", setup.issue);
    let out = setup.review("issue-review", &url, true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let receipt: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let run = receipt["runId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    while setup.comments(setup.issue).is_empty() {
        assert!(started.elapsed() < WAIT, "the report was never posted");
        std::thread::sleep(Duration::from_millis(25));
    }
    // GitHub has the comment; the controller is still waiting for the answer.
    let status = status_of(&setup, &run);
    let pid = status["controller"]["pid"]
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
    setup
        .github
        .apply(Action::HoldAnswers {
            method: "POST".into(),
            path_suffix: "/comments".into(),
            millis: 0,
        })
        .unwrap();
    let resumed = setup.command(&["resume", &run, "--json"]).output().unwrap();
    succeeded(&resumed);
    one_marked_comment(&setup.comments(setup.issue), "Greeting lacks punctuation");
    let posts = setup
        .github
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/comments"))
        .count();
    assert_eq!(posts, 1, "the resumed run posted again");
}

#[test]
fn a_report_github_stored_before_answering_502_is_posted_once() {
    let setup = Setup::new();
    setup.github.apply_then_fail("POST", "/comments", 502, 1);
    let url = format!("https://github.com/{REPO}/issues/{}", setup.issue);
    let result = succeeded(&setup.review("issue-review", &url, false));
    one_marked_comment(&setup.comments(setup.issue), "Greeting lacks punctuation");
    let posts = setup.github.calls_to("POST", "/comments");
    assert_eq!(posts.len(), 1, "the retry posted again");
    assert_eq!(posts[0].status, 502);
    assert_eq!(result["output"]["receipt"]["discussionKind"], "issue");
}

#[test]
fn lasting_server_errors_fail_the_review_and_a_resume_posts_one_report() {
    let setup = Setup::new();
    setup.github.refuse_next("POST", "/comments", 502, 1_000);
    let url = format!("https://github.com/{REPO}/issues/{}", setup.issue);
    let out = setup.review("issue-review", &url, false);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let run: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let run = run["runId"].as_str().unwrap().to_owned();
    let status = status_of(&setup, &run);
    let cause = status["cause"]["nodes"][0].to_string();
    assert!(
        cause.contains("GitHub failed to post the report comment (502)")
            && cause.contains("gave up after 5 tries"),
        "{status}"
    );
    assert!(setup.comments(setup.issue).is_empty());
    assert_eq!(setup.github.calls_to("POST", "/comments").len(), 5);

    setup.github.clear_faults();
    let resumed = setup.command(&["resume", &run, "--json"]).output().unwrap();
    succeeded(&resumed);
    one_marked_comment(&setup.comments(setup.issue), "Greeting lacks punctuation");
}

fn status_of(setup: &Setup, run: &str) -> Value {
    let out = setup.command(&["status", run, "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}
