//! Hardening: many simultaneous `trellis run`s on one state directory (issue 19 #5). Every run
//! starts, prints its id and succeeds with the right output; none exits "the ledger is busy"
//! and none is left `runtime_lost` or unnamed in the ledger.
//!
//! `TRELLIS_HARDENING_RUNS` sets how many runs start at once (default 20; `TRELLIS_HARDENING_LONG`
//! makes it 40).

mod support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::graph::{chain_graph, chain_output};
use support::{CliOutput, Sandbox, finish, uniform_worker_plan};

/// Steps per run: each is a dispatch and an outcome, so a few ledger writes per step.
const STEPS: usize = 10;

fn run_count() -> usize {
    if let Ok(text) = std::env::var("TRELLIS_HARDENING_RUNS") {
        return text.parse().expect("TRELLIS_HARDENING_RUNS is a number");
    }
    if std::env::var_os("TRELLIS_HARDENING_LONG").is_some() {
        40
    } else {
        20
    }
}

/// The run id a `run --json` printed first, and the terminal result it printed last.
fn receipt_and_result(output: &CliOutput) -> (String, Value) {
    let lines = output.ndjson();
    let run = lines
        .first()
        .and_then(|line| line["runId"].as_str())
        .unwrap_or_else(|| panic!("no run id printed: {output:#?}"))
        .to_owned();
    let result = lines.last().expect("events")["status"]["terminalResult"].clone();
    (run, result)
}

#[test]
fn simultaneous_runs_on_one_home_all_start_print_their_ids_and_succeed() {
    let sandbox = Sandbox::new();
    let count = run_count();
    let graph = sandbox.write_json("graph.json", &chain_graph(STEPS));
    let plan = sandbox.write_json("plan.json", &uniform_worker_plan(&[]));
    // The ledger exists before the burst, as on any home that was used once.
    sandbox.trellis(&["list"]).success();
    let running: Vec<_> = (0..count)
        .map(|i| {
            // One workspace per run: a workspace takes one run at a time.
            let workspace = sandbox.workspace.join(format!("ws{i}"));
            std::fs::create_dir_all(&workspace).expect("workspace");
            let input = sandbox.write_json(&format!("input{i}.json"), &json!({"v": i}));
            let workspace = workspace.to_str().expect("UTF-8").to_owned();
            sandbox.spawn(&[
                "run",
                &graph,
                "--input",
                &input,
                "--uniform-runtime-config",
                &plan,
                "--cwd",
                &workspace,
                "--json",
            ])
        })
        .collect();
    let outputs: Vec<CliOutput> = running
        .into_iter()
        .map(|run| finish(run, support::COMMAND_TIMEOUT, &["run"]))
        .collect();

    let mut printed = BTreeSet::new();
    for (i, output) in outputs.iter().enumerate() {
        assert_eq!(output.code, Some(0), "run {i}: {output:#?}");
        assert!(
            !output.stderr.contains("busy"),
            "run {i} met a busy ledger: {output:#?}"
        );
        let (run, result) = receipt_and_result(output);
        let v = i64::try_from(i).expect("small");
        assert_eq!(
            result,
            json!({"status": "succeeded", "output": chain_output(STEPS, v)}),
            "run {i} ({run})"
        );
        printed.insert(run);
    }
    assert_eq!(printed.len(), count, "every run has its own id");

    // The ledger holds exactly the runs that were printed, every one succeeded.
    let listed = sandbox
        .trellis(&["list", "--json", "--limit", "1000"])
        .success()
        .json();
    let runs = listed["runs"].as_array().expect("runs");
    let in_ledger: BTreeSet<String> = runs
        .iter()
        .map(|run| run["runId"].as_str().expect("runId").to_owned())
        .collect();
    assert_eq!(in_ledger, printed, "no unnamed run in the ledger");
    for run in runs {
        assert_eq!(
            run["status"]["terminalResult"]["status"], "succeeded",
            "{run}"
        );
    }
    assert!(listed.get("skipped").is_none(), "{listed}");
    sandbox.wait_no_processes();
    eprintln!("{count} simultaneous runs on one home: {count} succeeded, 0 busy, 0 runtime_lost");
}
