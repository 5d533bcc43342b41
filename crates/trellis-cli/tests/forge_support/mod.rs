//! Shared setup of the forge delivery tests: a workspace on `main` whose `origin` names
//! github.com/acme/widgets but pushes to a local bare repository, the loopback fake GitHub
//! reading that repository's branches, the offline example workers, and helpers to drive a run
//! while the test plays GitHub's part.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use trellis_testkit::git::git;
use trellis_testkit::github::{Action, FakeGitHub};

pub const TOKEN: &str = "ghp_canary_forge_delivery_7f3a";
pub const REPO: &str = "acme/widgets";
pub const REMOTE_URL: &str = "https://github.com/acme/widgets.git";
pub const TASK: &str = "Write a friendly greeting to greeting.txt";
pub const WAIT: Duration = Duration::from_secs(150);

/// A worker that records its input, then runs the example worker on it.
const RECORDER: &str = r#"import json, subprocess, sys
data = sys.stdin.read()
with open("offline/inputs.jsonl", "a") as log:
    log.write(json.dumps(json.loads(data)["input"]) + "\n")
sys.exit(subprocess.run([sys.executable, "offline/worker.py"], input=data, text=True).returncode)
"#;

pub fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline")
}

/// A workspace on `main` whose `origin` names github.com but pushes to a local bare repository
/// the fake GitHub reads its branches from.
pub struct Setup {
    _dir: tempfile::TempDir,
    pub origin: PathBuf,
    pub work: PathBuf,
    pub home: PathBuf,
    pub github: FakeGitHub,
}

impl Setup {
    pub fn new() -> Setup {
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
        git(&work, &["remote", "add", "origin", REMOTE_URL]);
        git(
            &work,
            &[
                "config",
                &format!("url.{}.insteadOf", origin.display()),
                REMOTE_URL,
            ],
        );
        git(&work, &["push", "-q", "origin", "main"]);
        let github = FakeGitHub::start_blocking(TOKEN).unwrap();
        github
            .apply(Action::AddRepository {
                repository: REPO.into(),
                default_branch: "main".into(),
                private: false,
                git_dir: Some(origin.clone()),
            })
            .unwrap();
        Setup {
            home: dir.path().join("home"),
            _dir: dir,
            origin,
            work,
            github,
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_trellis"));
        command
            .args(args)
            .current_dir(&self.work)
            .env("TRELLIS_HOME", &self.home)
            .env("GH_TOKEN", TOKEN)
            .env("GITHUB_API_URL", self.github.api_url())
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("TRELLIS_DELIVERY_POLL_MS", "100")
            .env("TRELLIS_DELIVERY_WAIT_S", "120")
            .env("TRELLIS_DELIVERY_RETRY_MS", "50");
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `trellis run --template software-change FLAG …`, to run in the foreground.
    pub fn run_command(&self, flag: &str) -> Command {
        self.command(&[
            "run",
            "--template",
            "software-change",
            flag,
            "--task",
            TASK,
            "--runtime-config",
            "offline/plan.json",
            "--json",
        ])
    }

    /// `trellis run --template software-change FLAG …` started in the background.
    pub fn start(&self, flag: &str) -> Child {
        self.run_command(flag)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The open pull request's number and head, once there is one.
    pub fn pull(&self) -> Option<(u64, String)> {
        let number = *self.github.pull_numbers(REPO).first()?;
        Some((number, self.github.pull_head(REPO, number)?))
    }

    pub fn set_check(&self, sha: &str, conclusion: &str) {
        self.github
            .apply(Action::SetCheckRun {
                repository: REPO.into(),
                sha: Some(sha.into()),
                pull: None,
                name: "ci".into(),
                status: "completed".into(),
                conclusion: Some(conclusion.into()),
                summary: String::new(),
            })
            .unwrap();
    }

    /// Someone else pushes `file` with `text` to the target branch `main` (through a clone in
    /// `name`, a directory beside the origin).
    pub fn move_target(&self, name: &str, file: &str, text: &str) {
        let clone = self.origin.with_file_name(name);
        git(
            self.origin.parent().unwrap(),
            &[
                "clone",
                "-q",
                "-b",
                "main",
                self.origin.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        std::fs::write(clone.join(file), text).unwrap();
        git(&clone, &["add", file]);
        git(
            &clone,
            &[
                "-c",
                "user.name=Someone",
                "-c",
                "user.email=someone@example.com",
                "commit",
                "-q",
                "-m",
                "Move on",
            ],
        );
        git(&clone, &["push", "-q", "origin", "main"]);
    }

    /// Makes the worker node record each input it gets (`offline/inputs.jsonl`), then do what
    /// the example worker does.
    pub fn record_worker_inputs(&self) {
        let offline = self.work.join("offline");
        std::fs::write(offline.join("recorder.py"), RECORDER).unwrap();
        let plan = offline.join("plan.json");
        let mut value: Value =
            serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
        value["nodes"]["worker"]["command"] = serde_json::json!(["python3", "offline/recorder.py"]);
        std::fs::write(&plan, value.to_string()).unwrap();
    }

    /// The inputs the worker node got, in order (see `record_worker_inputs`).
    pub fn worker_inputs(&self) -> Vec<Value> {
        self.worker_inputs_of("inputs.jsonl")
    }

    /// The inputs a worker recorded in `offline/FILE`, one JSON document a line.
    pub fn worker_inputs_of(&self, file: &str) -> Vec<Value> {
        std::fs::read_to_string(self.work.join("offline").join(file))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn pulls_opened(&self) -> usize {
        self.github
            .calls()
            .iter()
            .filter(|c| c.method == "POST" && c.path.ends_with("/pulls"))
            .count()
    }
}

/// Waits for `child` while `step` reacts to the fake's state; the child's output.
pub fn drive(mut child: Child, mut step: impl FnMut()) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > WAIT {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "run did not finish:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        step();
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn terminal(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    last["status"]["terminalResult"].clone()
}

pub fn no_secret(out: &Output) {
    for stream in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(stream).contains(TOKEN));
    }
}

pub fn check_looks(setup: &Setup) -> usize {
    setup
        .github
        .calls()
        .iter()
        .filter(|c| c.method == "GET" && c.path.ends_with("/check-runs"))
        .count()
}

pub fn status_of(setup: &Setup, run: &str) -> Value {
    let out = setup.run(&["status", run, "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// How many calls with `method` to a path ending in `suffix` the fake answered `status`.
pub fn answered(setup: &Setup, method: &str, suffix: &str, status: u16) -> usize {
    setup
        .github
        .calls_to(method, suffix)
        .iter()
        .filter(|c| c.status == status)
        .count()
}

/// The run id of a run's first output line (`{"runId": …}`).
pub fn run_id(out: &Output) -> String {
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let receipt: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
    receipt["runId"].as_str().unwrap_or_default().to_owned()
}
