//! Caller connections: a run sent to `trellis serve` carries its caller's values of exactly the
//! variables the server reports it requires. Two callers' runs on one server each see their
//! own canary and no other; no canary reaches the ledger, a log line, an API answer, the
//! server's output or any file under its home; `resume` sends the values again under the
//! caller's kept authorization, `discard-workspace` revokes it, and a variable nobody supplies
//! is refused by name.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::graph::*;
use support::serve::{Server, TOKEN_ENV};
use support::{
    CliOutput, STATE_TIMEOUT, Sandbox, Signal, controller_pid, python, send_signal, wait_until,
};
use trellis_ledger::testing::postgres::TestSchema;

const TOKEN: &str = "trellis_callers_token_5e4d3c2b1a";
/// The variable both callers (and the plan) name.
const KEY: &str = "CALLER_KEY";
const ALICE: &str = "alice-canary-4b1f9e07c2d8";
const BOB: &str = "bob-canary-93ad50c6e1f2";
const SERVER_VALUE: &str = "server-canary-0d7e61a9b3c4";

/// The step: prints the SHA-256 of `$CALLER_KEY` (a digest is not the value, so it stays in
/// the log) and the value itself (which must be masked); with `FAIL_ONCE` set it crashes the
/// first time it runs in a workspace; with `GATE` set it first leaves a file `started` there
/// and waits for a file `open`.
const STEP: &str = r#"
import hashlib, json, os, sys, time
request = json.load(sys.stdin)
if os.environ.get("GATE"):
    open("started", "w").close()
    while not os.path.exists("open"):
        time.sleep(0.05)
value = os.environ.get("CALLER_KEY")
digest = hashlib.sha256(value.encode()).hexdigest() if value is not None else "unset"
print("digest: " + digest, file=sys.stderr, flush=True)
print("value: %s :end" % value, file=sys.stderr, flush=True)
marker = "tried-" + request["node"]
if os.environ.get("FAIL_ONCE") and not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(3)
sys.stdout.write(json.dumps({"output": None}) + "\n")
"#;

fn digest(value: &str) -> String {
    format!("{:x}", Sha256::digest(value.as_bytes()))
}

fn key_graph() -> Value {
    let state = record(&[("value", integer(), true)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step("keyStep", null(), null(), &[], &[]),
                unless_failed("keyStep", &state, succeed("done", null(), &[])),
            ],
            &[],
        ),
    )
}

/// One caller: its own state directory (where its authorizations live) and the run files.
struct Caller {
    home: PathBuf,
    targets: PathBuf,
    args: Vec<String>,
}

impl Caller {
    /// A caller whose plan hands its step `plan_env` (`FAIL_ONCE`, `GATE`).
    fn new(sandbox: &Sandbox, name: &str, base: &str, plan_env: Value) -> Self {
        let dir = sandbox.home.with_file_name(format!("caller-{name}"));
        std::fs::create_dir_all(&dir).expect("caller dir");
        let script = dir.join("step.py");
        std::fs::write(&script, STEP).expect("step script");
        let plan = json!({"kind": "command", "command": [python(), script],
                          "connections": [KEY], "env": plan_env});
        let write = |file: &str, value: &Value| {
            let path = dir.join(file);
            std::fs::write(&path, serde_json::to_vec(value).expect("json")).expect("write");
            path.to_str().expect("UTF-8 path").to_owned()
        };
        let args = vec![
            "run".to_owned(),
            write("graph.json", &key_graph()),
            "--input".to_owned(),
            write("input.json", &json!({"value": 1})),
            "--uniform-runtime-config".to_owned(),
            write("plan.json", &plan),
            "--no-source".to_owned(),
        ];
        let caller = Self {
            home: dir.join("home"),
            targets: dir.join("targets.json"),
            args,
        };
        caller
            .trellis(
                sandbox,
                &["target", "add", "team", base, "--token-env", TOKEN_ENV],
                None,
            )
            .success();
        caller
    }

    /// `trellis ARGS` as this caller, with `$CALLER_KEY` set to `value` (or unset).
    fn trellis(&self, sandbox: &Sandbox, args: &[&str], value: Option<&str>) -> CliOutput {
        let home = self.home.to_str().expect("UTF-8");
        let targets = self.targets.to_str().expect("UTF-8");
        let mut env = vec![
            ("TRELLIS_HOME", home),
            ("TRELLIS_TARGETS", targets),
            (TOKEN_ENV, TOKEN),
        ];
        if let Some(value) = value {
            env.push((KEY, value));
        }
        let mut command = sandbox.command(args);
        command.env_remove(KEY).envs(env);
        let output = command.output().expect("run trellis");
        CliOutput {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn remote(&self, sandbox: &Sandbox, args: &[&str], value: Option<&str>) -> CliOutput {
        let mut all = vec!["--target", "team"];
        all.extend(args);
        self.trellis(sandbox, &all, value)
    }

    /// Submits the run (detached) with `value`; its id.
    fn submit(&self, sandbox: &Sandbox, value: Option<&str>) -> String {
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.push("--detach");
        let out = self.remote(sandbox, &args, value).success();
        out.ndjson()[0]["runId"].as_str().expect("runId").to_owned()
    }

    /// Follows the run to its end (`watch`) and answers its terminal status.
    fn finish(&self, sandbox: &Sandbox, run: &str) -> Value {
        self.remote(sandbox, &["watch", run], None).success();
        let status = self
            .remote(sandbox, &["status", run], None)
            .success()
            .json();
        status["status"]["terminalResult"]["status"].clone()
    }

    fn logs(&self, sandbox: &Sandbox, run: &str) -> String {
        self.remote(sandbox, &["logs", run], None).success().stdout
    }

    fn authorization(&self, run: &str) -> PathBuf {
        self.home.join("authorizations").join(format!("{run}.json"))
    }
}

fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            files.push((path.display().to_string(), bytes));
        }
    }
    files
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Every row of the schema's tables, as `pg_dump` writes them.
fn postgres_rows(schema: &TestSchema) -> Vec<u8> {
    let output = std::process::Command::new("pg_dump")
        .args([
            "--data-only",
            "--schema",
            schema.name(),
            "--dbname",
            schema.url(),
        ])
        .output()
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.stdout.is_empty());
    output.stdout
}

#[test]
fn each_callers_run_uses_its_own_credential_and_none_is_kept() {
    two_callers_on_one_server(None);
}

#[test]
fn the_same_on_a_postgresql_ledger() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    two_callers_on_one_server(Some(&schema));
}

fn two_callers_on_one_server(schema: Option<&TestSchema>) {
    let sandbox = Sandbox::new();
    let ledger = schema.map(TestSchema::location_url);
    // The server has a value of its own, which it may not hand out.
    let server = Server::start(
        &sandbox,
        TOKEN,
        ledger.as_deref(),
        &["--server-connections", "none"],
        &[(KEY, SERVER_VALUE)],
    );
    let alice = Caller::new(&sandbox, "alice", &server.base, json!({}));
    let bob = Caller::new(&sandbox, "bob", &server.base, json!({"FAIL_ONCE": "1"}));

    // Both runs are on the server at once.
    let alice_run = alice.submit(&sandbox, Some(ALICE));
    let bob_run = bob.submit(&sandbox, Some(BOB));
    assert_eq!(alice.finish(&sandbox, &alice_run), "succeeded");
    assert_eq!(
        bob.finish(&sandbox, &bob_run),
        "failed",
        "bob's step fails once"
    );

    let alice_logs = alice.logs(&sandbox, &alice_run);
    let bob_logs = bob.logs(&sandbox, &bob_run);
    for (logs, own, other) in [(&alice_logs, ALICE, BOB), (&bob_logs, BOB, ALICE)] {
        assert!(logs.contains(&digest(own)), "own value seen: {logs}");
        assert!(!logs.contains(&digest(other)), "other value unseen: {logs}");
        assert!(!logs.contains(&digest(SERVER_VALUE)), "{logs}");
        assert!(logs.contains("value: [REDACTED] :end"), "masked: {logs}");
    }

    // Each caller kept a secret-free authorization of its run (a detached run's is kept until
    // a foreground `run` sees it succeed, or `discard-workspace` revokes it).
    assert!(alice.authorization(&alice_run).exists());
    let kept = std::fs::read_to_string(bob.authorization(&bob_run)).expect("bob's record");
    let record: Value = serde_json::from_str(&kept).expect("JSON");
    assert_eq!(record["variables"], json!([KEY]));
    assert_eq!(record["target"], "team");
    assert!(!kept.contains(BOB));

    // Resume without the value: the server has none it may use, and says which.
    let refused = bob.remote(&sandbox, &["resume", &bob_run, "--detach"], None);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains(KEY), "{}", refused.stderr);
    // From a machine that kept no authorization: nothing is read or sent.
    let stranger = Caller::new(&sandbox, "stranger", &server.base, json!({}));
    let refused = stranger.remote(&sandbox, &["resume", &bob_run, "--detach"], Some(BOB));
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused.stderr.contains("no authorization"),
        "{}",
        refused.stderr
    );

    // Resume sends bob's value again: the successor's step sees it.
    let resumed = bob
        .remote(&sandbox, &["resume", &bob_run, "--detach"], Some(BOB))
        .success();
    let successor = resumed.ndjson()[0]["runId"]
        .as_str()
        .expect("successor")
        .to_owned();
    assert_eq!(bob.finish(&sandbox, &successor), "succeeded");
    let successor_logs = bob.logs(&sandbox, &successor);
    assert!(successor_logs.contains(&digest(BOB)), "{successor_logs}");
    // The authorization moved to the successor.
    assert!(!bob.authorization(&bob_run).exists());
    assert!(bob.authorization(&successor).exists());

    // A caller that sends nothing is refused by name before any run exists.
    let missing = {
        let mut args: Vec<&str> = alice.args.iter().map(String::as_str).collect();
        args.push("--detach");
        alice.remote(&sandbox, &args, None)
    };
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert!(missing.stderr.contains(KEY), "{}", missing.stderr);

    // Discard revokes a kept authorization.
    let failed = Caller::new(&sandbox, "carol", &server.base, json!({"FAIL_ONCE": "1"}));
    let carol_run = failed.submit(&sandbox, Some(ALICE));
    assert_eq!(failed.finish(&sandbox, &carol_run), "failed");
    assert!(failed.authorization(&carol_run).exists());
    let discarded = failed
        .remote(&sandbox, &["discard-workspace", &carol_run], None)
        .success();
    assert_eq!(
        discarded.json()["authorizationRevoked"],
        true,
        "{discarded:?}"
    );
    assert!(!failed.authorization(&carol_run).exists());

    // No canary anywhere the server keeps or answers.
    let mut observed: Vec<(String, Vec<u8>)> = files_under(&sandbox.home);
    let served = support::serve::served_workspaces(&sandbox);
    observed.extend(files_under(&served));
    for run in [&alice_run, &bob_run, &successor, &carol_run] {
        for args in [
            vec!["status", run.as_str()],
            vec!["logs", run.as_str()],
            vec!["watch", run.as_str()],
        ] {
            let out = alice.remote(&sandbox, &args, None).success();
            observed.push((args.join(" "), out.stdout.into_bytes()));
        }
    }
    let listed = alice.remote(&sandbox, &["list"], None).success();
    observed.push(("list".into(), listed.stdout.into_bytes()));
    for caller in [&alice, &bob, &failed] {
        observed.extend(files_under(&caller.home));
    }
    observed.push(("server output".into(), server.kill().into_bytes()));
    if let Some(schema) = schema {
        observed.push(("the PostgreSQL ledger".into(), postgres_rows(schema)));
    }
    let mut leaks = Vec::new();
    for canary in [ALICE, BOB] {
        for (source, bytes) in &observed {
            if contains(bytes, canary.as_bytes()) {
                leaks.push(format!("{canary} in {source}"));
            }
        }
    }
    assert!(leaks.is_empty(), "leaked:\n{}", leaks.join("\n"));
    if schema.is_none() {
        let ledger = sandbox.home.join("ledger.sqlite3");
        assert!(ledger.exists(), "the ledger was searched");
    }
}

#[test]
fn the_server_supplies_what_it_allows_and_a_caller_value_wins() {
    let sandbox = Sandbox::new();
    let server = Server::start(&sandbox, TOKEN, None, &[], &[(KEY, SERVER_VALUE)]);
    let caller = Caller::new(&sandbox, "dave", &server.base, json!({}));
    // Nothing sent: the server's own value (its operator allows every variable by default).
    let run = caller.submit(&sandbox, None);
    assert_eq!(caller.finish(&sandbox, &run), "succeeded");
    assert!(caller.logs(&sandbox, &run).contains(&digest(SERVER_VALUE)));
    // Sent: the caller's value wins.
    let run = caller.submit(&sandbox, Some(ALICE));
    assert_eq!(caller.finish(&sandbox, &run), "succeeded");
    let logs = caller.logs(&sandbox, &run);
    assert!(logs.contains(&digest(ALICE)), "{logs}");
    assert!(!logs.contains(&digest(SERVER_VALUE)), "{logs}");
    server.kill();
}

/// A run carrying its caller's value whose controller dies is not taken over by its serving
/// host with the server's own value: it ends `runtime_lost`, and its caller resumes it.
#[test]
fn a_lost_run_is_resumed_by_its_caller_not_taken_over() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let sandbox = Sandbox::new();
    let ledger = schema.location_url();
    let server = Server::start(
        &sandbox,
        TOKEN,
        Some(&ledger),
        &[],
        &[(KEY, SERVER_VALUE), ("TRELLIS_CONTROLLER_LEASE_MS", "600")],
    );
    let caller = Caller::new(&sandbox, "erin", &server.base, json!({"GATE": "1"}));
    let run = caller.submit(&sandbox, Some(ALICE));
    let controller = wait_until("the controller to run", STATE_TIMEOUT, || {
        controller_pid(&run)
    });
    let served = support::serve::served_workspaces(&sandbox);
    let workspace = wait_until("the step to start", STATE_TIMEOUT, || {
        std::fs::read_dir(&served)
            .ok()?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| path.join("started").exists())
    });
    send_signal(controller, Signal::SIGKILL);
    let status: Value = wait_until("the serving host to end the run", STATE_TIMEOUT, || {
        let status = caller
            .remote(&sandbox, &["status", &run], None)
            .success()
            .json();
        (status["status"]["phase"] == "finished").then_some(status)
    });
    assert_eq!(
        status["status"]["terminalResult"],
        json!({"status": "failed", "reason": "runtime_lost"})
    );
    assert!(
        controller_pid(&run).is_none(),
        "a controller of the lost run was started again"
    );
    // The dead controller's step ends once its gate opens.
    std::fs::write(workspace.join("open"), b"").expect("open the gate");
    let logs = caller.logs(&sandbox, &run);
    assert!(!logs.contains(&digest(SERVER_VALUE)), "{logs}");

    let resumed = caller
        .remote(&sandbox, &["resume", &run, "--detach"], Some(ALICE))
        .success();
    let successor = resumed.ndjson()[0]["runId"]
        .as_str()
        .expect("successor")
        .to_owned();
    assert_eq!(caller.finish(&sandbox, &successor), "succeeded");
    let logs = caller.logs(&sandbox, &successor);
    assert!(logs.contains(&digest(ALICE)), "{logs}");
    assert!(!logs.contains(&digest(SERVER_VALUE)), "{logs}");
    // No controller ever drove the lost run with the server's environment.
    let output = server.kill();
    assert!(output.contains("instead of taking it over"), "{output}");
    assert!(!output.contains("taking over run"), "{output}");
}
