//! Hardening: a catalogue of bad inputs through the real binary — graph, input and plan files,
//! damaged ledgers, misbehaving workers. Each gets its exact one-line error and exit code, no
//! panic, and (before a run exists) no trace in the state directory.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::graph::*;
use support::{CliOutput, Sandbox, python, uniform_worker_plan};

/// A mistake and what `trellis` must answer.
struct Case {
    name: &'static str,
    /// Prepares the sandbox and returns the arguments of the command to try.
    setup: fn(&Sandbox) -> Vec<String>,
    /// The exit code.
    code: i32,
    /// The one stderr line (a rejection report: its lines), `{ws}` standing for the workspace, `{home}` for the state
    /// directory and `{last}` for the command's last argument.
    line: &'static str,
}

fn path_in(sandbox: &Sandbox, name: &str) -> String {
    sandbox
        .workspace
        .join(name)
        .to_str()
        .expect("UTF-8")
        .to_owned()
}

fn write_bytes(sandbox: &Sandbox, name: &str, bytes: &[u8]) -> String {
    let path = path_in(sandbox, name);
    std::fs::write(&path, bytes).expect("write");
    path
}

/// `run GRAPH --input INPUT --uniform-runtime-config PLAN --json` with good documents except
/// the ones given.
fn run_of(
    sandbox: &Sandbox,
    graph: Option<String>,
    input: Option<String>,
    plan: Option<String>,
) -> Vec<String> {
    let graph = graph.unwrap_or_else(|| sandbox.write_json("graph.json", &doubling_graph()));
    let input = input.unwrap_or_else(|| sandbox.write_json("input.json", &json!({"value": 1})));
    let plan = plan.unwrap_or_else(|| sandbox.write_json("plan.json", &uniform_worker_plan(&[])));
    [
        "run",
        &graph,
        "--input",
        &input,
        "--uniform-runtime-config",
        &plan,
        "--json",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn plan_with(sandbox: &Sandbox, change: impl FnOnce(&mut Value)) -> Option<String> {
    let mut plan = uniform_worker_plan(&[]);
    change(&mut plan);
    Some(sandbox.write_json("plan.json", &plan))
}

/// A ledger made by one successful run, then changed by `sql` (Python's sqlite3).
fn ledger_changed_by(sandbox: &Sandbox, sql: &str) {
    let args = run_of(sandbox, None, None, None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sandbox.trellis(&args).success();
    let status = std::process::Command::new(python())
        .args([
            "-c",
            "import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.executescript(sys.argv[2])\ndb.commit()\n",
        ])
        .arg(sandbox.home.join("ledger.sqlite3"))
        .arg(sql)
        .status()
        .expect("python");
    assert!(status.success());
}

fn file_cases() -> Vec<Case> {
    vec![
        Case {
            name: "graph file missing",
            setup: |s| run_of(s, Some(path_in(s, "none.json")), None, None),
            code: 1,
            line: "trellis: error: cannot read graph {ws}/none.json: No such file or directory (os error 2)",
        },
        Case {
            name: "graph is a directory without workflow.json",
            setup: |s| {
                std::fs::create_dir_all(s.workspace.join("dir")).expect("dir");
                run_of(s, Some(path_in(s, "dir")), None, None)
            },
            code: 1,
            line: "trellis: error: cannot read graph {ws}/dir: it is a directory without workflow.json; pass a graph file or a GaP workflow directory",
        },
        Case {
            name: "graph is a device",
            setup: |s| run_of(s, Some("/dev/zero".to_owned()), None, None),
            code: 1,
            line: "trellis: error: graph /dev/zero gave more than 16 MiB (it is not a regular file); the limit is 16 MiB",
        },
        Case {
            name: "graph is not UTF-8",
            setup: |s| {
                run_of(
                    s,
                    Some(write_bytes(s, "g.json", b"{\"a\": \"\xff\"}")),
                    None,
                    None,
                )
            },
            code: 1,
            line: "trellis: error: graph {ws}/g.json: it is not UTF-8 text (invalid bytes at offset 7)",
        },
        Case {
            name: "graph is over 16 MiB",
            setup: |s| {
                let path = path_in(s, "big.json");
                std::fs::File::create(&path)
                    .and_then(|f| f.set_len(16 * 1024 * 1024 + 1))
                    .expect("big");
                run_of(s, Some(path), None, None)
            },
            code: 1,
            line: "trellis: error: graph {ws}/big.json is 16777217 bytes; the limit is 16 MiB",
        },
        Case {
            name: "graph is not JSON",
            setup: |s| {
                run_of(
                    s,
                    Some(write_bytes(s, "g.json", b"{\"profile\": ")),
                    None,
                    None,
                )
            },
            code: 1,
            line: "trellis: error: graph {ws}/g.json: does not parse: invalid JSON: EOF while parsing a value at line 1 column 12 at $",
        },
        Case {
            name: "graph repeats a key",
            setup: |s| {
                run_of(
                    s,
                    Some(write_bytes(s, "g.json", b"{\"a\": 1, \"a\": 2}")),
                    None,
                    None,
                )
            },
            code: 1,
            line: "trellis: error: graph {ws}/g.json: does not parse: invalid JSON: duplicate field `a` at line 1 column 16 at $",
        },
        Case {
            name: "graph is JSON but not a graph",
            setup: |s| run_of(s, Some(write_bytes(s, "g.json", b"[1, 2, 3]")), None, None),
            code: 1,
            line: "trellis: error: {ws}/g.json: invalid type: sequence, expected struct GraphSpec at $",
        },
        Case {
            name: "input file missing",
            setup: |s| run_of(s, None, Some(path_in(s, "none.json")), None),
            code: 1,
            line: "trellis: error: cannot read input {ws}/none.json: No such file or directory (os error 2)",
        },
        Case {
            name: "input is not JSON",
            setup: |s| run_of(s, None, Some(write_bytes(s, "i.json", b"{value: 1}")), None),
            code: 1,
            line: "trellis: error: input {ws}/i.json: invalid JSON: key must be a string at line 1 column 2 at $",
        },
        Case {
            name: "input is a device",
            setup: |s| run_of(s, None, Some("/dev/zero".to_owned()), None),
            code: 1,
            line: "trellis: error: input /dev/zero gave more than 16 MiB (it is not a regular file); the limit is 16 MiB",
        },
        Case {
            name: "input of the wrong type",
            setup: |s| {
                run_of(
                    s,
                    None,
                    Some(s.write_json("i.json", &json!({"value": "one"}))),
                    None,
                )
            },
            code: 1,
            line: "trellis: error: initial input does not match GraphSpec.initialInput: $.value must be a integer",
        },
        Case {
            name: "plan is not JSON",
            setup: |s| {
                run_of(
                    s,
                    None,
                    None,
                    Some(write_bytes(s, "p.json", b"{\"kind\": ")),
                )
            },
            code: 1,
            line: "trellis: error: uniform runtime config {ws}/p.json: invalid JSON: EOF while parsing a value at line 1 column 9 at $",
        },
        Case {
            name: "plan has an unknown field",
            setup: |s| run_of(s, None, None, plan_with(s, |p| p["shell"] = json!(true))),
            code: 1,
            line: "trellis: error: runtime plan is not valid JSON for its shape: unknown field `shell`, expected one of `kind`, `command`, `cwd`, `env`, `connections`, `idleTimeoutMs`, `size`, `budget`, `isolation`, `network`",
        },
        Case {
            name: "plan command is empty",
            setup: |s| run_of(s, None, None, plan_with(s, |p| p["command"] = json!([]))),
            code: 1,
            line: "trellis: error: node double: command must name a program",
        },
        Case {
            name: "plan runs outside the workspace",
            setup: |s| run_of(s, None, None, plan_with(s, |p| p["cwd"] = json!("/"))),
            code: 1,
            line: "trellis: error: node double: command cwd \"/\" must be a relative path inside the workspace",
        },
        Case {
            name: "plan names an unset connection",
            setup: |s| {
                run_of(
                    s,
                    None,
                    None,
                    plan_with(s, |p| p["connections"] = json!(["TRELLIS_CATALOGUE_UNSET"])),
                )
            },
            code: 1,
            line: "trellis: error: node double declares the connection variable TRELLIS_CATALOGUE_UNSET, which is not set in the environment",
        },
    ]
}

/// A GaP workflow directory holding `text` as its `workflow.json`; `run` arguments for it.
fn gap_run(sandbox: &Sandbox, text: &[u8]) -> Vec<String> {
    let dir = sandbox.workspace.join("flow");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("workflow.json"), text).expect("workflow");
    vec![
        "run".to_owned(),
        path_in(sandbox, "flow"),
        "--json".to_owned(),
    ]
}

fn gap_cases() -> Vec<Case> {
    vec![
        Case {
            name: "GaP workflow is not JSON",
            setup: |s| gap_run(s, b"{\"version\": 3, "),
            code: 1,
            line: "trellis: error: {ws}/flow/workflow.json: invalid JSON: EOF while parsing a value at line 1 column 15",
        },
        Case {
            name: "GaP workflow has an unknown key",
            setup: |s| {
                gap_run(
                    s,
                    br#"{"version": 3, "nodes": {}, "edges": [], "extra": 1}"#,
                )
            },
            code: 1,
            line: "trellis: error: {ws}/flow/workflow.json: workflow root has unknown fields ['extra']; allowed: ['conditional_edges', 'edges', 'meta', 'nodes', 'subgraphs', 'version']",
        },
        Case {
            name: "GaP subgraph refers to itself",
            setup: |s| {
                gap_run(
                    s,
                    br#"{"version": 3, "meta": {},
                        "nodes": {"sg": {"type": "subgraph", "ref": "loop"},
                                  "done": {"type": "end", "status": "success"}},
                        "edges": [["START", "sg"], ["sg", "done"]],
                        "subgraphs": {"loop": {"skill": "generic", "inputs": {}, "outputs": {},
                            "nodes": {"inner": {"type": "subgraph", "ref": "loop"}},
                            "edges": [["START", "inner"]],
                            "exit": {"router_field": "exit", "success_values": ["ok"]}}}}"#,
                )
            },
            code: 1,
            line: "✗ workflow {ws}/flow is rejected\n\
                   [error] subgraphs.loop.nodes.inner: non-streaming node 'inner' has no outgoing edge or conditional dispatch\n\
                   [error] subgraphs.loop.nodes.inner: subgraph node 'inner' references 'loop', closing the subgraph cycle loop → loop; a subgraph cannot contain itself (W9)\n\
                   FAIL: 2 error(s), 0 warning(s)",
        },
        Case {
            name: "GaP inputs file is a device",
            setup: |s| {
                let mut args = gap_run(
                    s,
                    br#"{"version": 3, "meta": {},
                        "nodes": {"done": {"type": "end", "status": "success"}},
                        "edges": [["START", "done"]]}"#,
                );
                args.extend(["--inputs".to_owned(), "/dev/zero".to_owned()]);
                args
            },
            code: 1,
            line: "trellis: error: cannot read inputs file /dev/zero: it is larger than 16 MiB",
        },
    ]
}

fn ledger_cases() -> Vec<Case> {
    vec![
        Case {
            name: "ledger is random bytes",
            setup: |s| {
                std::fs::create_dir_all(&s.home).expect("home");
                std::fs::write(s.home.join("ledger.sqlite3"), [0x5a_u8; 8192]).expect("ledger");
                vec!["list".to_owned()]
            },
            code: 1,
            line: "trellis: error: cannot open the ledger {home}/ledger.sqlite3: the file is not a Trellis ledger: the file is not an SQLite database",
        },
        Case {
            name: "ledger path is a directory",
            setup: |s| {
                std::fs::create_dir_all(s.home.join("ledger.sqlite3")).expect("dir");
                vec!["list".to_owned()]
            },
            code: 1,
            line: "trellis: error: cannot open the ledger {home}/ledger.sqlite3: the file is not a Trellis ledger: the ledger path is not a regular file",
        },
        Case {
            name: "ledger from a newer build",
            setup: |s| {
                ledger_changed_by(s, "PRAGMA user_version = 99;");
                vec!["list".to_owned()]
            },
            code: 1,
            line: "trellis: error: cannot open the ledger {home}/ledger.sqlite3: the ledger schema version 99 is newer than this build supports (4); upgrade trellis",
        },
        Case {
            name: "another application's database",
            setup: |s| {
                ledger_changed_by(s, "PRAGMA application_id = 7;");
                vec!["list".to_owned()]
            },
            code: 1,
            line: "trellis: error: cannot open the ledger {home}/ledger.sqlite3: the file is not a Trellis ledger: the database belongs to another application",
        },
        Case {
            name: "a run's events are damaged",
            setup: |s| {
                ledger_changed_by(s, "UPDATE run_events SET event_json = 'x';");
                let run = s.trellis(&["list", "--json"]).success().json()["runs"][0]["runId"]
                    .as_str()
                    .expect("run")
                    .to_owned();
                vec!["watch".to_owned(), run]
            },
            code: 1,
            line: "trellis: error: the ledger database is corrupt: stored event 1 of run {last} is invalid",
        },
    ]
}

/// The line expected for `case`, with the sandbox's paths filled in.
fn expected_line(case: &Case, sandbox: &Sandbox, args: &[String]) -> String {
    case.line
        .replace("{ws}", sandbox.workspace.to_str().expect("UTF-8"))
        .replace("{home}", sandbox.home.to_str().expect("UTF-8"))
        .replace("{last}", args.last().map_or("", String::as_str))
}

/// Tries every case in a sandbox of its own; collects every mismatch before failing.
fn check(cases: Vec<Case>) {
    let mut mismatches = Vec::new();
    for case in &cases {
        let sandbox = Sandbox::new();
        let owned = (case.setup)(&sandbox);
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        let output = sandbox.trellis(&args);
        let lines = output.stderr_lines();
        let expected = expected_line(case, &sandbox, &owned);
        // A rejection report (a GaP workflow's issues) is the one multi-line answer.
        let fine = output.code == Some(case.code)
            && lines.join("\n") == expected
            && output.stdout.trim().is_empty()
            && !output.stderr.contains("panicked");
        if !fine {
            mismatches.push(format!(
                "{}: {output:#?}\n  expected: {expected}",
                case.name
            ));
        }
        assert_no_trace(&sandbox, case, &output);
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

/// Before a run exists nothing may be left: no run directory, no worker started.
fn assert_no_trace(sandbox: &Sandbox, case: &Case, output: &CliOutput) {
    let runs = sandbox.home.join("runs");
    let left: Vec<_> = std::fs::read_dir(&runs)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    let before = left.len();
    let allowed = usize::from(
        case.name.starts_with("a run's")
            || case.name.contains("ledger from")
            || case.name.contains("another application"),
    );
    assert!(
        before <= allowed,
        "{}: run directories left {left:?}\n{output:#?}",
        case.name
    );
    let invocations = Path::new(&sandbox.workspace).join("invocations.log");
    let ran = std::fs::read_to_string(invocations)
        .unwrap_or_default()
        .lines()
        .count();
    assert!(ran <= allowed, "{}: a worker ran\n{output:#?}", case.name);
}

#[test]
fn bad_files_inputs_and_plans_get_their_exact_one_line_error() {
    check(file_cases());
}

#[test]
fn bad_gap_workflows_get_their_exact_one_line_error() {
    check(gap_cases());
}

#[test]
fn damaged_ledgers_get_their_exact_one_line_error() {
    check(ledger_cases());
}

/// State `{value}`: `node` runs, then the run succeeds unless it failed (`worker_failed`).
fn one_step(node: Value) -> Value {
    let state = record(&[("value", integer(), true)]);
    let name = node["name"].as_str().expect("name").to_owned();
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                node,
                unless_failed(&name, &state, succeed("done", null(), &[])),
            ],
            &[],
        ),
    )
}

/// Misbehaving workers (a refusal, a crash, a reply that is not JSON, one past its deadline):
/// the run ends `worker_failed`, exit 1, with the execution's exact error channel, no panic.
#[test]
fn misbehaving_workers_fail_their_step_with_the_exact_error() {
    let cases = [
        ("refuseWork", "refusal"),
        ("crashWork", "crash"),
        ("garbleWork", "malformed"),
        ("slowWork", "timeout"),
    ];
    for (node, channel) in cases {
        let sandbox = Sandbox::new();
        let step = with_timeout(step(node, null(), null(), &[], &[]), 1_500);
        let args = sandbox.run_args(
            &one_step(step),
            &json!({"value": 1}),
            &uniform_worker_plan(&[]),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = sandbox.trellis(&args);
        assert_eq!(output.code, Some(1), "{node}: {output:#?}");
        assert!(!output.stderr.contains("panicked"), "{node}: {output:#?}");
        let lines = output.ndjson();
        let run = lines[0]["runId"].as_str().expect("receipt").to_owned();
        assert_eq!(
            lines.last().expect("events")["status"]["terminalResult"],
            json!({"status": "failed", "reason": "worker_failed"}),
            "{node}"
        );
        let status = sandbox.status(&run);
        assert_eq!(
            status["executions"][0]["outcome"],
            json!({"status": "error", "code": channel}),
            "{node}: {status}"
        );
        sandbox.wait_no_processes();
    }
}
