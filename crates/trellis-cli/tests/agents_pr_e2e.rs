//! The real Claude Code and Codex CLIs deliver a software change as a pull request through
//! `trellis run --pr`, against the scripted model server and the loopback fake GitHub: the pull
//! request is opened once, a review comment on it sends the change back to the worker (whose
//! next prompt carries it), the second round is clean and the run succeeds with the pull
//! request's URL in its output; and `issue-review --task-from URL` posts the agent's report
//! as the one marked comment.
//!
//! Skipped (with a note) when the pinned CLIs are not installed, except under `CI`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_testkit::cli::{AgentClis, DEFAULT_CLAUDE_MODEL, DEFAULT_CODEX_MODEL};
use trellis_testkit::git::git;
use trellis_testkit::github::{Action, FakeGitHub};
use trellis_testkit::{Api, Block, Conversation, ModelServer, Script, Turn, Usage};

const KEY: &str = "canary-gateway-key-pr-e2e-7731";
const TOKEN: &str = "ghp_canary_agents_pr_e2e_4410";
const REPO: &str = "acme/widgets";
const REMOTE_URL: &str = "https://github.com/acme/widgets.git";
const REVIEW: &str = "Please add a line thanking the reviewers.";

#[derive(Clone, Copy)]
enum Cli {
    Claude,
    Codex,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
        }
    }

    fn api(self) -> Api {
        match self {
            Cli::Claude => Api::Anthropic,
            Cli::Codex => Api::Openai,
        }
    }

    fn model(self) -> &'static str {
        match self {
            Cli::Claude => DEFAULT_CLAUDE_MODEL,
            Cli::Codex => DEFAULT_CODEX_MODEL,
        }
    }

    fn reply(self, body: Value) -> Block {
        match self {
            Cli::Claude => Block::structured(json!({"response": body})),
            Cli::Codex => Block::structured(json!({"response": body, "refusal": null})),
        }
    }

    fn accept(self, message: &str) -> Block {
        self.reply(json!({"output": null, "signals": {"verdict": "accepted"},
                          "diagnostic": {"message": message}}))
    }
}

fn session(cli: Cli, node: &str, shell: Option<&str>, reply: Block) -> Conversation {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut conversation = Conversation::new(format!("{node}-{id}"))
        .on_api(cli.api())
        .matching(format!("graph node `{node}`"));
    if let Some(command) = shell {
        conversation = conversation
            .turn(Turn::reply(vec![Block::shell(command)]).with_usage(Usage::new(120, 30)));
    }
    conversation.turn(Turn::reply(vec![reply]).with_usage(Usage::new(200, 40)))
}

/// A repository whose `origin` names github.com and pushes to a local bare repository.
fn workspace(dir: &Path) -> (PathBuf, PathBuf) {
    let origin = dir.join("origin.git");
    let work = dir.join("repo");
    std::fs::create_dir_all(&work).unwrap();
    git(dir, &["init", "-q", "--bare", origin.to_str().unwrap()]);
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("README.md"), "demo\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "init"]);
    git(&work, &["remote", "add", "origin", REMOTE_URL]);
    let rewrite = format!("url.{}.insteadOf", origin.display());
    git(&work, &["config", &rewrite, REMOTE_URL]);
    git(&work, &["push", "-q", "origin", "main"]);
    (origin, work)
}

async fn pull_request_with_review_feedback(cli: Cli) {
    let Some(clis) = AgentClis::for_tests(&format!("{}_pull_request_e2e", cli.name())) else {
        return;
    };
    // The worker keeps one session across its rounds (the template's `node_instance` scope,
    // as in the reference): the repair for the review feedback continues its conversation.
    let worker = session(
        cli,
        "worker",
        Some("printf 'Hello, world!\\n' > greeting.txt"),
        cli.reply(Value::Null),
    )
    .turn(
        Turn::reply(vec![Block::shell(
            "printf 'Hello, world!\\nThanks, reviewers!\\n' > greeting.txt",
        )])
        .with_usage(Usage::new(120, 30)),
    )
    .turn(Turn::reply(vec![cli.reply(Value::Null)]).with_usage(Usage::new(200, 40)));
    let script = Script::new(vec![
        worker,
        session(cli, "acceptance", None, cli.accept("greeting.txt greets")),
        session(cli, "code", None, cli.accept("small and correct")),
        session(cli, "acceptance", None, cli.accept("greets and thanks")),
        session(cli, "code", None, cli.accept("still small and correct")),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let github = FakeGitHub::start(TOKEN).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (origin, work) = workspace(dir.path());
    github
        .apply(Action::AddRepository {
            repository: REPO.into(),
            default_branch: "main".into(),
            private: false,
            git_dir: Some(origin.clone()),
        })
        .unwrap();
    github.require_checks(REPO, &["ci"]);
    let home = dir.path().join("trellis-home");
    let lane = dir.path().join("lane.json");
    std::fs::write(
        &lane,
        json!({"harness": cli.name(), "provider": "gateway", "model": cli.model(),
               "connections": {"gateway": ["GATEWAY_BASE_URL", "GATEWAY_API_KEY"]}})
        .to_string(),
    )
    .unwrap();
    let base_url = match cli {
        Cli::Claude => server.url(),
        Cli::Codex => server.openai_base_url(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args([
            "run",
            "--template",
            "software-change",
            "--pr",
            "--task",
            "Write a friendly greeting to greeting.txt",
            "--uniform-runtime-config",
            lane.to_str().unwrap(),
            "--json",
        ])
        .current_dir(&work)
        .env_clear()
        .env("PATH", clis.search_path())
        .env("HOME", home.join("user-home"))
        .env("TRELLIS_HOME", &home)
        .env("GATEWAY_BASE_URL", base_url)
        .env("GATEWAY_API_KEY", KEY)
        .env("GH_TOKEN", TOKEN)
        .env("GITHUB_API_URL", github.api_url())
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("TRELLIS_DELIVERY_POLL_MS", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reviewer comments on the first head; CI passes on the second.
    let out: Output = tokio::task::block_in_place(|| {
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut first_head: Option<String> = None;
        let mut greened = false;
        loop {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            assert!(Instant::now() < deadline, "the run did not finish");
            if let Some(&number) = github.pull_numbers(REPO).first()
                && let Some(head) = github.pull_head(REPO, number)
            {
                match &first_head {
                    None => {
                        github.add_review_comment(REPO, number, "greeting.txt", 1, REVIEW);
                        first_head = Some(head);
                    }
                    Some(first) if *first != head && !greened => {
                        github
                            .apply(Action::SetCheckRun {
                                repository: REPO.into(),
                                sha: Some(head),
                                pull: None,
                                name: "ci".into(),
                                status: "completed".into(),
                                conclusion: Some("success".into()),
                                summary: String::new(),
                            })
                            .unwrap();
                        greened = true;
                    }
                    Some(_) => {}
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let result = &last["status"]["terminalResult"];
    assert_eq!(result["status"], "succeeded", "{result}");
    assert!(
        result["output"]["delivery"]
            .as_str()
            .unwrap_or_default()
            .contains("https://github.com/acme/widgets/pull/1"),
        "{result}"
    );
    assert_eq!(github.pull_numbers(REPO), vec![1]);
    let opened = github
        .calls()
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/pulls"))
        .count();
    assert_eq!(opened, 1);
    // The repair round's worker was told what the pull request's reviewer asked for.
    let workers: Vec<_> = server
        .model_requests()
        .into_iter()
        .filter(|r| r.user_text.contains("graph node `worker`"))
        .collect();
    // Two rounds of two requests each (the shell call, then the reply).
    assert_eq!(workers.len(), 4, "two worker rounds");
    assert!(!workers[0].user_text.contains(REVIEW));
    assert!(workers[2].user_text.contains(REVIEW));
    let branch = github.pull_branch(REPO, 1).unwrap();
    assert_eq!(
        git(&origin, &["show", &format!("{branch}:greeting.txt")]),
        "Hello, world!\nThanks, reviewers!"
    );
    assert!(server.script_finished(), "every scripted turn was used");
    let ledger = std::fs::read(home.join("ledger.sqlite3")).unwrap();
    for secret in [KEY, TOKEN] {
        assert!(!ledger.windows(secret.len()).any(|w| w == secret.as_bytes()));
        assert!(!stdout.contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_delivers_a_pull_request_and_repairs_review_feedback() {
    pull_request_with_review_feedback(Cli::Claude).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_delivers_a_pull_request_and_repairs_review_feedback() {
    pull_request_with_review_feedback(Cli::Codex).await;
}

/// `--template issue-review --task-from URL`: the agent's report becomes the one marked comment.
async fn issue_review_posts_the_agents_report(cli: Cli) {
    let Some(clis) = AgentClis::for_tests(&format!("{}_issue_review_e2e", cli.name())) else {
        return;
    };
    const REPORT: &str = "The greeting lacks punctuation: greeting.txt line 1.";
    let script = Script::new(vec![session(
        cli,
        "reviewer",
        None,
        cli.reply(json!({"body": REPORT})),
    )]);
    let server = ModelServer::start(script).await.unwrap();
    let github = FakeGitHub::start(TOKEN).await.unwrap();
    github.add_repository(REPO, "main", "1111111111111111111111111111111111111111");
    let issue = github.add_issue(REPO, "Greeting lacks punctuation", "It says hi.", &[]);
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("repo");
    std::fs::create_dir_all(&work).unwrap();
    let home = dir.path().join("trellis-home");
    let lane = dir.path().join("lane.json");
    std::fs::write(
        &lane,
        json!({"harness": cli.name(), "provider": "gateway", "model": cli.model(),
               "connections": {"gateway": ["GATEWAY_BASE_URL", "GATEWAY_API_KEY"]}})
        .to_string(),
    )
    .unwrap();
    let base_url = match cli {
        Cli::Claude => server.url(),
        Cli::Codex => server.openai_base_url(),
    };
    let url = format!("https://github.com/{REPO}/issues/{issue}");
    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args([
                "run",
                "--template",
                "issue-review",
                "--task-from",
                &url,
                "--uniform-runtime-config",
                lane.to_str().unwrap(),
                "--json",
            ])
            .current_dir(&work)
            .env_clear()
            .env("PATH", clis.search_path())
            .env("HOME", home.join("user-home"))
            .env("TRELLIS_HOME", &home)
            .env("GATEWAY_BASE_URL", base_url)
            .env("GATEWAY_API_KEY", KEY)
            .env("GH_TOKEN", TOKEN)
            .env("GITHUB_API_URL", github.api_url())
            .env("GITHUB_SERVER_URL", "https://github.com")
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let comments = github.comment_bodies(REPO, issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].starts_with("<!-- trellis-report:run-"));
    assert!(comments[0].ends_with(REPORT), "{}", comments[0]);
    // The agent was shown the issue it reviews.
    let asked = server.model_requests();
    assert!(
        asked
            .iter()
            .any(|r| r.user_text.contains("Greeting lacks punctuation"))
    );
    assert!(server.script_finished());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_reviews_an_issue_from_its_url() {
    issue_review_posts_the_agents_report(Cli::Claude).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_reviews_an_issue_from_its_url() {
    issue_review_posts_the_agents_report(Cli::Codex).await;
}
