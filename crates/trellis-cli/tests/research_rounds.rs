//! `trellis run --template auto-research` with `options.iterations: 2` and the offline worker
//! standing in for the agents: the three scouts, the researcher and the reviewer run in each of
//! exactly two rounds, and the run succeeds.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

#[test]
fn auto_research_runs_as_many_rounds_as_its_options_say() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("offline")).unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/offline");
    for file in ["review_worker.py", "review_plan.json"] {
        std::fs::copy(examples.join(file), work.join("offline").join(file)).unwrap();
    }
    let input = dir.path().join("input.json");
    let document = json!({"task": "Does caching help?", "options": {"iterations": 2}});
    std::fs::write(&input, document.to_string()).unwrap();
    let trellis = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_trellis"))
            .args(args)
            .current_dir(&work)
            .env("TRELLIS_HOME", dir.path().join("home"))
            .output()
            .unwrap()
    };
    let out = trellis(&[
        "run",
        "--template",
        "auto-research",
        "--input",
        input.to_str().unwrap(),
        "--uniform-runtime-config",
        "offline/review_plan.json",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let receipt: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let run = receipt["runId"].as_str().unwrap();
    let status: Value =
        serde_json::from_slice(&trellis(&["status", run, "--json"]).stdout).unwrap();
    assert_eq!(
        status["status"]["terminalResult"]["status"], "succeeded",
        "{status}"
    );
    let executions = status["executions"].as_array().unwrap();
    for node in [
        "explorer",
        "synthesizer",
        "challenger",
        "researcher",
        "reviewer",
    ] {
        let count = executions.iter().filter(|e| e["node"] == node).count();
        assert_eq!(count, 2, "{node} ran {count} times");
    }
}
