//! Idempotent submission through the real binary: a submission key names one run, a different
//! submission under a used key is refused, and concurrent identical submissions start one run.

mod support;

use serde_json::json;
use support::graph::*;
use support::{COMMAND_TIMEOUT, Sandbox, finish, uniform_worker_plan};

fn keyed_run_args(sandbox: &Sandbox, value: i64, key: &str) -> Vec<String> {
    let mut args = sandbox.run_args(
        &doubling_graph(),
        &json!({"value": value}),
        &uniform_worker_plan(&[]),
    );
    args.extend(["--submission-key".to_owned(), key.to_owned()]);
    args
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn run_count(sandbox: &Sandbox) -> usize {
    let listed = sandbox.trellis(&["list", "--json"]).success().json();
    listed["runs"].as_array().expect("runs").len()
}

#[test]
fn the_same_submission_key_twice_returns_the_same_run() {
    let sandbox = Sandbox::new();
    let args = keyed_run_args(&sandbox, 21, "key-same-twice");
    let first = sandbox.trellis(&as_strs(&args)).success().ndjson();
    let second = sandbox.trellis(&as_strs(&args)).success().ndjson();

    assert_eq!(first[0]["runId"], second[0]["runId"], "one key, one run");
    assert_eq!(
        second.last().expect("events")["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"result": 42}}),
        "the repeat follows the existing run to its result"
    );
    assert_eq!(run_count(&sandbox), 1);
    assert_eq!(sandbox.invocation_count("double"), 1, "nothing ran twice");
}

#[test]
fn a_different_submission_under_a_used_key_is_refused() {
    let sandbox = Sandbox::new();
    let first = keyed_run_args(&sandbox, 21, "key-conflict");
    sandbox.trellis(&as_strs(&first)).success();

    let other = keyed_run_args(&sandbox, 22, "key-conflict");
    let refused = sandbox.trellis(&as_strs(&other));
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stdout.is_empty(), "{refused:?}");
    let lines = refused.stderr_lines();
    assert_eq!(lines.len(), 1, "one line: {refused:?}");
    assert!(
        lines[0].starts_with("trellis: error:") && lines[0].contains("submission key"),
        "{refused:?}"
    );
    assert_eq!(run_count(&sandbox), 1);
    assert_eq!(sandbox.invocation_count("double"), 1);
}

#[test]
fn concurrent_identical_submissions_start_one_run() {
    // A few independent rounds: the two submissions race differently each time.
    for round in 0..3 {
        let sandbox = Sandbox::new();
        let args = keyed_run_args(&sandbox, 5, &format!("key-concurrent-{round}"));
        let left = sandbox.spawn(&as_strs(&args));
        let right = sandbox.spawn(&as_strs(&args));
        let left = finish(left, COMMAND_TIMEOUT, &args).success().ndjson();
        let right = finish(right, COMMAND_TIMEOUT, &args).success().ndjson();

        assert_eq!(left[0]["runId"], right[0]["runId"], "round {round}");
        for lines in [&left, &right] {
            assert_eq!(
                lines.last().expect("events")["status"]["terminalResult"],
                json!({"status": "succeeded", "output": {"result": 10}}),
                "round {round}"
            );
        }
        assert_eq!(run_count(&sandbox), 1, "round {round}");
        assert_eq!(sandbox.invocation_count("double"), 1, "round {round}");
    }
}
