//! Liveness and admission output: a silent command worker past `idleTimeoutMs` is warned about
//! in the logs and settled `timeout`; `run --validate-only` shows the worst case beside the
//! budget without starting anything.

use std::process::{Command, Output};

use serde_json::{Value, json};

fn trellis(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .current_dir(dir)
        .env("TRELLIS_HOME", dir.join("home"))
        .output()
        .expect("trellis runs")
}

fn graph() -> Value {
    let state = json!({"kind": "null"});
    json!({"profile": "openengine.graph.full/v1", "initialInput": state,
        "policy": {"policy": "policy.local@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [], "children": [
            {"kind": "step", "name": "quiet", "worker": "command.quiet@1", "input": state, "output": state,
             "inputBindings": [], "writeBindings": [], "attempts": 1},
            {"kind": "choice", "name": "route", "state": state, "promotedStatePaths": [],
             "branches": [
                {"when": {"kind": "in", "value": {"name": "quiet", "source": "error", "field": null}, "labels": ["timeout"]},
                 "node": {"kind": "fail", "name": "went_silent", "reason": "went_silent"}},
                {"when": {"kind": "in", "value": {"name": "quiet", "source": "error", "field": null}, "labels": ["crash", "malformed", "refusal"]},
                 "node": {"kind": "fail", "name": "broke", "reason": "broke"}}],
             "otherwise": {"kind": "succeed", "name": "done", "output": state, "bindings": []}}]}})
}

#[test]
fn a_silent_worker_is_warned_about_then_settled_timeout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("g.json"), graph().to_string()).unwrap();
    let plan = json!({"kind": "command", "command": ["sh", "-c", "cat >/dev/null; sleep 30"], "idleTimeoutMs": 800});
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    let out = trellis(
        dir.path(),
        &[
            "run",
            "g.json",
            "--uniform-runtime-config",
            "plan.json",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let run = first["runId"].as_str().unwrap();
    let status: Value =
        serde_json::from_slice(&trellis(dir.path(), &["status", run, "--json"]).stdout).unwrap();
    assert_eq!(status["status"]["terminalResult"]["reason"], "went_silent");
    let logs = String::from_utf8_lossy(&trellis(dir.path(), &["logs", run]).stdout).into_owned();
    let warnings: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| {
            l["record"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("no output for") && m.ends_with("from node quiet"))
        })
        .collect();
    assert!(!warnings.is_empty(), "{logs}");
    assert!(warnings.iter().all(|w| w["record"]["level"] == "warn"));
}

#[test]
fn validate_only_shows_the_worst_case_beside_the_budget_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("g.json"), graph().to_string()).unwrap();
    let plan = json!({"nodes": {"quiet": {"kind": "command", "command": ["true"]}},
                      "budget": {"inputTokens": 5000, "costUsd": 1.5}});
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    let out = trellis(
        dir.path(),
        &[
            "run",
            "g.json",
            "--runtime-config",
            "plan.json",
            "--validate-only",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["valid"], true);
    assert_eq!(summary["worstCase"]["maxNodeExecutions"], 1);
    assert_eq!(
        summary["budget"],
        json!({"inputTokens": 5000, "costUsd": 1.5})
    );
    let listed: Value =
        serde_json::from_slice(&trellis(dir.path(), &["list", "--json"]).stdout).unwrap();
    assert_eq!(listed["runs"], json!([]));
}
