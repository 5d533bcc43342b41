//! Failures that explain themselves, through the real `trellis` binary with a fake `claude`
//! that replays what the pinned Claude Code printed (captured against the scripted model
//! server by `scripts/capture-cli-failures.sh`; see `trellis-agents/tests/fake_cli_failures.rs`):
//!
//! * preflight refuses a run before it exists when Claude Code is not signed in, or when the
//!   gateway refuses the declared key (exit 2, one line per problem with its fix);
//! * with `--no-preflight` the run ends `failed`, and `status`, `status --json` (`cause`) name
//!   the node, its error channel, the classified reason and the fix — with no retry for
//!   authentication failures; an unknown model is named too.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{CliOutput, Sandbox};
use trellis_testkit::{ModelServer, Script, ServerOptions};

const GOOD_KEY: &str = "sk-preflight-valid-key-4242";
const BAD_KEY: &str = "sk-preflight-wrong-key-1717";

fn captured() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../trellis-agents/tests/fakes/captured")
}

/// A git workspace with a fake `claude` first on `PATH` that replays capture `claude-CASE`
/// for every model run and the signed-out `auth status` answer.
struct Lab {
    sandbox: Sandbox,
    bin: PathBuf,
}

impl Lab {
    fn new(case: &str) -> Self {
        let sandbox = Sandbox::new();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(&sandbox.workspace)
                .output()
                .expect("git")
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(sandbox.workspace.join("README.md"), "demo\n").expect("readme");
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
        let bin = sandbox.home.with_file_name("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        let capture = captured();
        let log = bin.join("invocations");
        let script = format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{log}'\n\
             if [ \"$1\" = auth ]; then\n\
               cat '{cap}/claude-auth-status-signed-out.stdout'\n\
               exit \"$(cat '{cap}/claude-auth-status-signed-out.code')\"\n\
             fi\n\
             cat > /dev/null\n\
             cat '{cap}/claude-{case}.stdout'\n\
             cat '{cap}/claude-{case}.stderr' >&2\n\
             exit \"$(cat '{cap}/claude-{case}.code')\"\n",
            log = log.display(),
            cap = capture.display(),
        );
        let program = bin.join("claude");
        std::fs::write(&program, script).expect("fake claude");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Lab { sandbox, bin }
    }

    fn path_env(&self) -> String {
        format!("{}:/usr/bin:/bin", self.bin.display())
    }

    fn trellis(&self, args: &[&str], env: &[(&str, &str)]) -> CliOutput {
        let path = self.path_env();
        let mut all = vec![("PATH", path.as_str())];
        all.extend_from_slice(env);
        self.sandbox.trellis_with_env(args, &all)
    }

    /// Model runs of the fake (its `auth status` calls excluded).
    fn model_runs(&self) -> usize {
        std::fs::read_to_string(self.bin.join("invocations"))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.starts_with("auth "))
            .count()
    }

    fn runs(&self) -> Vec<Value> {
        let list = self.trellis(&["list", "--json"], &[]).success().json();
        list["runs"].as_array().cloned().unwrap_or_default()
    }

    fn gateway_plan(&self) -> String {
        let lane = json!({"harness": "claude", "provider": "gateway", "model": "claude-sonnet-4-5",
                          "connections": {"gateway": ["GATEWAY_BASE_URL", "GATEWAY_API_KEY"]}});
        self.sandbox.write_json("lane.json", &lane)
    }

    /// Runs to the end with `--no-preflight`; the finished run's `status` and `status --json`.
    fn failed_run(&self, extra: &[&str], env: &[(&str, &str)]) -> (String, String, Value) {
        let mut args = vec![
            "run",
            "--template",
            "single-worker",
            "--task",
            "Add a file",
            "--no-preflight",
            "--detach",
        ];
        args.extend_from_slice(extra);
        let receipt = self.trellis(&args, env).success().json();
        let run = receipt["runId"].as_str().expect("runId").to_owned();
        self.sandbox.wait_finished(&run);
        let human = self.trellis(&["status", &run], env).success().stdout;
        let json = self
            .trellis(&["status", &run, "--json"], env)
            .success()
            .json();
        (run, human, json)
    }
}

fn settings(lab: &Lab) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.add_filter(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[run-id]",
    );
    settings.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]");
    settings.add_filter(r"c1:\d+", "c1:[n]");
    let root = lab
        .sandbox
        .workspace
        .parent()
        .expect("root")
        .display()
        .to_string();
    settings.add_filter(&regex_literal(&root), "[sandbox]");
    settings
}

fn regex_literal(text: &str) -> String {
    text.chars()
        .map(|c| {
            if "\\.+*?()|[]{}^$#&-~".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A model server that accepts only [`GOOD_KEY`].
fn gateway() -> ModelServer {
    let options = ServerOptions {
        api_key: Some(GOOD_KEY.to_owned()),
        ..ServerOptions::default()
    };
    ModelServer::start_blocking_with(Script::default(), options).expect("model server")
}

#[test]
fn preflight_stops_a_run_of_a_cli_that_is_not_signed_in() {
    let lab = Lab::new("not-signed-in");
    let output = lab.trellis(
        &["run", "--template", "single-worker", "--task", "Add a file"],
        &[("ANTHROPIC_API_KEY", "")],
    );
    assert_eq!(output.code, Some(2), "{output:#?}");
    assert!(lab.runs().is_empty(), "no run was created");
    assert_eq!(lab.model_runs(), 0, "no agent ran");
    settings(&lab).bind(|| insta::assert_snapshot!("preflight_not_signed_in", output.stderr));
}

#[test]
fn preflight_stops_a_run_whose_gateway_refuses_the_key() {
    let lab = Lab::new("invalid-key");
    let server = gateway();
    let plan = lab.gateway_plan();
    let url = server.url();
    let output = lab.trellis(
        &[
            "run",
            "--template",
            "single-worker",
            "--task",
            "Add a file",
            "--uniform-runtime-config",
            &plan,
        ],
        &[("GATEWAY_BASE_URL", &url), ("GATEWAY_API_KEY", BAD_KEY)],
    );
    assert_eq!(output.code, Some(2), "{output:#?}");
    assert!(lab.runs().is_empty(), "no run was created");
    assert!(!output.stderr.contains(BAD_KEY), "the key is never shown");
    settings(&lab).bind(|| insta::assert_snapshot!("preflight_invalid_key", output.stderr));
    // The right key passes the same check.
    let (_, _, status) = lab.failed_run(
        &["--uniform-runtime-config", &plan],
        &[("GATEWAY_BASE_URL", &url), ("GATEWAY_API_KEY", GOOD_KEY)],
    );
    assert_eq!(status["status"]["phase"], "finished");
}

#[test]
fn without_preflight_the_status_names_the_sign_in_and_nothing_is_retried() {
    let lab = Lab::new("not-signed-in");
    let (run, human, status) = lab.failed_run(&[], &[("ANTHROPIC_API_KEY", "")]);
    assert_eq!(
        lab.model_runs(),
        1,
        "an authentication failure is not retried"
    );
    let cause = &status["cause"];
    assert_eq!(cause["reason"], "worker_failed", "{status:#}");
    let node = &cause["nodes"][0];
    assert_eq!(node["node"], "worker");
    assert_eq!(node["channel"], "refusal");
    assert_eq!(node["reason"], "authentication_required");
    assert!(
        node["message"]
            .as_str()
            .is_some_and(|m| m.contains("run \"claude\" once")),
        "{node:#}"
    );
    assert_eq!(status["executions"].as_array().map(Vec::len), Some(1));
    assert!(human.contains(&run));
    settings(&lab).bind(|| insta::assert_snapshot!("status_cause_not_signed_in", human));
}

#[test]
fn without_preflight_an_invalid_key_and_an_unknown_model_are_named() {
    let lab = Lab::new("invalid-key");
    let server = gateway();
    let plan = lab.gateway_plan();
    let url = server.url();
    let env = [
        ("GATEWAY_BASE_URL", url.as_str()),
        ("GATEWAY_API_KEY", BAD_KEY),
    ];
    let (_, human, status) = lab.failed_run(&["--uniform-runtime-config", &plan], &env);
    assert_eq!(
        status["cause"]["nodes"][0]["reason"],
        "authentication_required"
    );
    assert_eq!(lab.model_runs(), 1, "not retried");
    settings(&lab).bind(|| insta::assert_snapshot!("status_cause_invalid_key", human));

    let lab = Lab::new("unknown-model");
    let env = [
        ("GATEWAY_BASE_URL", url.as_str()),
        ("GATEWAY_API_KEY", GOOD_KEY),
    ];
    let plan = lab.gateway_plan();
    let (_, human, status) = lab.failed_run(&["--uniform-runtime-config", &plan], &env);
    let node = &status["cause"]["nodes"][0];
    assert_eq!(node["channel"], "crash", "{status:#}");
    assert!(
        node["message"]
            .as_str()
            .is_some_and(|m| m.contains("does not offer this model")),
        "{node:#}"
    );
    assert_eq!(lab.model_runs(), 1, "not retried");
    settings(&lab).bind(|| insta::assert_snapshot!("status_cause_unknown_model", human));
}
