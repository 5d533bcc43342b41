//! Loops (convergence, exhaustion, state carried across rounds, input-lowered round counts)
//! and crash retries (same instance and input, attempt numbering, final errors).

mod support;

use serde_json::{Value, json};
use support::*;
use trellis_engine::{TerminalResult, VoidReason};
use trellis_graph::WorkerErrorCode;

/// loop(max)[ seq[ worker(in: feedback), check(verdict) → writes feedback ] ] until accepted,
/// then route on terminated.
fn review_loop(max: u64) -> Value {
    let body = promote(
        seq(
            "round",
            vec![
                inputs(
                    step("worker"),
                    &[("task", "state:task"), ("feedback", "state:feedback")],
                ),
                writes(
                    verifier("check", "verdict", &["accepted", "rejected"]),
                    &[("feedback", "check.diagnostic.message")],
                ),
            ],
        ),
        &["feedback"],
    );
    let until = signal_is("check", "verdict", &["accepted"]);
    seq(
        "run",
        vec![
            promote(looped("rounds", max, Some(until), body), &["feedback"]),
            choice(
                "after",
                vec![(
                    is_in(sel("rounds", "group", Some("terminated")), &["exhausted"]),
                    fail("gave_up", "exhausted"),
                )],
                Some(succeed("done", &[("feedback", "state:feedback")])),
            ),
        ],
    )
}

fn reject(message: &str) -> trellis_graph::WorkerOutcome {
    verdict(
        &[("verdict", "rejected")],
        json!(null),
        json!({"message": message}),
    )
}

fn accept() -> trellis_graph::WorkerOutcome {
    verdict(
        &[("verdict", "accepted")],
        json!(null),
        json!({"message": "ok"}),
    )
}

#[test]
fn a_loop_converges_and_state_flows_into_the_next_round() {
    let mut run = Run::new(graph(review_loop(5)), json!({"task": "t", "feedback": ""}));
    let first = run.start();
    assert_eq!(first[0].input, json!({"task": "t", "feedback": ""}));
    run.settle("worker", ok(json!(null)));
    run.start();
    let second = run.settle("check", reject("add tests"));
    assert_eq!(names(&second.dispatches), ["worker"]);
    assert_eq!(
        second.dispatches[0].input,
        json!({"task": "t", "feedback": "add tests"}),
        "feedback written in round 1 reaches round 2"
    );
    // Revisits reuse the node instance and start again at attempt 1.
    assert_eq!(second.dispatches[0].node_instance, first[0].node_instance);
    assert_eq!(second.dispatches[0].attempt, 1);
    run.start();
    run.settle("worker", ok(json!(null)));
    run.start();
    let end = run.settle("check", accept());
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"feedback": "ok"})
        })
    );
}

#[test]
fn a_loop_that_never_converges_is_exhausted() {
    let mut run = Run::new(graph(review_loop(2)), json!({"task": "t", "feedback": ""}));
    let mut end = None;
    for round in 0..2 {
        run.start();
        run.settle("worker", ok(json!(null)));
        run.start();
        end = run
            .settle("check", reject(&format!("round {round}")))
            .terminal;
    }
    assert_eq!(
        end,
        Some(TerminalResult::Failed {
            reason: "exhausted".into()
        })
    );
    assert_eq!(run.history.executions.len(), 4);
}

#[test]
fn max_iterations_input_sets_the_round_count() {
    // Raised past `maxIterations`: two rounds where the graph says one.
    let mut root = review_loop(1);
    root["children"][0]["maxIterationsInput"] = json!(["options", "rounds"]);
    let mut run = Run::new(
        graph(root),
        json!({"task": "t", "feedback": "", "options": {"rounds": 2}}),
    );
    for round in 1..=2 {
        run.start();
        run.settle("worker", ok(json!(null)));
        run.start();
        let end = run.settle("check", reject("no")).terminal;
        assert_eq!(end.is_some(), round == 2, "round {round}");
    }
    assert_eq!(run.history.executions.len(), 4);
}

#[test]
fn max_iterations_input_lowers_the_round_count() {
    let mut root = review_loop(10);
    root["children"][0]["maxIterationsInput"] = json!(["options", "rounds"]);
    let mut run = Run::new(
        graph(root),
        json!({"task": "t", "feedback": "", "options": {"rounds": 1}}),
    );
    run.start();
    run.settle("worker", ok(json!(null)));
    run.start();
    assert_eq!(
        run.settle("check", reject("no")).terminal,
        Some(TerminalResult::Failed {
            reason: "exhausted".into()
        })
    );
}

fn retried(attempts_allowed: u64) -> Value {
    seq(
        "run",
        vec![
            attempts(inputs(step("flaky"), &[("x", "state:x")]), attempts_allowed),
            choice(
                "route",
                vec![
                    (
                        is_in(sel("flaky", "error", None), &["crash"]),
                        fail("crashed", "crashed"),
                    ),
                    (errored("flaky"), fail("errored", "errored")),
                ],
                Some(succeed("done", &[])),
            ),
        ],
    )
}

#[test]
fn a_crash_retries_the_same_instance_with_the_next_attempt() {
    let mut run = Run::new(graph(retried(3)), json!({"x": 1}));
    let first = run.start();
    let retry = run.settle("flaky", error(WorkerErrorCode::Crash));
    assert_eq!(retry.dispatches.len(), 1);
    let again = &retry.dispatches[0];
    assert_eq!(again.attempt, 2);
    assert_eq!(again.node_instance, first[0].node_instance);
    assert_eq!(again.input, first[0].input);
    assert_eq!(again.execution.0, 2);
    assert!(retry.trace.is_empty(), "a retried crash completes nothing");
    run.start();
    let third = run.settle("flaky", error(WorkerErrorCode::Crash));
    assert_eq!(third.dispatches[0].attempt, 3);
    run.start();
    assert_eq!(
        run.settle("flaky", ok(json!(null))).terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );
}

#[test]
fn a_crash_on_the_last_attempt_is_final() {
    let mut run = Run::new(graph(retried(2)), json!({"x": 1}));
    run.start();
    run.settle("flaky", error(WorkerErrorCode::Crash));
    run.start();
    assert_eq!(
        run.settle("flaky", error(WorkerErrorCode::Crash)).terminal,
        Some(TerminalResult::Failed {
            reason: "crashed".into()
        })
    );
}

#[test]
fn errors_other_than_crash_are_never_retried() {
    for code in [
        WorkerErrorCode::Timeout,
        WorkerErrorCode::Malformed,
        WorkerErrorCode::Refusal,
    ] {
        let mut run = Run::new(graph(retried(3)), json!({"x": 1}));
        run.start();
        let end = run.settle("flaky", error(code));
        assert!(end.dispatches.is_empty());
        assert_eq!(
            end.terminal,
            Some(TerminalResult::Failed {
                reason: "errored".into()
            })
        );
    }
}

#[test]
fn a_revisit_after_a_retried_round_starts_at_attempt_one() {
    let body = attempts(verifier("check", "verdict", &["accepted", "rejected"]), 2);
    let root = seq(
        "run",
        vec![
            looped(
                "rounds",
                3,
                Some(signal_is("check", "verdict", &["accepted"])),
                body,
            ),
            succeed("done", &[]),
        ],
    );
    let mut run = Run::new(graph(root), json!({}));
    let first = run.start();
    let retry = run.settle("check", error(WorkerErrorCode::Crash));
    assert_eq!(retry.dispatches[0].attempt, 2);
    run.start();
    let next_round = run.settle("check", reject("again"));
    assert_eq!(next_round.dispatches[0].attempt, 1);
    assert_eq!(
        next_round.dispatches[0].node_instance,
        first[0].node_instance
    );
    run.start();
    assert!(run.settle("check", accept()).terminal.is_some());
}

#[test]
fn a_par_loser_is_voided_then_revisited_in_the_next_round() {
    let body = seq(
        "round",
        vec![
            par(
                "race",
                json!({"kind": "any"}),
                vec![step("fast"), step("slow")],
            ),
            verifier("gate", "verdict", &["accepted", "rejected"]),
        ],
    );
    let root = seq(
        "run",
        vec![
            looped(
                "rounds",
                3,
                Some(signal_is("gate", "verdict", &["accepted"])),
                body,
            ),
            succeed("done", &[]),
        ],
    );
    let mut run = Run::new(graph(root), json!({}));
    let first = run.start();
    let joined = run.settle("fast", ok(json!(null)));
    assert_eq!(names(&joined.dispatches), ["gate"]);
    assert_eq!(joined.voids.len(), 1);
    assert_eq!(joined.voids[0].reason, VoidReason::ParallelJoin);
    run.void_requested();
    run.start();
    let round_two = run.settle("gate", reject("again"));
    assert_eq!(names(&round_two.dispatches), ["fast", "slow"]);
    let slow = &round_two.dispatches[1];
    assert_eq!(slow.attempt, 1);
    assert_eq!(slow.node_instance, first[1].node_instance);
    run.start();
    // This time slow wins.
    let joined = run.settle("slow", ok(json!(null)));
    assert_eq!(
        run.record_of(joined.voids[0].execution)
            .occurrence
            .node
            .as_str(),
        "fast"
    );
    run.void_requested();
    run.start();
    assert_eq!(
        run.settle("gate", accept()).terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );
}

#[test]
fn mapped_controls_of_an_earlier_round_are_forgotten() {
    let body = seq(
        "round",
        vec![
            map(
                "each",
                "state:items",
                4,
                verifier("judge", "verdict", &["ok", "bad"]),
            ),
            writes(step("shrink"), &[("items", "shrink.out.items")]),
        ],
    );
    let root = seq(
        "run",
        vec![
            promote(
                looped("rounds", 2, None, promote(body, &["items"])),
                &["items"],
            ),
            choice(
                "after",
                vec![(
                    k_of_map(2, sel("judge", "signal", Some("verdict")), &["bad"]),
                    fail("two_bad", "two_bad"),
                )],
                Some(succeed("done", &[])),
            ),
        ],
    );
    let bad = || verdict(&[("verdict", "bad")], json!(null), json!(null));
    let mut run = Run::new(graph(root), json!({"items": [1, 2, 3]}));
    run.start();
    for i in 0..3 {
        run.settle_at("judge", &[i], bad());
    }
    run.start();
    let round_two = run.settle("shrink", ok(json!({"items": [1]})));
    assert_eq!(names(&round_two.dispatches), ["judge[0]"]);
    run.start();
    run.settle_at("judge", &[0], bad());
    run.start();
    assert_eq!(
        run.settle("shrink", ok(json!({"items": []}))).terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        }),
        "only the last round's single item counts"
    );
}
