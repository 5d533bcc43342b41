//! Bad input to the real binary: each mistake is one clear line on stderr with the documented
//! exit code (1 for command errors, 2 for usage errors), and nothing is written.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::graph::*;
use support::{CliOutput, Sandbox, python, uniform_worker_plan};

/// Asserts a command error: exit 1, nothing on stdout, one `trellis: error:` line containing
/// every one of `phrases`.
fn assert_one_line_error(output: &CliOutput, phrases: &[&str]) {
    assert_eq!(output.code, Some(1), "{output:#?}");
    assert!(output.stdout.trim().is_empty(), "{output:#?}");
    let lines = output.stderr_lines();
    assert_eq!(lines.len(), 1, "exactly one line: {output:#?}");
    assert!(lines[0].starts_with("trellis: error: "), "{output:#?}");
    for phrase in phrases {
        assert!(lines[0].contains(phrase), "{phrase:?} in {output:#?}");
    }
}

/// Asserts the state directory holds no run: none in the ledger, no run directory.
fn assert_no_run(sandbox: &Sandbox) {
    let runs_dir = sandbox.home.join("runs");
    if let Ok(entries) = std::fs::read_dir(&runs_dir) {
        let left: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        assert!(left.is_empty(), "run directories were left: {left:?}");
    }
    let listed = sandbox.trellis(&["list", "--json"]).success().json();
    assert_eq!(listed, json!({"runs": []}));
    assert!(sandbox.invocations().is_empty(), "no worker ran");
}

fn run_with(sandbox: &Sandbox, input: &Value, plan_flag: &str, plan_text: &str) -> CliOutput {
    let graph = sandbox.write_json("graph.json", &doubling_graph());
    let input = sandbox.write_json("input.json", input);
    let plan = sandbox.workspace.join("plan.json");
    std::fs::write(&plan, plan_text).expect("write plan");
    let plan = plan.to_str().expect("UTF-8").to_owned();
    sandbox.trellis(&["run", &graph, "--input", &input, plan_flag, &plan, "--json"])
}

fn good_plan() -> String {
    uniform_worker_plan(&[]).to_string()
}

#[test]
fn a_plan_that_is_not_json_is_refused() {
    let sandbox = Sandbox::new();
    let output = run_with(
        &sandbox,
        &json!({"value": 1}),
        "--uniform-runtime-config",
        r#"{"kind":"command","command":"#,
    );
    assert_one_line_error(&output, &["uniform runtime config", "plan.json"]);
    assert_no_run(&sandbox);
}

#[test]
fn a_plan_with_an_unknown_field_is_refused() {
    let sandbox = Sandbox::new();
    let output = run_with(
        &sandbox,
        &json!({"value": 1}),
        "--uniform-runtime-config",
        r#"{"kind":"command","command":["true"],"shell":true}"#,
    );
    assert_one_line_error(&output, &["shell"]);
    assert_no_run(&sandbox);
}

#[test]
fn a_plan_missing_a_binding_is_refused() {
    let sandbox = Sandbox::new();
    let output = run_with(
        &sandbox,
        &json!({"value": 1}),
        "--runtime-config",
        r#"{"nodes":{}}"#,
    );
    assert_one_line_error(&output, &["double", "no binding"]);
    assert_no_run(&sandbox);
}

#[test]
fn input_that_does_not_match_the_initial_input_is_refused() {
    let sandbox = Sandbox::new();
    let output = run_with(
        &sandbox,
        &json!({"value": "twenty-one"}),
        "--uniform-runtime-config",
        &good_plan(),
    );
    assert_one_line_error(&output, &["initialInput", "$.value"]);
    assert_no_run(&sandbox);

    let missing = run_with(
        &sandbox,
        &json!({}),
        "--uniform-runtime-config",
        &good_plan(),
    );
    assert_one_line_error(&missing, &["initialInput", "value"]);
    assert_no_run(&sandbox);
}

#[test]
fn a_review_template_given_a_task_is_refused() {
    let sandbox = Sandbox::new();
    for template in ["issue-review", "pr-review"] {
        let output = sandbox.trellis(&[
            "run",
            "--template",
            template,
            "--task",
            "review it",
            "--json",
        ]);
        assert_one_line_error(
            &output,
            &[template, "GitHub issue or pull request", "--input FILE"],
        );
    }
    assert_no_run(&sandbox);
}

#[test]
fn an_unknown_run_id_is_refused_by_every_run_command() {
    let sandbox = Sandbox::new();
    let unknown = "01a229f6-f791-7144-841c-2b885e31093f";
    for command in ["status", "watch", "logs", "force-stop", "resume"] {
        let output = sandbox.trellis(&[command, unknown]);
        assert_one_line_error(&output, &[unknown, "not found"]);
    }
    assert_no_run(&sandbox);
}

#[test]
fn usage_errors_exit_2() {
    let sandbox = Sandbox::new();
    for args in [
        &["run", "graph.json", "--no-such-flag"][..],
        &["status"][..],
        &[
            "run",
            "graph.json",
            "--runtime-config",
            "a.json",
            "--uniform-runtime-config",
            "b.json",
        ][..],
        &["no-such-command"][..],
    ] {
        let output = sandbox.trellis(args);
        assert_eq!(output.code, Some(2), "{args:?}: {output:#?}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:#?}");
        let first = output.stderr_lines().first().copied().unwrap_or_default();
        assert!(first.starts_with("error: "), "{args:?}: {output:#?}");
    }
    assert!(!sandbox.home.exists(), "usage errors touch no state");
}

/// Random bytes where the ledger should be.
fn garbage() -> Vec<u8> {
    // A fixed xorshift stream: arbitrary, but the same on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..16_384)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn a_corrupted_ledger_is_reported_and_left_alone() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(&sandbox.home).expect("home");
    let ledger = sandbox.home.join("ledger.sqlite3");
    std::fs::write(&ledger, garbage()).expect("garbage");

    let graph = sandbox.write_json("graph.json", &doubling_graph());
    let input = sandbox.write_json("input.json", &json!({"value": 1}));
    let plan = sandbox.write_json("plan.json", &uniform_worker_plan(&[]));
    let run_id = "01a229f6-f791-7144-841c-2b885e31093f";
    let attempts: [&[&str]; 3] = [
        &[
            "run",
            &graph,
            "--input",
            &input,
            "--uniform-runtime-config",
            &plan,
            "--json",
        ],
        &["list"],
        &["status", run_id],
    ];
    for args in attempts {
        let output = sandbox.trellis(args);
        assert_one_line_error(&output, &["ledger", "not a Trellis ledger"]);
    }
    assert_eq!(
        std::fs::read(&ledger).expect("ledger"),
        garbage(),
        "untouched"
    );
    assert!(sandbox.invocations().is_empty());
    let runs: Vec<_> = std::fs::read_dir(sandbox.home.join("runs"))
        .map(|d| d.filter_map(Result::ok).collect())
        .unwrap_or_default();
    assert!(runs.is_empty(), "no run directory: {runs:?}");
}

/// A Python process holding the ledger's write lock until its stdin closes.
const HOLD_WRITE_LOCK: &str = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")
db.execute("CREATE TABLE IF NOT EXISTS test_lock_holder (x)")
print("locked", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
"#;

#[test]
fn a_locked_ledger_is_reported_busy_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    // Create the ledger first, as any earlier command would.
    sandbox.trellis(&["list"]).success();
    let ledger = sandbox.home.join("ledger.sqlite3");
    let mut holder = Command::new(python())
        .args(["-c", HOLD_WRITE_LOCK])
        .arg(&ledger)
        .current_dir(&sandbox.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the lock holder");
    let mut ready = String::new();
    BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("lock holder output");
    assert_eq!(ready.trim(), "locked");

    let graph = sandbox.write_json("graph.json", &doubling_graph());
    let input = sandbox.write_json("input.json", &json!({"value": 1}));
    let plan = sandbox.write_json("plan.json", &uniform_worker_plan(&[]));
    // A short wait: the default (30 s) outlasts any brief holder, which the run waits out.
    let output = sandbox.trellis_with_env(
        &[
            "run",
            &graph,
            "--input",
            &input,
            "--uniform-runtime-config",
            &plan,
            "--json",
        ],
        &[("TRELLIS_LEDGER_BUSY_TIMEOUT_MS", "400")],
    );
    let mut stdin = holder.stdin.take().expect("stdin");
    stdin.write_all(b"done\n").expect("release");
    drop(stdin);
    let released = holder.wait().expect("lock holder exits");
    assert!(released.success());

    assert_one_line_error(&output, &["ledger is busy"]);
    assert_no_run(&sandbox);
}

/// Issue 19 #5: a writer that holds the ledger for a while is waited out (it used to fail the
/// run with "the ledger is busy" after 5 s; concurrent runs hit that).
#[test]
fn a_run_waits_out_a_brief_write_lock_and_succeeds() {
    let sandbox = Sandbox::new();
    sandbox.trellis(&["list"]).success();
    let ledger = sandbox.home.join("ledger.sqlite3");
    let holder = Command::new(python())
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             db = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             db.execute('BEGIN IMMEDIATE')\n\
             print('locked', flush=True)\n\
             time.sleep(6)\n\
             db.execute('ROLLBACK')\n",
        ])
        .arg(&ledger)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the lock holder");
    let mut holder = holder;
    let mut ready = String::new();
    BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("lock holder output");
    assert_eq!(ready.trim(), "locked");

    let output = run_with(
        &sandbox,
        &json!({"value": 21}),
        "--uniform-runtime-config",
        &good_plan(),
    );
    assert!(holder.wait().expect("lock holder exits").success());
    assert_eq!(output.code, Some(0), "{output:#?}");
    let lines = output.ndjson();
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}})
    );
}

#[test]
fn a_ledger_with_damaged_pages_is_reported_corrupt_and_left_alone() {
    let sandbox = Sandbox::new();
    let args = [
        "run".to_owned(),
        sandbox.write_json("graph.json", &doubling_graph()),
        "--input".to_owned(),
        sandbox.write_json("input.json", &json!({"value": 1})),
        "--uniform-runtime-config".to_owned(),
        sandbox.write_json("plan.json", &uniform_worker_plan(&[])),
        "--json".to_owned(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run_id = sandbox.trellis(&args).success().ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();
    let ledger = sandbox.home.join("ledger.sqlite3");
    let checkpoint = Command::new(python())
        .args([
            "-c",
            "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')",
        ])
        .arg(&ledger)
        .status()
        .expect("checkpoint");
    assert!(checkpoint.success());
    // Keep the first page (header and schema), damage every table and index page.
    let mut bytes = std::fs::read(&ledger).expect("ledger");
    assert!(bytes.len() > 4096, "the ledger has more than one page");
    bytes[4096..].fill(0x5a);
    std::fs::write(&ledger, &bytes).expect("damage");

    for args in [&["status", &run_id][..], &["list"][..], &args[..]] {
        let output = sandbox.trellis(args);
        assert_one_line_error(&output, &["ledger", "corrupt"]);
    }
    assert_eq!(std::fs::read(&ledger).expect("ledger"), bytes, "untouched");
    assert_eq!(
        sandbox.invocations(),
        ["double"],
        "only the first run's worker ran"
    );
}

/// A variable no test environment sets.
const CONNECTION: &str = "TRELLIS_TEST_UNSET_CONNECTION";

/// Issue 19 #10: a command binding's connection variable that is not set would have let the
/// worker run without it; admission refuses, naming the variable.
#[test]
fn a_command_connection_missing_from_the_environment_is_refused_before_any_run() {
    let sandbox = Sandbox::new();
    let mut plan = uniform_worker_plan(&[]);
    plan["connections"] = json!([CONNECTION]);
    let output = run_with(
        &sandbox,
        &json!({"value": 1}),
        "--uniform-runtime-config",
        &plan.to_string(),
    );
    assert_one_line_error(&output, &[CONNECTION, "double", "not set"]);
    assert_no_run(&sandbox);
}

/// Issue 19 #10, on `resume`: the successor is admitted again in the resuming shell.
#[test]
fn resume_refuses_when_a_connection_variable_is_gone() {
    let sandbox = Sandbox::new();
    let plan = json!({"kind": "command", "command": ["false"], "connections": [CONNECTION]});
    let args = sandbox.run_args(&doubling_graph(), &json!({"value": 1}), &plan);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = sandbox.trellis_with_env(&args, &[(CONNECTION, "present")]);
    assert_eq!(first.code, Some(1), "the worker fails: {first:#?}");
    let run = first.ndjson()[0]["runId"]
        .as_str()
        .expect("receipt")
        .to_owned();

    let output = sandbox.trellis(&["resume", &run, "--json"]);
    assert_one_line_error(&output, &[CONNECTION, "not set"]);
    assert!(
        sandbox.status(&run).get("successor").is_none(),
        "no successor"
    );
}

/// Issue 19 #14: a workspace that is a file (or missing) is refused before the run exists,
/// instead of leaving a `runtime_lost` run behind.
#[test]
fn a_workspace_that_is_not_a_directory_is_refused_before_any_run() {
    let sandbox = Sandbox::new();
    let file = sandbox.write_json("not-a-dir.json", &json!({}));
    let missing = sandbox.workspace.join("no-such-dir");
    let missing = missing.to_str().expect("UTF-8");
    for (cwd, phrase) in [
        (file.as_str(), "is not a directory"),
        (missing, "does not exist"),
    ] {
        let mut args = sandbox.run_args(
            &doubling_graph(),
            &json!({"value": 1}),
            &uniform_worker_plan(&[]),
        );
        args.extend(["--cwd".to_owned(), cwd.to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = sandbox.trellis(&args);
        assert_one_line_error(&output, &["workspace", cwd, phrase]);
        assert_no_run(&sandbox);
    }
}

/// Issue 19 #17: a plan whose command runs outside the workspace is refused at admission
/// (it used to pass, then crash at run time with its reason only in a debug log line).
#[test]
fn a_plan_with_an_absolute_command_cwd_is_refused_before_any_run() {
    let sandbox = Sandbox::new();
    let mut plan = uniform_worker_plan(&[]);
    plan["cwd"] = json!("/tmp");
    let output = run_with(
        &sandbox,
        &json!({"value": 1}),
        "--uniform-runtime-config",
        &plan.to_string(),
    );
    assert_one_line_error(
        &output,
        &["double", "/tmp", "relative path inside the workspace"],
    );
    assert_no_run(&sandbox);
}

/// A JSON reader of stdout always gets one object: `validate --json` of a directory or a
/// missing file says `error` with its code, `run --validate-only --json` of a rejected graph
/// gives the diagnostics as `validate --json` does. The error still reaches stderr.
#[test]
fn json_readers_get_an_object_for_unreadable_graphs_and_rejections() {
    let sandbox = Sandbox::new();
    let directory = sandbox.workspace.join("not-a-workflow");
    std::fs::create_dir_all(&directory).expect("dir");
    let missing = sandbox.workspace.join("missing.json");
    for path in [&directory, &missing] {
        let output = sandbox.trellis(&["validate", "--json", path.to_str().expect("UTF-8")]);
        assert_eq!(output.code, Some(1), "{output:#?}");
        let answer = output.json();
        assert_eq!(answer["status"], "error", "{output:#?}");
        assert_eq!(answer["code"], "admission.unreadable", "{output:#?}");
        assert!(output.stderr.contains("trellis: error:"), "{output:#?}");
    }

    let state = record(&[("value", integer(), true), ("result", integer(), false)]);
    let rejected = graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![step(
                "double",
                record(&[("value", integer(), true)]),
                record(&[("result", integer(), true)]),
                &[("value", state_path(&["nowhere"]))],
                &[("result", "result")],
            )],
            &[],
        ),
    );
    let graph_file = sandbox.write_json("rejected.json", &rejected);
    let input = sandbox.write_json("input.json", &json!({"value": 2}));
    let plan = sandbox.write_json("plan.json", &uniform_worker_plan(&[]));
    let output = sandbox.trellis(&[
        "run",
        &graph_file,
        "--input",
        &input,
        "--uniform-runtime-config",
        &plan,
        "--validate-only",
        "--json",
    ]);
    assert_eq!(output.code, Some(1), "{output:#?}");
    let answer = output.json();
    assert_eq!(answer["status"], "rejected", "{output:#?}");
    let diagnostics = answer["diagnostics"].as_array().expect("diagnostics");
    assert!(!diagnostics.is_empty(), "{output:#?}");
    assert!(output.stderr.contains("rejected"), "{output:#?}");
    assert_no_run(&sandbox);
}
