//! `trellis run --target NAME --environment FILE`: a local `trellis serve` runs the file's
//! setup hooks (which install a tool the step is then started as, found on its `PATH`) and
//! startup hooks (which leave a service running, stopped when the run ends) before it
//! dispatches; both run again on resume; a hook over its limit, or failing, ends the run
//! before any step started, with its log; a secret a hook prints is masked; and a local run
//! refuses an environment file.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::serve::{Server, served_workspaces};
use support::{CliOutput, STATE_TIMEOUT, Sandbox, graph, python, wait_until, worker_script};

const TOKEN: &str = "trellis_environment_token_3c2b1a0f";
/// A connection value the startup hook prints: it must never be recorded.
const CANARY: &str = "canary-environment-hook-8d7e6f5a";

/// Runs `trellis ARGS` with the targets file naming `server` as `team`, `env` added.
fn remote(sandbox: &Sandbox, server: &Server, args: &[&str], env: &[(&str, &str)]) -> CliOutput {
    let targets = sandbox.home.with_file_name("targets.json");
    let targets = targets.to_str().expect("UTF-8 path");
    let mut all_env = vec![("TRELLIS_TARGETS", targets), ("TEAM_TOKEN", TOKEN)];
    all_env.extend_from_slice(env);
    if !Path::new(targets).exists() {
        sandbox
            .trellis_with_env(
                &[
                    "target",
                    "add",
                    "team",
                    &server.base,
                    "--token-env",
                    "TEAM_TOKEN",
                ],
                &all_env,
            )
            .success();
    }
    let mut all = vec!["--target", "team"];
    all.extend_from_slice(args);
    sandbox.trellis_with_env(&all, &all_env)
}

/// Where the hooks of these tests leave their marks (outside every workspace).
fn marks(sandbox: &Sandbox) -> PathBuf {
    let dir = sandbox.home.with_file_name("marks");
    std::fs::create_dir_all(&dir).expect("marks dir");
    dir
}

/// Writes an environment file: a setup hook installing `envtool` (the test worker under
/// another name) into the tools directory, and a startup hook leaving a `sleep` service
/// running, printing the canary, and — from the second time on — fixing the `flaky` step.
fn environment_file(sandbox: &Sandbox) -> String {
    let marks = marks(sandbox);
    let marks = marks.display();
    let tool = format!(
        "#!/bin/sh\nexec {} {} \"$@\"\n",
        python(),
        worker_script().display()
    );
    let setup = format!(
        "echo setup >> {marks}/hooks.log\n\
         cat > \"$TRELLIS_TOOLS_BIN/envtool\" <<'TOOL'\n{tool}TOOL\n\
         chmod +x \"$TRELLIS_TOOLS_BIN/envtool\"\n\
         echo installed envtool; pwd"
    );
    let startup = format!(
        "grep -q startup {marks}/hooks.log && touch \"$TRELLIS_WORKSPACE/fixed-flaky\"\n\
         echo startup >> {marks}/hooks.log\n\
         sleep 300 >/dev/null 2>&1 &\n\
         echo $! > {marks}/service-$TRELLIS_RUN_ID.pid\n\
         echo \"the token is $CANARY_TOKEN\" >&2"
    );
    sandbox.write_json(
        "environment.json",
        &json!({
            "setup": [{"name": "tools", "run": setup}],
            "startup": [{"name": "service", "run": startup}]
        }),
    )
}

/// The `run` arguments of a one-step graph whose step runs as `envtool`.
fn run_args(sandbox: &Sandbox, step: &str) -> Vec<String> {
    let plan = json!({
        "kind": "command",
        "command": ["envtool"],
        "connections": ["CANARY_TOKEN"],
    });
    let mut args = sandbox.run_args(&graph::one_step_graph(step), &json!({"value": 21}), &plan);
    args.push("--no-source".into());
    args
}

fn hooks_log(sandbox: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(marks(sandbox).join("hooks.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The run's log messages, read through the server.
fn log_messages(sandbox: &Sandbox, server: &Server, run: &str) -> Vec<String> {
    let out = remote(sandbox, server, &["logs", run], &[]).success();
    assert!(
        !out.stdout.contains(CANARY),
        "the canary leaked:\n{}",
        out.stdout
    );
    out.ndjson()
        .iter()
        .filter_map(|line| line["record"]["message"].as_str().map(str::to_owned))
        .collect()
}

fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn service_pid(sandbox: &Sandbox, run: &str) -> u32 {
    let path = marks(sandbox).join(format!("service-{run}.pid"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no {}: {e}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

fn receipt_and_last(out: &CliOutput) -> (String, Value) {
    let lines = out.ndjson();
    let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
    let last = lines.last().expect("watch updates").clone();
    (run, last)
}

#[test]
fn setup_installs_a_tool_the_step_finds_on_its_path_and_the_startup_service_ends_with_the_run() {
    tool_and_service(None);
}

#[test]
fn the_same_on_a_postgresql_ledger() {
    let Some(schema) = trellis_ledger::testing::postgres::TestSchema::for_test() else {
        return;
    };
    tool_and_service(Some(&schema.location_url()));
}

fn tool_and_service(ledger: Option<&str>) {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, ledger, &[], &[]);
    let environment = environment_file(&sandbox);
    let mut args: Vec<String> = run_args(&sandbox, "double");
    args.extend(["--environment".into(), environment]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = remote(&sandbox, &server, &args, &[("CANARY_TOKEN", CANARY)]).success();
    let (run, last) = receipt_and_last(&out);
    assert_eq!(
        last["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}}),
        "{last}"
    );
    assert_eq!(hooks_log(&sandbox), ["setup", "startup"]);

    // The service the startup hook left running was stopped before the run was reported
    // finished.
    assert!(!pid_alive(service_pid(&sandbox, &run)));

    // The hooks' output is in the run's log, labelled, the canary masked; setup ran in the
    // run's environment directory, not the workspace.
    let messages = log_messages(&sandbox, &server, &run);
    let has = |text: &str| messages.iter().any(|m| m.contains(text));
    assert!(has("[setup tools] installed envtool"), "{messages:#?}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("[setup tools] /") && m.ends_with("/environment")),
        "{messages:#?}"
    );
    assert!(
        has("[startup service] the token is [REDACTED]"),
        "{messages:#?}"
    );
    assert!(has("leaving services running"), "{messages:#?}");
    assert!(!server.kill().contains(CANARY));
    // Nor is it in any file the server and the run wrote (ledger, controller log, workspace).
    for root in [&sandbox.home, &served_workspaces(&sandbox)] {
        assert_no_canary_under(root);
    }
}

fn assert_no_canary_under(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            assert_no_canary_under(&path);
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !bytes
                    .windows(CANARY.len())
                    .any(|window| window == CANARY.as_bytes()),
                "the canary is in {}",
                path.display()
            );
        }
    }
}

#[test]
fn hooks_run_again_when_a_failed_run_is_resumed() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let environment = environment_file(&sandbox);
    let mut args = run_args(&sandbox, "flaky");
    args.extend(["--environment".into(), environment]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [("CANARY_TOKEN", CANARY)];
    let out = remote(&sandbox, &server, &args, &env);
    assert_eq!(out.code, Some(1), "{out:#?}");
    let (run, last) = receipt_and_last(&out);
    assert_eq!(last["status"]["terminalResult"]["status"], "failed");
    assert_eq!(hooks_log(&sandbox), ["setup", "startup"]);

    // The successor prepares its environment again; its startup hook fixes the step. (The
    // ended run's controller may still be stopping its service and holding the workspace.)
    let out = wait_until("the workspace to be free", STATE_TIMEOUT, || {
        let out = remote(&sandbox, &server, &["resume", &run], &env);
        (!out.stderr.contains("run.workspace_busy")).then_some(out)
    })
    .success();
    let (successor, last) = receipt_and_last(&out);
    assert_ne!(successor, run);
    assert_eq!(
        last["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 22}}),
        "{last}"
    );
    assert_eq!(
        hooks_log(&sandbox),
        ["setup", "startup", "setup", "startup"]
    );
    for run in [&run, &successor] {
        assert!(!pid_alive(service_pid(&sandbox, run)), "{run}'s service");
    }
}

#[test]
fn a_hook_over_its_limit_or_failing_ends_the_run_before_any_step_with_its_log() {
    let sandbox = Sandbox::new();
    let server = Server::start(
        &sandbox,
        TOKEN,
        None,
        &[],
        &[("TRELLIS_ENVIRONMENT_HOOK_LIMIT_MS", "700")],
    );
    let marks = marks(&sandbox);
    let cases = [
        (
            "slow",
            format!(
                "echo warming up; touch {}/slow-started; sleep 60",
                marks.display()
            ),
            "environment_hook_timeout",
            "ran over its limit of 700 ms",
        ),
        (
            "broken",
            "echo cannot reach the mirror >&2; exit 3".to_owned(),
            "environment_hook_failed",
            "failed: it exited with code 3",
        ),
    ];
    for (name, script, reason, says) in cases {
        let environment = sandbox.write_json(
            &format!("{name}.json"),
            &json!({
                "setup": [{"name": name, "run": script}],
                "startup": [{"name": "never", "run": format!("touch {}/startup-ran", marks.display())}]
            }),
        );
        let plan = json!({"kind": "command", "command": ["no-such-tool"]});
        let mut args = sandbox.run_args(
            &graph::one_step_graph("double"),
            &json!({"value": 1}),
            &plan,
        );
        args.extend(["--no-source".into(), "--environment".into(), environment]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = remote(&sandbox, &server, &args, &[]);
        assert_eq!(out.code, Some(1), "{out:#?}");
        let (run, last) = receipt_and_last(&out);
        assert_eq!(
            last["status"]["terminalResult"],
            json!({"status": "failed", "reason": reason}),
            "{last}"
        );
        let status = remote(&sandbox, &server, &["status", &run], &[])
            .success()
            .json();
        assert_eq!(status["executionsStarted"], 0, "no step started: {status}");
        assert_eq!(status["cause"]["reason"], reason, "{status}");
        assert!(
            status["cause"]["environment"]
                .as_str()
                .is_some_and(|note| note.contains(says) && note.contains(name)),
            "the cause names the hook and what happened: {status}"
        );
        assert!(!marks.join("startup-ran").exists(), "no later hook ran");
        let messages = log_messages(&sandbox, &server, &run);
        let has = |text: &str| messages.iter().any(|m| m.contains(text));
        assert!(has(says), "{name}: {messages:#?}");
        if name == "slow" {
            // What the hook printed before it was stopped is kept.
            assert!(has("[setup slow] warming up"), "{messages:#?}");
        } else {
            assert!(
                has("[setup broken] cannot reach the mirror"),
                "{messages:#?}"
            );
        }
        assert!(has("no step was started"), "{messages:#?}");
    }
    assert!(marks.join("slow-started").exists());
    let log = std::fs::read_dir(served_workspaces(&sandbox))
        .expect("served workspaces")
        .filter_map(Result::ok)
        .any(|entry| entry.path().join("invocations.log").exists());
    assert!(!log, "no worker ran");
}

#[test]
fn a_local_run_refuses_an_environment_file_and_a_malformed_one_is_named_before_sending() {
    let sandbox = Sandbox::new();
    let environment = sandbox.write_json(
        "environment.json",
        &json!({"setup": [{"name": "tools", "run": "true"}]}),
    );
    let mut args = sandbox.run_args(
        &graph::one_step_graph("double"),
        &json!({"value": 1}),
        &support::uniform_worker_plan(&[]),
    );
    args.extend(["--environment".into(), environment]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sandbox.trellis_with_env(&args, &[("TRELLIS_ERROR_FORMAT", "json")]);
    assert_eq!(out.code, Some(1), "{out:#?}");
    let error: Value = serde_json::from_str(out.stderr.trim()).expect("a JSON error");
    assert_eq!(error["code"], "runtime.invalid_environment", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("--target")),
        "{error}"
    );
    assert!(
        sandbox.trellis(&["list", "--json"]).success().json()["runs"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );

    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let malformed = sandbox.write_json(
        "malformed.json",
        &json!({"setup": [{"name": "tools", "script": "true"}]}),
    );
    let mut args = run_args(&sandbox, "double");
    args.extend(["--environment".into(), malformed]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = remote(
        &sandbox,
        &server,
        &args,
        &[("TRELLIS_ERROR_FORMAT", "json")],
    );
    assert_eq!(out.code, Some(1), "{out:#?}");
    let error: Value = serde_json::from_str(out.stderr.trim()).expect("a JSON error");
    assert_eq!(error["code"], "runtime.invalid_environment", "{error}");
    let listed = remote(&sandbox, &server, &["list"], &[]).success().json();
    assert_eq!(listed["runs"], json!([]), "nothing was submitted: {listed}");
}

#[test]
fn a_force_stop_during_a_hook_stops_the_hook_and_ends_the_run_force_stopped() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let marks = marks(&sandbox);
    let environment = sandbox.write_json(
        "environment.json",
        &json!({"setup": [{
            "name": "long",
            "run": format!("echo $$ > {}/hook.pid; sleep 120", marks.display())
        }]}),
    );
    let plan = json!({"kind": "command", "command": ["no-such-tool"]});
    let mut args = sandbox.run_args(
        &graph::one_step_graph("double"),
        &json!({"value": 1}),
        &plan,
    );
    args.extend([
        "--no-source".into(),
        "--detach".into(),
        "--environment".into(),
        environment,
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = remote(&sandbox, &server, &args, &[]).success();
    let run = out.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();
    let hook = wait_until("the hook to start", STATE_TIMEOUT, || {
        std::fs::read_to_string(marks.join("hook.pid"))
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
    });
    remote(&sandbox, &server, &["force-stop", &run], &[]).success();
    let status = wait_until("the run to end", STATE_TIMEOUT, || {
        let status = remote(&sandbox, &server, &["status", &run], &[])
            .success()
            .json();
        (status["status"]["phase"] == "finished").then_some(status)
    });
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "failed", "reason": "force_stopped"}),
        "{status}"
    );
    assert_eq!(status["executionsStarted"], 0, "{status}");
    wait_until("the hook to be stopped", STATE_TIMEOUT, || {
        (!pid_alive(hook)).then_some(())
    });
}

#[test]
fn hooks_that_together_run_over_the_budget_end_the_run_budget_exhausted() {
    let sandbox = Sandbox::new();
    let server = Server::start(
        &sandbox,
        TOKEN,
        None,
        &[],
        &[("TRELLIS_ENVIRONMENT_BUDGET_MS", "1000")],
    );
    let environment = sandbox.write_json(
        "environment.json",
        &json!({"setup": [
            {"name": "first", "run": "sleep 0.6"},
            {"name": "second", "run": "echo second started; sleep 30"}
        ]}),
    );
    let plan = json!({"kind": "command", "command": ["no-such-tool"]});
    let mut args = sandbox.run_args(
        &graph::one_step_graph("double"),
        &json!({"value": 1}),
        &plan,
    );
    args.extend(["--no-source".into(), "--environment".into(), environment]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let out = remote(&sandbox, &server, &args, &[]);
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the second hook was stopped at the budget, not at its own end"
    );
    let (run, last) = receipt_and_last(&out);
    assert_eq!(
        last["status"]["terminalResult"],
        json!({"status": "failed", "reason": "environment_budget_exhausted"}),
        "{last}"
    );
    let messages = log_messages(&sandbox, &server, &run);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("budget of 1000 ms ran out")
                || m.contains("the hooks' budget of 1000 ms is spent")),
        "{messages:#?}"
    );
}

#[test]
fn services_of_a_controller_that_died_are_stopped_by_whoever_ends_its_run() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[]);
    let environment = environment_file(&sandbox);
    let mut args = run_args(&sandbox, "slow");
    args.extend(["--detach".into(), "--environment".into(), environment]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = remote(&sandbox, &server, &args, &[("CANARY_TOKEN", CANARY)]).success();
    let run = out.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();
    wait_until("the step to start", STATE_TIMEOUT, || {
        let status = remote(&sandbox, &server, &["status", &run], &[])
            .success()
            .json();
        (status["executionsStarted"] == 1).then_some(())
    });
    let service = service_pid(&sandbox, &run);
    assert!(pid_alive(service));
    let controller = support::controller_pid(&run).expect("the run's controller");
    support::send_signal(controller, nix::sys::signal::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        (!pid_alive(controller)).then_some(())
    });
    // The next observer finds the run lost, ends it and stops what its controller left.
    let status = remote(&sandbox, &server, &["status", &run], &[])
        .success()
        .json();
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "failed", "reason": "runtime_lost"}),
        "{status}"
    );
    wait_until("the service to be stopped", STATE_TIMEOUT, || {
        (!pid_alive(service)).then_some(())
    });
    assert!(
        !sandbox
            .home
            .join("runs")
            .join(&run)
            .join("environment")
            .exists(),
        "the environment directory is removed"
    );
}
