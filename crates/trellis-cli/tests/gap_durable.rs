//! Durable GaP runs through the CLI: a detached run is watched, logged, force-stopped and
//! resumed (the interrupted script runs again with a note, the settled one does not), and the
//! values of `--secret-env` variables never reach the ledger.

mod support;

use serde_json::{Value, json};
use support::{STATE_TIMEOUT, Sandbox, wait_until};
use trellis_ledger::{RunId, RunStore, SqliteStore};

/// `first` appends its name to the effects file; `slow` too, then sleeps 60 s the first time
/// it runs (no earlier `slow` line) and returns at once afterwards; `last` returns `v + 1`.
const SCRIPTS: [(&str, &str); 3] = [
    (
        "first.py",
        r#"
def run(ctx, effects):
    with open(effects, "a") as out:
        out.write("first\n")
    return {"v": 1}
"#,
    ),
    (
        "slow.py",
        r#"
import time


def run(ctx, effects, v):
    with open(effects) as seen:
        again = "slow" in seen.read().split()
    with open(effects, "a") as out:
        out.write("slow\n")
    if not again:
        time.sleep(60)
    return {"v": v + 10}
"#,
    ),
    (
        "last.py",
        r#"
import os


def run(ctx, effects, v):
    with open(effects, "a") as out:
        out.write("last\n")
    token = os.environ.get("GAP_TEST_CANARY", "")
    print("the token is", token)
    return {"v": v + 1, "token": token}
"#,
    ),
];

fn script_node(name: &str, inputs: Value) -> Value {
    let mut all = json!({"effects": {"$ref": "in.effects"}});
    for (key, value) in inputs.as_object().expect("object") {
        all[key] = value.clone();
    }
    json!({"type": "script", "script": format!("scripts/{name}.py"), "inputs": all})
}

/// Writes `first → slow → last → done` (or `first → last → done` without `slow`).
fn workflow_args(sandbox: &Sandbox, with_slow: bool) -> Vec<String> {
    let dir = sandbox.workspace.join("policy");
    std::fs::create_dir_all(dir.join("scripts")).expect("dir");
    for (file, text) in SCRIPTS {
        std::fs::write(dir.join("scripts").join(file), text).expect("script");
    }
    let (nodes, edges) = if with_slow {
        (
            json!({
                "first": script_node("first", json!({})),
                "slow": script_node("slow", json!({"v": {"$ref": "first.v"}})),
                "last": script_node("last", json!({"v": {"$ref": "slow.v"}})),
                "done": {"type": "end", "status": "success"}}),
            json!([
                ["START", "first"],
                ["first", "slow"],
                ["slow", "last"],
                ["last", "done"]
            ]),
        )
    } else {
        (
            json!({
                "first": script_node("first", json!({})),
                "last": script_node("last", json!({"v": {"$ref": "first.v"}})),
                "done": {"type": "end", "status": "success"}}),
            json!([["START", "first"], ["first", "last"], ["last", "done"]]),
        )
    };
    let workflow = json!({"version": 3, "nodes": nodes, "edges": edges});
    std::fs::write(
        dir.join("workflow.json"),
        serde_json::to_vec_pretty(&workflow).expect("json"),
    )
    .expect("workflow");
    let effects = sandbox.workspace.join("effects.log");
    std::fs::write(&effects, "").expect("effects");
    let inputs = sandbox.write_json("inputs.json", &json!({"effects": effects}));
    vec![
        "run".into(),
        dir.to_str().expect("UTF-8").to_owned(),
        "--inputs".into(),
        inputs,
        "--json".into(),
    ]
}

fn effects(sandbox: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sandbox.workspace.join("effects.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_detached_gap_run_is_watched_force_stopped_and_resumed_without_repeating_settled_scripts() {
    let sandbox = Sandbox::new();
    let run = sandbox.start_detached(&workflow_args(&sandbox, true));
    wait_until("slow to start", STATE_TIMEOUT, || {
        (effects(&sandbox).len() == 2).then_some(())
    });
    let status = sandbox.status(&run);
    assert_eq!(status["kind"], "gap");
    assert_eq!(status["status"]["phase"], "running", "{status}");

    let stopped = sandbox.trellis(&["force-stop", &run]).success().json();
    assert_eq!(
        stopped["status"]["terminalResult"],
        json!({"status": "failed", "reason": "force_stopped"}),
        "{stopped}"
    );
    let watched = sandbox
        .trellis(&["watch", &run, "--json"])
        .success()
        .ndjson();
    let kinds: Vec<&str> = watched.iter().filter_map(|w| w["event"].as_str()).collect();
    for kind in ["gap_node_started", "gap_node_settled", "terminal"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }

    let successor = sandbox
        .trellis(&["resume", &run, "--detach", "--json"])
        .success()
        .json()["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    let result = sandbox.wait_finished(&successor);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(
        effects(&sandbox),
        ["first", "slow", "slow", "last"],
        "first settled before the stop and is reused; the cancelled slow runs again"
    );
    let logs = sandbox.trellis(&["logs", &successor]).success().ndjson();
    let messages: Vec<&str> = logs
        .iter()
        .filter_map(|l| l["record"]["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("[slow]") && m.contains("not declared idempotent")),
        "{messages:#?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("settled node result")),
        "{messages:#?}"
    );
    let status = sandbox.status(&successor);
    assert_eq!(status["predecessor"], json!(run), "{status}");
}

#[test]
fn secret_values_never_reach_the_ledger_and_their_outputs_are_not_recorded() {
    const CANARY: &str = "canary-4e1f0b9c77";
    let sandbox = Sandbox::new();
    let mut args = workflow_args(&sandbox, false);
    args.extend(["--secret-env".into(), "GAP_TEST_CANARY".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sandbox
        .trellis_with_env(&args, &[("GAP_TEST_CANARY", CANARY)])
        .success();
    assert!(
        out.stdout.contains("\"exit_status\":\"success\""),
        "{out:?}"
    );
    let listed = sandbox.trellis(&["list", "--json"]).success().json();
    let run = listed["runs"][0]["runId"].as_str().expect("run").to_owned();
    let store = SqliteStore::open(sandbox.home.join("ledger.sqlite3")).expect("ledger");
    let run_id = RunId::new(&run).expect("run id");
    assert!(
        !store
            .run_contains_bytes(&run_id, CANARY.as_bytes())
            .expect("scan"),
        "the secret value reached the ledger"
    );
    assert!(
        store
            .run_contains_bytes(&run_id, b"GAP_TEST_CANARY")
            .expect("scan"),
        "the variable's name is recorded"
    );
    let logs = sandbox.trellis(&["logs", &run]).success().stdout;
    assert!(logs.contains("the token is [REDACTED]"), "{logs}");
}
