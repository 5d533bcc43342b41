//! Graph semantics through the real binary with command workers: a `timeoutMs` deadline routed
//! by the graph's timeout guard, and one graph combining a first-join race, a loop that
//! converges in round 3 and a map over 50 items.

mod support;

use serde_json::{Value, json};
use support::graph::*;
use support::{Sandbox, is_controller_of, process_alive, uniform_worker_plan};

/// `slowWork` (deadline 1.5 s) never answers; a timeout and any other error end the run with
/// different reasons, so the terminal shows which guard routed it.
fn timeout_graph() -> Value {
    let state = record(&[("value", integer(), true)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                with_timeout(step("slowWork", null(), null(), &[], &[]), 1_500),
                choice(
                    "routeSlow",
                    &state,
                    vec![
                        (
                            error_in("slowWork", &["timeout"]),
                            fail("slowTimedOut", "slow_work_timed_out"),
                        ),
                        (
                            error_in("slowWork", &["crash", "malformed", "refusal"]),
                            fail("slowFailed", "worker_failed"),
                        ),
                    ],
                    Some(succeed("done", null(), &[])),
                ),
            ],
            &[],
        ),
    )
}

#[test]
fn a_worker_past_its_deadline_is_routed_by_the_timeout_guard() {
    let sandbox = Sandbox::new();
    let args = sandbox.run_args(
        &timeout_graph(),
        &json!({"value": 0}),
        &uniform_worker_plan(&[]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sandbox.trellis(&args);
    assert_eq!(run.code, Some(1), "a failed run exits 1: {run:?}");
    let lines = run.ndjson();
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"],
        json!({"status": "failed", "reason": "slow_work_timed_out"})
    );
    let run_id = lines[0]["runId"].as_str().expect("receipt");
    let logs = sandbox.trellis(&["logs", run_id]).success().ndjson();
    assert!(
        logs.iter().any(|l| l["record"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deadline (timeoutMs) passed"))),
        "the deadline is logged: {logs:?}"
    );
    assert_eq!(sandbox.invocations(), ["slowWork"]);
    assert!(
        sandbox.processes().is_empty(),
        "the slow worker was stopped"
    );
}

/// `node` routed by error label: each label ends the run with its own reason.
fn error_routing_graph(node: &str) -> Value {
    let state = record(&[("value", integer(), true)]);
    let branches = ["timeout", "crash", "malformed", "refusal"]
        .into_iter()
        .map(|label| {
            (
                error_in(node, &[label]),
                fail(&format!("{label}Ended"), &format!("ended_{label}")),
            )
        })
        .collect();
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step(node, null(), null(), &[], &[]),
                choice(
                    "routeErrors",
                    &state,
                    branches,
                    Some(succeed("done", null(), &[])),
                ),
            ],
            &[],
        ),
    )
}

#[test]
fn exit_75_is_a_refusal_other_exits_a_crash_and_a_bad_reply_malformed() {
    for (node, reason) in [
        ("refuseWork", "ended_refusal"),
        ("crashWork", "ended_crash"),
        ("garbleWork", "ended_malformed"),
        ("noopWork", ""),
    ] {
        let sandbox = Sandbox::new();
        let args = sandbox.run_args(
            &error_routing_graph(node),
            &json!({"value": 0}),
            &uniform_worker_plan(&[]),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = sandbox.trellis(&args);
        let result = run.ndjson().last().expect("events")["status"]["terminalResult"].clone();
        if reason.is_empty() {
            assert_eq!(run.code, Some(0), "{run:?}");
            assert_eq!(result, json!({"status": "succeeded", "output": null}));
        } else {
            assert_eq!(run.code, Some(1), "{run:?}");
            assert_eq!(
                result,
                json!({"status": "failed", "reason": reason}),
                "{node}"
            );
        }
        assert_eq!(sandbox.invocations(), [node]);
    }
}

#[test]
fn a_race_a_converging_loop_and_a_map_of_fifty_produce_the_expected_output() {
    let sandbox = Sandbox::new();
    let items: Vec<Value> = (1..=50).map(|value| json!({"value": value})).collect();
    let input = json!({"items": items, "round": 0});
    let args = sandbox.run_args(&composite_graph(), &input, &uniform_worker_plan(&[]));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lines = sandbox.trellis(&args).success().ndjson();

    let squares: Vec<i64> = (1..=50).map(|v| v * v).collect();
    assert_eq!(
        lines.last().expect("events")["status"]["terminalResult"],
        json!({"status": "succeeded", "output": {"note": "fast", "round": 3, "squares": squares}})
    );
    let voided = lines
        .iter()
        .filter(|l| l["event"] == "execution_voided")
        .count();
    assert_eq!(voided, 1, "the race's loser is voided");

    assert_eq!(sandbox.invocation_count("raceCheck"), 1);
    assert!(sandbox.invocation_count("slowRival") <= 1);
    assert_eq!(
        sandbox.invocation_count("bump"),
        3,
        "the loop converges in round 3"
    );
    assert_eq!(sandbox.invocation_count("checkRound"), 3);
    assert_eq!(sandbox.invocation_count("square"), 50);
    assert_eq!(sandbox.invocation_count("noopSquared"), 50);
    // The run ended only after its workers did; its controller may still be exiting.
    let run = lines[0]["runId"].as_str().expect("receipt");
    let workers: Vec<u32> = sandbox
        .processes()
        .into_iter()
        .filter(|&pid| !is_controller_of(pid, run))
        .collect();
    assert!(
        workers.is_empty(),
        "the voided rival was stopped: {workers:?}"
    );
    sandbox.wait_no_processes();
}

/// A race whose loser ignores SIGTERM (and so does its grandchild), followed at once by the
/// end of the run.
fn stubborn_race_graph() -> Value {
    let state = composite_state();
    let checked = seq(
        "checked",
        &state,
        vec![
            verifier(
                "raceCheck",
                null(),
                record(&[("note", string(), true)]),
                &[],
                &[("note", "note")],
            ),
            unless_failed(
                "raceCheck",
                &state,
                step("noopRaceNoted", null(), null(), &[], &[]),
            ),
        ],
        &["note"],
    );
    let race = par(
        "race",
        &state,
        vec![checked, step("stubbornRival", null(), null(), &[], &[])],
        json!({"kind": "first", "when": signal_in("raceCheck", "verdict", &["accepted"])}),
        &["note"],
    );
    let output = record(&[("note", string(), true)]);
    let after = choice(
        "afterRace",
        &state,
        vec![(
            group_in("race", "raced", &["satisfied"]),
            succeed("done", output, &[("note", state_path(&["note"]))]),
        )],
        Some(fail("raceLost", "race_lost")),
    );
    graph(state.clone(), seq("root", &state, vec![race, after], &[]))
}

#[test]
fn a_voided_worker_that_ignores_sigterm_is_killed_before_the_controller_exits() {
    let sandbox = Sandbox::new();
    // The race must not finish before the rival has started and recorded its pids.
    std::fs::write(sandbox.workspace.join("hold-raceCheck"), b"").expect("hold");
    let input = json!({"items": [], "round": 0});
    let args = sandbox.run_args(&stubborn_race_graph(), &input, &uniform_worker_plan(&[]));
    let run_id = sandbox.start_detached(&args);
    let (worker, grandchild) = sandbox.worker_pids("stubbornRival");
    std::fs::remove_file(sandbox.workspace.join("hold-raceCheck")).expect("release");

    assert_eq!(
        sandbox.wait_finished(&run_id),
        json!({"status": "succeeded", "output": {"note": "fast"}})
    );
    sandbox.wait_no_processes();
    assert!(!process_alive(worker) && !process_alive(grandchild));
}
