//! GaP workflows through `trellis run`: NDJSON progress then one result object, the exit code,
//! Python tool bundles, and the run recorded in the ledger for `status` and `logs`.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};
use trellis_testkit::conformance::require;

fn gap_dir() -> Option<PathBuf> {
    require(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|d| d.join("gap"))
}

fn tools() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../trellis-gap/tests/fixtures/tools/stub_tools.py")
}

fn trellis(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .env("TRELLIS_HOME", home)
        .output()
        .expect("trellis runs")
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not NDJSON ({e}): {l}")))
        .collect()
}

#[test]
fn a_successful_workflow_prints_progress_then_its_result_and_is_recorded() {
    let Some(dir) = gap_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let tool = format!("stub.work={}:work_ok", tools().display());
    let workflow = dir.join("test_sg_on_error_recovery.json");
    let out = trellis(
        home.path(),
        &[
            "run",
            workflow.to_str().unwrap(),
            "--python-tool",
            &tool,
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = lines(&out);
    let result = events.last().unwrap();
    assert_eq!(result["exit_status"], "success");
    assert_eq!(result["outputs"]["sg_work"]["result"], json!(7));
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e.get("event").is_some())
    );
    assert!(events.iter().any(|e| e["event"] == "node_finished"));
    assert_eq!(
        events
            .iter()
            .filter(|e| e.get("exit_status").is_some())
            .count(),
        1
    );

    let listed: Value =
        serde_json::from_slice(&trellis(home.path(), &["list", "--json"]).stdout).unwrap();
    let run = &listed["runs"][0];
    assert_eq!(run["kind"], "gap");
    assert_eq!(run["status"]["phase"], "finished");
    assert_eq!(run["status"]["terminalResult"]["status"], "succeeded");
    assert_eq!(
        run["status"]["terminalResult"]["output"]["outputs"]["sg_work"]["result"],
        json!(7)
    );
    let watch = trellis(home.path(), &["watch", run["runId"].as_str().unwrap()]);
    assert!(lines(&watch).iter().any(|w| w["event"] == "gap_event"));
}

#[test]
fn a_failing_workflow_exits_1_and_its_error_reaches_the_logs() {
    let Some(dir) = gap_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let tool = format!("stub.work={}:work_fail", tools().display());
    let workflow = dir.join("test_sg_on_error_recovery.json");
    let out = trellis(
        home.path(),
        &[
            "run",
            workflow.to_str().unwrap(),
            "--python-tool",
            &tool,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let result = lines(&out).pop().unwrap();
    assert_eq!(result["exit_status"], "failure");
    assert!(
        result["error"].as_str().unwrap().contains("work exploded"),
        "{result}"
    );

    let listed: Value =
        serde_json::from_slice(&trellis(home.path(), &["list", "--json"]).stdout).unwrap();
    let run_id = listed["runs"][0]["runId"].as_str().unwrap().to_owned();
    assert_eq!(
        listed["runs"][0]["status"]["terminalResult"]["reason"],
        "workflow_failed"
    );
    let logs =
        String::from_utf8_lossy(&trellis(home.path(), &["logs", &run_id]).stdout).into_owned();
    assert!(logs.contains("work exploded"), "{logs}");
}

#[test]
fn a_rejected_workflow_does_not_run() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("workflow.json"),
        r#"{"version": 3, "nodes": {"a": {"type": "tool", "tool": "stub.noop", "inputs": {"x": {"$ref": "missing.out"}}}}, "edges": [["START", "a"], ["a", "END"]]}"#,
    )
    .unwrap();
    let out = trellis(
        home.path(),
        &["run", dir.path().to_str().unwrap(), "--stub-tools"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is rejected") && stderr.contains("workflow has no end node"),
        "{stderr}"
    );
    let listed: Value =
        serde_json::from_slice(&trellis(home.path(), &["list", "--json"]).stdout).unwrap();
    assert_eq!(listed["runs"], json!([]));
}
