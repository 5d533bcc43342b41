//! The real Claude Code, Codex, Copilot (headless JSON-RPC) and pi CLIs run the built-in templates end to end through
//! `trellis run`, against the scripted model server on loopback (gateway lane): the agent
//! changes the workspace, software-change is accepted after one repair round, token usage is
//! recorded, and the gateway key never reaches the ledger.
//!
//! Skipped (with a note) when the pinned CLIs are not installed, except under `CI`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};
use trellis_testkit::cli::{AgentClis, DEFAULT_CLAUDE_MODEL, DEFAULT_CODEX_MODEL};
use trellis_testkit::{Api, Block, Conversation, ModelServer, Script, Turn, Usage};

const KEY: &str = "canary-gateway-key-e2e-5150";

#[derive(Clone, Copy, PartialEq)]
enum Cli {
    Claude,
    Codex,
    Copilot,
    Pi,
}

impl Cli {
    fn name(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Copilot => "copilot",
            Cli::Pi => "pi",
        }
    }
    /// Copilot's gateway and pi's default wire are the OpenAI Responses API.
    fn api(self) -> Api {
        match self {
            Cli::Claude => Api::Anthropic,
            Cli::Codex | Cli::Copilot | Cli::Pi => Api::Openai,
        }
    }
    fn model(self) -> &'static str {
        match self {
            Cli::Claude => DEFAULT_CLAUDE_MODEL,
            Cli::Codex | Cli::Copilot | Cli::Pi => DEFAULT_CODEX_MODEL,
        }
    }
    /// The structured reply in the CLI's schema dialect.
    fn reply(self, body: Value) -> Block {
        match self {
            Cli::Claude | Cli::Pi => Block::structured(json!({"response": body})),
            Cli::Codex | Cli::Copilot => {
                Block::structured(json!({"response": body, "refusal": null}))
            }
        }
    }
    /// The installed CLIs when this one is among them; `None` (after a note) to skip.
    fn installed(self, test: &str) -> Option<AgentClis> {
        let clis = AgentClis::for_tests(test)?;
        if clis.prefix.join("bin").join(self.name()).is_file() {
            return Some(clis);
        }
        let why = format!(
            "{} not installed; run scripts/install-agent-clis.sh",
            self.name()
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: agent CLIs are required in CI: {why}"
        );
        eprintln!("{test}: skipped: {why}");
        None
    }
}

fn verdict(cli: Cli, verdict: &str, message: &str) -> Block {
    cli.reply(json!({"output": null, "signals": {"verdict": verdict}, "diagnostic": {"message": message}}))
}

/// What an agent does to the workspace before it replies.
enum Edit<'a> {
    Nothing,
    /// Create a new file with the CLI's file-writing tool.
    Create(&'a str, &'a str),
}

/// One agent execution: optionally change the workspace, then reply.
fn session(cli: Cli, node: &str, edit: Edit, reply: Block) -> Conversation {
    let mut conversation = Conversation::new(format!("{node}-{}", rand_suffix()))
        .on_api(cli.api())
        .matching(format!("graph node `{node}`"));
    let action = match edit {
        Edit::Nothing => None,
        Edit::Create(path, content) => Some(Block::write_file(path, content)),
    };
    if let Some(action) = action {
        conversation = conversation.turn(Turn::reply(vec![action]).with_usage(Usage::new(120, 30)));
    }
    conversation.turn(Turn::reply(vec![reply]).with_usage(Usage::new(200, 40)))
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

struct Lab {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    workspace: std::path::PathBuf,
    path_env: std::ffi::OsString,
}

impl Lab {
    fn new(clis: &AgentClis) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("repo");
        std::fs::create_dir_all(&workspace).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&workspace)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(workspace.join("README.md"), "demo\n").unwrap();
        git(&["add", "."]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ]);
        Self {
            home: dir.path().join("trellis-home"),
            workspace,
            path_env: clis.search_path(),
            _dir: dir,
        }
    }

    fn trellis(&self, args: &[&str], server: &ModelServer) -> Output {
        self.trellis_for(Cli::Claude, args, server)
    }

    fn trellis_for(&self, cli: Cli, args: &[&str], server: &ModelServer) -> Output {
        // Claude Code appends /v1/messages itself; Codex expects the /v1 prefix in its base URL.
        let base_url = match cli {
            Cli::Claude => server.url(),
            Cli::Codex | Cli::Copilot | Cli::Pi => server.openai_base_url(),
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", &self.path_env)
            .env("HOME", self.home.join("user-home"))
            .env("TRELLIS_HOME", &self.home)
            .env("GATEWAY_BASE_URL", base_url)
            .env("GATEWAY_API_KEY", KEY);
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            if child.try_wait().unwrap().is_some() {
                return child.wait_with_output().unwrap();
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "trellis {args:?} did not finish in time: {:?}",
                    child.wait_with_output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn lane(&self, cli: Cli) -> String {
        self.lane_with(cli, json!(null))
    }

    fn lane_with(&self, cli: Cli, budget: Value) -> String {
        let path = self.home.with_file_name("lane.json");
        let mut lane = json!({"harness": cli.name(), "provider": "gateway", "model": cli.model(),
                          "connections": {"gateway": ["GATEWAY_BASE_URL", "GATEWAY_API_KEY"]}});
        if !budget.is_null() {
            lane["budget"] = budget;
        }
        std::fs::write(&path, lane.to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }
}

fn run_id(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    first["runId"].as_str().unwrap().to_owned()
}

fn check_run(lab: &Lab, server: &ModelServer, output: &Output) -> Value {
    if output.status.code() != Some(0) {
        let logs = lab.trellis(&["logs", &run_id(output)], server);
        panic!(
            "run failed:\n{}\n{}\nlogs:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&logs.stdout)
        );
    }
    let run = run_id(output);
    let status: Value =
        serde_json::from_slice(&lab.trellis(&["status", &run, "--json"], server).stdout).unwrap();
    assert_eq!(
        status["status"]["terminalResult"]["status"], "succeeded",
        "{status}"
    );
    assert!(
        status["tokenUsage"]["inputTokens"].as_u64().unwrap() > 0,
        "usage recorded: {status}"
    );
    assert!(status["tokenUsage"]["outputTokens"].as_u64().unwrap() > 0);
    let ledger = std::fs::read(lab.home.join("ledger.sqlite3")).unwrap();
    assert!(
        !ledger.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
        "the gateway key reached the ledger"
    );
    assert!(
        server.refused().is_empty(),
        "unscripted requests: {:?}",
        server.refused()
    );
    status
}

/// The gateway key (a connection value) is in no ledger byte, log line or status.
fn assert_no_canary(lab: &Lab, server: &ModelServer, run: &str) {
    let mut seen = std::fs::read(lab.home.join("ledger.sqlite3")).unwrap();
    seen.extend(std::fs::read(lab.home.join("ledger.sqlite3-wal")).unwrap_or_default());
    seen.extend(lab.trellis(&["logs", run], server).stdout);
    seen.extend(lab.trellis(&["status", run, "--json"], server).stdout);
    seen.extend(lab.trellis(&["status", run], server).stdout);
    assert!(
        !seen.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
        "the gateway key leaked"
    );
}

async fn single_worker(cli: Cli) {
    let Some(clis) = cli.installed(&format!("{}_single_worker_e2e", cli.name())) else {
        return;
    };
    let script = Script::new(vec![session(
        cli,
        "worker",
        Edit::Create("greeting.txt", "hello\n"),
        cli.reply(Value::Null),
    )]);
    let server = ModelServer::start(script).await.unwrap();
    let lab = Lab::new(&clis);
    let lane = lab.lane(cli);
    let out = tokio::task::block_in_place(|| {
        lab.trellis_for(
            cli,
            &[
                "run",
                "--template",
                "single-worker",
                "--task",
                "Create greeting.txt saying hello",
                "--uniform-runtime-config",
                &lane,
                "--json",
            ],
            &server,
        )
    });
    check_run(&lab, &server, &out);
    assert_eq!(
        std::fs::read_to_string(lab.workspace.join("greeting.txt")).unwrap(),
        "hello\n"
    );
}

/// `isolation` adds `--isolation MODE` to the run (`sandbox` needs bubblewrap).
async fn software_change(cli: Cli, isolation: Option<&str>) {
    let Some(clis) = cli.installed(&format!("{}_software_change_e2e", cli.name())) else {
        return;
    };
    // The worker keeps one session across its rounds (the template's `node_instance` scope,
    // as in the reference): its repair round continues the same conversation, with a shell
    // command (Claude's Write tool refuses to overwrite a file it has not read).
    let worker = session(
        cli,
        "worker",
        Edit::Create("greeting.txt", "Hello, world\n"),
        cli.reply(Value::Null),
    )
    .turn(
        Turn::reply(vec![Block::shell(
            "printf 'Hello, world!\\n' > greeting.txt",
        )])
        .with_usage(Usage::new(120, 30)),
    )
    .turn(Turn::reply(vec![cli.reply(Value::Null)]).with_usage(Usage::new(200, 40)));
    let script = Script::new(vec![
        worker,
        session(
            cli,
            "acceptance",
            Edit::Nothing,
            verdict(
                cli,
                "rejected",
                "1. greeting.txt must end with an exclamation mark",
            ),
        ),
        session(
            cli,
            "code",
            Edit::Nothing,
            verdict(cli, "accepted", "the change is small and correct"),
        ),
        session(
            cli,
            "acceptance",
            Edit::Nothing,
            verdict(
                cli,
                "accepted",
                "greeting.txt now ends with an exclamation mark",
            ),
        ),
        session(
            cli,
            "code",
            Edit::Nothing,
            verdict(cli, "accepted", "still small and correct"),
        ),
    ]);
    let server = ModelServer::start(script).await.unwrap();
    let lab = Lab::new(&clis);
    let lane = lab.lane(cli);
    let out = tokio::task::block_in_place(|| {
        lab.trellis_for(
            cli,
            &[
                "run",
                "--template",
                "software-change",
                "--task",
                "Write a friendly greeting to greeting.txt",
                "--uniform-runtime-config",
                &lane,
                "--json",
            ]
            .into_iter()
            .chain(isolation.map_or(Vec::new(), |mode| vec!["--isolation", mode]))
            .collect::<Vec<_>>(),
            &server,
        )
    });
    let status = check_run(&lab, &server, &out);
    assert_eq!(
        std::fs::read_to_string(lab.workspace.join("greeting.txt")).unwrap(),
        "Hello, world!\n"
    );
    assert_eq!(
        status["status"]["terminalResult"]["output"]["acceptanceReview"],
        "greeting.txt now ends with an exclamation mark"
    );
    // The repair round saw the rejection: the second worker prompt carries the finding.
    let workers: Vec<_> = server
        .model_requests()
        .into_iter()
        .filter(|r| r.user_text.contains("graph node `worker`"))
        .collect();
    assert!(
        workers
            .iter()
            .any(|r| r.user_text.contains("must end with an exclamation mark"))
    );
    assert!(server.script_finished(), "every scripted turn was used");
    assert_workspace_untouched_by_trellis(&lab.workspace);
}

/// Trellis leaves no files of its own in the user's workspace.
fn assert_workspace_untouched_by_trellis(workspace: &Path) {
    let names: Vec<String> = std::fs::read_dir(workspace)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, [".git", "README.md", "greeting.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_single_worker_through_trellis() {
    single_worker(Cli::Claude).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_single_worker_through_trellis() {
    single_worker(Cli::Codex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_software_change_with_one_repair_round() {
    software_change(Cli::Claude, None).await;
}

/// Issue 33: the same change with every agent in a Trellis sandbox (Claude's permission
/// bypass is Trellis's boundary there). Skipped without bubblewrap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_software_change_in_the_sandbox() {
    if bwrap_on_path() {
        software_change(Cli::Claude, Some("sandbox")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_software_change_with_one_repair_round() {
    software_change(Cli::Codex, None).await;
}

/// Issue 33: the same change with Codex in a Trellis sandbox, its own sandbox turned off
/// (`danger-full-access`: it could not nest, and Trellis is the boundary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_software_change_in_the_sandbox() {
    if bwrap_on_path() {
        software_change(Cli::Codex, Some("sandbox")).await;
    }
}

/// Whether `bwrap` is installed; the sandboxed runs say so when they skip (outside CI,
/// where scripts/test installs it, a missing one is a failure).
fn bwrap_on_path() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "CI must run the sandboxed agent tests: install bubblewrap"
    );
    if !found {
        eprintln!("skipped: bubblewrap (bwrap) is not installed");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_runs_single_worker_through_trellis() {
    single_worker(Cli::Pi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_runs_software_change_with_one_repair_round() {
    software_change(Cli::Pi, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_runs_single_worker_through_trellis() {
    single_worker(Cli::Copilot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_runs_software_change_with_one_repair_round() {
    software_change(Cli::Copilot, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copilot_run_over_its_token_budget_ends_budget_exhausted() {
    budget_stop(Cli::Copilot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_its_token_budget_ends_budget_exhausted() {
    budget_stop(Cli::Claude).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_run_over_its_token_budget_ends_budget_exhausted() {
    budget_stop(Cli::Pi).await;
}

async fn budget_stop(cli: Cli) {
    let Some(clis) = cli.installed(&format!("{}_budget_exhaustion_e2e", cli.name())) else {
        return;
    };
    let script = Script::new(vec![session(
        cli,
        "worker",
        Edit::Create("greeting.txt", "hi\n"),
        cli.reply(Value::Null),
    )]);
    let server = ModelServer::start(script).await.unwrap();
    let lab = Lab::new(&clis);
    let lane = lab.lane_with(cli, json!({"inputTokens": 100}));
    let out = tokio::task::block_in_place(|| {
        lab.trellis_for(
            cli,
            &[
                "run",
                "--template",
                "software-change",
                "--task",
                "Say hi",
                "--uniform-runtime-config",
                &lane,
                "--json",
            ],
            &server,
        )
    });
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let run = run_id(&out);
    let status: Value =
        serde_json::from_slice(&lab.trellis(&["status", &run, "--json"], &server).stdout).unwrap();
    assert_eq!(
        status["status"]["terminalResult"]["reason"], "budget_exhausted",
        "{status}"
    );
    assert!(status["tokenUsage"]["inputTokens"].as_u64().unwrap() > 100);
    // The reviewers never ran: the budget stopped the run after the worker.
    assert!(
        server
            .model_requests()
            .iter()
            .all(|r| r.user_text.contains("graph node `worker`"))
    );
    assert_no_canary(&lab, &server, &run);
}
