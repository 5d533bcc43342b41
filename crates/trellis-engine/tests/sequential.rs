//! Steps, verifiers, seq, choice and terminals over hand-driven histories; every decision is
//! checked against the full replay, the incremental reducer and a rebuilt reducer.

mod support;

use serde_json::json;
use support::*;
use trellis_engine::{TerminalResult, TraceDecision};
use trellis_graph::WorkerErrorCode;

#[test]
fn a_seq_dispatches_in_order_binds_inputs_and_writes_state() {
    let root = promote(
        seq(
            "run",
            vec![
                writes(
                    inputs(step("first"), &[("task", "state:task")]),
                    &[("draft", "first.out.text")],
                ),
                inputs(
                    step("second"),
                    &[("draft", "state:draft"), ("meta.task", "state:task")],
                ),
                step("third"),
                succeed("done", &[("result", "state:draft")]),
            ],
        ),
        &["draft"],
    );
    let mut run = Run::new(graph(root), json!({"task": "write"}));

    let first = run.start();
    assert_eq!(names(&first), ["first"]);
    assert_eq!(first[0].input, json!({"task": "write"}));
    assert_eq!(first[0].attempt, 1);
    assert_eq!(first[0].worker.as_str(), "test.first@1");

    let after_first = run.settle("first", ok(json!({"text": "hello"})));
    assert_eq!(names(&after_first.dispatches), ["second"]);
    assert_eq!(
        after_first.dispatches[0].input,
        json!({"draft": "hello", "meta": {"task": "write"}})
    );
    // The trace shows what happened at this ledger position.
    assert_eq!(
        after_first.trace,
        vec![
            TraceDecision::Promote {
                node: trellis_graph::NodeName::new("first").unwrap(),
                map_indices: vec![],
                values: vec![trellis_engine::PromotedValue {
                    path: serde_json::from_value(json!(["draft"])).unwrap(),
                    value: json!("hello"),
                }],
            },
            TraceDecision::Continue {
                node: trellis_graph::NodeName::new("first").unwrap(),
                map_indices: vec![]
            },
        ]
    );

    run.start();
    let after_second = run.settle("second", ok(json!(null)));
    assert_eq!(names(&after_second.dispatches), ["third"]);
    assert_eq!(
        after_second.dispatches[0].input,
        json!(null),
        "no bindings means null input"
    );

    run.start();
    let end = run.settle("third", ok(json!(null)));
    assert!(end.dispatches.is_empty());
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"result": "hello"})
        })
    );
    let ids: Vec<u64> = run
        .history
        .executions
        .iter()
        .map(|r| r.execution.0)
        .collect();
    let instances: Vec<u64> = run
        .history
        .executions
        .iter()
        .map(|r| r.node_instance.0)
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(instances, [1, 2, 3]);
}

#[test]
fn succeed_without_bindings_outputs_null_and_fail_reports_its_reason() {
    let run = Run::new(graph(succeed("done", &[])), json!({}));
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );
    let run = Run::new(graph(fail("stop", "gave_up")), json!({}));
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Failed {
            reason: "gave_up".into()
        })
    );
}

fn routed(outcome: trellis_graph::WorkerOutcome) -> Option<TerminalResult> {
    let root = seq(
        "run",
        vec![
            step("work"),
            choice(
                "route",
                vec![(errored("work"), fail("work_failed", "work_failed"))],
                Some(succeed("done", &[])),
            ),
        ],
    );
    let mut run = Run::new(graph(root), json!({}));
    run.start();
    run.settle("work", outcome).terminal
}

#[test]
fn every_error_code_sets_the_error_control() {
    for code in WorkerErrorCode::ALL {
        assert_eq!(
            routed(error(code)),
            Some(TerminalResult::Failed {
                reason: "work_failed".into()
            }),
            "{code:?}"
        );
    }
    assert_eq!(
        routed(ok(json!(null))),
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );
}

#[test]
fn verifier_signals_route_choices_and_feed_writes() {
    let check = writes(
        verifier("check", "verdict", &["accepted", "rejected"]),
        &[
            ("feedback", "check.diagnostic.message"),
            ("verdict", "check.signal.verdict"),
            ("score", "check.out.score"),
        ],
    );
    let root = seq(
        "run",
        vec![
            check,
            choice(
                "route",
                vec![
                    (errored("check"), fail("broken", "broken")),
                    (
                        signal_is("check", "verdict", &["accepted"]),
                        succeed("done", &[("v", "state:verdict"), ("s", "state:score")]),
                    ),
                ],
                Some(succeed("rejected", &[("why", "state:feedback")])),
            ),
        ],
    );
    let mut run = Run::new(graph(root.clone()), json!({}));
    run.start();
    let end = run.settle(
        "check",
        verdict(
            &[("verdict", "accepted")],
            json!({"score": 7}),
            json!({"message": "fine"}),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"v": "accepted", "s": 7})
        })
    );

    let mut run = Run::new(graph(root), json!({}));
    run.start();
    let end = run.settle(
        "check",
        verdict(
            &[("verdict", "rejected")],
            json!({"score": 1}),
            json!({"message": "no tests"}),
        ),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"why": "no tests"})
        })
    );
}

#[test]
fn guards_combine_with_all_any_not_and_k_of_n() {
    let probe = |name: &str| verifier(name, "verdict", &["yes", "no"]);
    let yes = |name: &str| signal_is(name, "verdict", &["yes"]);
    let root = seq(
        "run",
        vec![
            probe("a"),
            probe("b"),
            probe("c"),
            choice(
                "route",
                vec![
                    (
                        all(vec![yes("a"), yes("b"), yes("c")]),
                        fail("all_yes", "all_yes"),
                    ),
                    (
                        k_of_n(
                            2,
                            vec![
                                sel("a", "signal", Some("verdict")),
                                sel("b", "signal", Some("verdict")),
                                sel("c", "signal", Some("verdict")),
                            ],
                            &["yes"],
                        ),
                        fail("two_yes", "two_yes"),
                    ),
                    (
                        all(vec![not(yes("a")), any(vec![yes("b"), yes("c")])]),
                        fail("one_late_yes", "one_late_yes"),
                    ),
                ],
                Some(fail("none", "none")),
            ),
        ],
    );
    let cases = [
        (["yes", "yes", "yes"], "all_yes"),
        (["yes", "no", "yes"], "two_yes"),
        (["no", "no", "yes"], "one_late_yes"),
        (["yes", "no", "no"], "none"),
    ];
    for (answers, reason) in cases {
        let mut run = Run::new(graph(root.clone()), json!({}));
        let mut last = None;
        for (name, answer) in ["a", "b", "c"].iter().zip(answers) {
            run.start();
            last = run
                .settle(
                    name,
                    verdict(&[("verdict", answer)], json!(null), json!(null)),
                )
                .terminal;
        }
        assert_eq!(
            last,
            Some(TerminalResult::Failed {
                reason: reason.into()
            }),
            "{answers:?}"
        );
    }
}

#[test]
fn a_choice_without_a_matching_branch_falls_through() {
    let root = seq(
        "run",
        vec![
            choice(
                "maybe",
                vec![(errored("nobody"), fail("never", "never"))],
                None,
            ),
            succeed("done", &[]),
        ],
    );
    let run = Run::new(graph(root), json!({}));
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );
}

#[test]
fn a_root_that_falls_through_fails_as_unhandled() {
    let mut run = Run::new(graph(seq("run", vec![step("only")])), json!({}));
    run.start();
    assert_eq!(
        run.settle("only", ok(json!(null))).terminal,
        Some(TerminalResult::Failed {
            reason: trellis_engine::UNHANDLED_REASON.into()
        })
    );
}

#[test]
fn unpromoted_writes_stay_inside_their_group() {
    let inner = seq(
        "inner",
        vec![writes(
            step("w"),
            &[("kept", "w.out.a"), ("dropped", "w.out.b")],
        )],
    );
    let root = seq(
        "run",
        vec![
            promote(inner, &["kept"]),
            succeed(
                "done",
                &[("kept", "state:kept"), ("dropped", "state:dropped")],
            ),
        ],
    );
    let mut run = Run::new(graph(root), json!({"dropped": "original"}));
    run.start();
    let end = run.settle("w", ok(json!({"a": 1, "b": 2})));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"kept": 1, "dropped": "original"})
        })
    );
}

#[test]
fn root_state_fills_missing_required_fields_with_empty_values() {
    let state = json!({"kind": "record", "fields": {
        "task": {"type": {"kind": "string"}, "required": true},
        "feedback": {"type": {"kind": "string"}, "required": true},
        "nothing": {"type": {"kind": "null"}, "required": true},
        "items": {"type": {"kind": "array", "items": {"kind": "string"}}, "required": true},
        "phase": {"type": {"kind": "record", "fields": {
            "after": {"type": {"kind": "string"}, "required": false},
            "note": {"type": {"kind": "string"}, "required": true}}}, "required": true},
        "optional": {"type": {"kind": "string"}, "required": false}}});
    let mut root = seq(
        "run",
        vec![
            inputs(
                step("work"),
                &[
                    ("task", "state:task"),
                    ("feedback", "state:feedback"),
                    ("nothing", "state:nothing"),
                    ("items", "state:items"),
                    ("phase", "state:phase"),
                ],
            ),
            succeed("done", &[]),
        ],
    );
    root["state"] = state;
    let run = Run::new(graph(root), json!({"task": "t"}));
    let dispatches = run.decide().dispatches;
    assert_eq!(
        dispatches[0].input,
        json!({"task": "t", "feedback": "", "nothing": null, "items": [], "phase": {"note": ""}})
    );
}
