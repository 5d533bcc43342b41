//! Par joins (all, any, quorum, first) with loser voiding, and maps with indexed promotion,
//! overflow, empty input and terminal voiding.

mod support;

use serde_json::{Value, json};
use support::*;
use trellis_engine::{TerminalResult, VoidReason};
use trellis_graph::WorkerErrorCode;

fn joined_is(par_name: &str, field: &str, label: &str) -> Value {
    is_in(sel(par_name, "group", Some(field)), &[label])
}

/// seq[par(join)[a, b, c], choice(joined=reached → succeed(results), otherwise → fail)]
fn three_way(join: Value, field: &str, reached: &str) -> trellis_graph::GraphSpec {
    let branch = |name: &str| writes(step(name), &[(name, &format!("{name}.out.v"))]);
    let mut parallel = par("fan", join, vec![branch("a"), branch("b"), branch("c")]);
    parallel = promote(parallel, &["a", "b", "c"]);
    let root = seq(
        "run",
        vec![
            parallel,
            choice(
                "after",
                vec![(
                    joined_is("fan", field, reached),
                    succeed(
                        "done",
                        &[("a", "state:a"), ("b", "state:b"), ("c", "state:c")],
                    ),
                )],
                Some(fail("unreached", "unreached")),
            ),
        ],
    );
    graph(root)
}

#[test]
fn join_all_waits_for_every_branch_and_promotes_all_writes() {
    let mut run = Run::new(
        three_way(json!({"kind": "all"}), "joined", "reached"),
        json!({"a": 0, "b": 0, "c": 0}),
    );
    assert_eq!(names(&run.start()), ["a", "b", "c"]);
    assert!(run.settle("b", ok(json!({"v": 2}))).terminal.is_none());
    assert!(run.settle("a", ok(json!({"v": 1}))).terminal.is_none());
    let end = run.settle("c", ok(json!({"v": 3})));
    assert!(end.voids.is_empty());
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"a": 1, "b": 2, "c": 3})
        })
    );
}

#[test]
fn join_any_voids_the_losers_before_the_terminal() {
    let mut run = Run::new(
        three_way(json!({"kind": "any"}), "joined", "reached"),
        json!({"a": 0, "b": 0, "c": 0}),
    );
    run.start();
    let joined = run.settle("b", ok(json!({"v": 2})));
    assert_eq!(joined.terminal, None, "no terminal while losers still run");
    let losers: Vec<_> = joined
        .voids
        .iter()
        .map(|v| (v.execution.0, v.reason))
        .collect();
    assert_eq!(
        losers,
        [(1, VoidReason::ParallelJoin), (3, VoidReason::ParallelJoin)]
    );
    run.void_requested();
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"a": 0, "b": 2, "c": 0})
        }),
        "only the winner's writes are promoted"
    );
}

#[test]
fn a_loser_settling_before_its_void_is_ignored() {
    let mut run = Run::new(
        three_way(json!({"kind": "any"}), "joined", "reached"),
        json!({"a": 0, "b": 0, "c": 0}),
    );
    run.start();
    run.settle("a", ok(json!({"v": 1})));
    // b finishes in the race with its void; only c still needs voiding.
    let after = run.settle("b", ok(json!({"v": 2})));
    assert_eq!(after.voids.len(), 1);
    assert_eq!(after.voids[0].execution.0, 3);
    run.void_requested();
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"a": 1, "b": 0, "c": 0})
        })
    );
}

#[test]
fn join_quorum_needs_count_completions() {
    let mut run = Run::new(
        three_way(json!({"kind": "quorum", "count": 2}), "joined", "reached"),
        json!({"a": 0, "b": 0, "c": 0}),
    );
    run.start();
    assert!(run.settle("c", ok(json!({"v": 3}))).voids.is_empty());
    let joined = run.settle("a", ok(json!({"v": 1})));
    assert_eq!(joined.voids.len(), 1);
    assert_eq!(
        run.record_of(joined.voids[0].execution)
            .occurrence
            .node
            .as_str(),
        "b"
    );
    run.void_requested();
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"a": 1, "b": 0, "c": 3})
        })
    );
}

#[test]
fn quorum_unreachable_when_branches_end_without_completing() {
    // Each branch fails into a terminal on error; terminals inside a par branch only mean the
    // branch did not complete, and the author routes on `joined`.
    let guarded = |name: &str| {
        seq(
            &format!("{name}_lane"),
            vec![
                step(name),
                choice(
                    &format!("{name}_route"),
                    vec![(
                        errored(name),
                        fail(&format!("{name}_failed"), "lane_failed"),
                    )],
                    None,
                ),
            ],
        )
    };
    let root = seq(
        "run",
        vec![
            par(
                "fan",
                json!({"kind": "quorum", "count": 2}),
                vec![guarded("a"), guarded("b"), guarded("c")],
            ),
            choice(
                "after",
                vec![(
                    joined_is("fan", "joined", "quorum_unreachable"),
                    fail("too_few", "too_few"),
                )],
                Some(succeed("done", &[])),
            ),
        ],
    );
    let mut run = Run::new(graph(root), json!({}));
    run.start();
    run.settle("a", error(WorkerErrorCode::Timeout));
    assert!(run.settle("b", ok(json!(null))).terminal.is_none());
    let end = run.settle("c", error(WorkerErrorCode::Refusal));
    assert!(end.voids.is_empty());
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "too_few".into()
        })
    );
}

#[test]
fn join_first_counts_only_branches_whose_when_holds() {
    let judge = |name: &str| verifier(name, "verdict", &["pass", "fail"]);
    let when = any(vec![
        signal_is("left", "verdict", &["pass"]),
        signal_is("right", "verdict", &["pass"]),
    ]);
    let root = seq(
        "run",
        vec![
            par(
                "race",
                json!({"kind": "first", "when": when}),
                vec![judge("left"), judge("right")],
            ),
            choice(
                "after",
                vec![(joined_is("race", "raced", "satisfied"), succeed("won", &[]))],
                Some(fail("no_winner", "no_satisfier")),
            ),
        ],
    );
    // left completes first but does not satisfy `when`; right then satisfies it.
    let mut run = Run::new(graph(root.clone()), json!({}));
    run.start();
    let first = run.settle(
        "left",
        verdict(&[("verdict", "fail")], json!(null), json!(null)),
    );
    assert!(first.terminal.is_none() && first.voids.is_empty());
    let end = run.settle(
        "right",
        verdict(&[("verdict", "pass")], json!(null), json!(null)),
    );
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );

    // right satisfies first: left is voided.
    let mut run = Run::new(graph(root.clone()), json!({}));
    run.start();
    let won = run.settle(
        "right",
        verdict(&[("verdict", "pass")], json!(null), json!(null)),
    );
    assert_eq!(won.voids.len(), 1);
    assert_eq!(
        run.record_of(won.voids[0].execution)
            .occurrence
            .node
            .as_str(),
        "left"
    );
    run.void_requested();
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!(null)
        })
    );

    // Nobody satisfies it: no_satisfier.
    let mut run = Run::new(graph(root), json!({}));
    run.start();
    run.settle(
        "left",
        verdict(&[("verdict", "fail")], json!(null), json!(null)),
    );
    let end = run.settle("right", error(WorkerErrorCode::Crash));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Failed {
            reason: "no_satisfier".into()
        })
    );
}

fn mapped(body: Value, max_items: u64, promoted: &[&str]) -> Value {
    promote(map("each", "state:items", max_items, body), promoted)
}

#[test]
fn map_promotes_indexed_results_in_input_order() {
    let body = writes(
        inputs(step("work"), &[("item", "item:name")]),
        &[("results", "work.out.size")],
    );
    let root = seq(
        "run",
        vec![
            mapped(body, 4, &["results"]),
            succeed("done", &[("results", "state:results")]),
        ],
    );
    let items = json!({"items": [{"name": "x"}, {"name": "y"}, {"name": "z"}]});
    let mut run = Run::new(graph(root), items);
    let started = run.start();
    assert_eq!(names(&started), ["work[0]", "work[1]", "work[2]"]);
    assert_eq!(started[1].input, json!({"item": "y"}));
    let instances: Vec<u64> = started.iter().map(|d| d.node_instance.0).collect();
    assert_eq!(
        instances,
        [1, 2, 3],
        "each item occurrence has its own instance"
    );
    run.settle_at("work", &[2], ok(json!({"size": 30})));
    run.settle_at("work", &[0], ok(json!({"size": 10})));
    let end = run.settle_at("work", &[1], ok(json!({"size": 20})));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"results": [10, 20, 30]})
        })
    );
}

#[test]
fn an_empty_map_promotes_an_empty_array() {
    let body = writes(step("work"), &[("results", "work.out.size")]);
    let root = seq(
        "run",
        vec![
            mapped(body, 4, &["results"]),
            succeed("done", &[("results", "state:results")]),
        ],
    );
    let run = Run::new(graph(root), json!({"items": [], "results": "stale"}));
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"results": []})
        })
    );
}

#[test]
fn map_overflow_skips_the_body_and_sets_the_control() {
    let root = seq(
        "run",
        vec![
            mapped(step("work"), 2, &[]),
            choice(
                "after",
                vec![(
                    is_in(sel("each", "group", Some("overflow")), &["overflow"]),
                    fail("too_many", "too_many"),
                )],
                Some(succeed("done", &[])),
            ),
        ],
    );
    let run = Run::new(graph(root.clone()), json!({"items": [1, 2, 3]}));
    let reduction = run.decide();
    assert!(reduction.dispatches.is_empty());
    assert_eq!(
        reduction.terminal,
        Some(TerminalResult::Failed {
            reason: "too_many".into()
        })
    );
    let run = Run::new(graph(root), json!({"items": [1, 2]}));
    assert_eq!(names(&run.decide().dispatches), ["work[0]", "work[1]"]);
}

#[test]
fn a_terminal_inside_a_map_voids_its_siblings() {
    let body = seq(
        "item",
        vec![
            step("work"),
            choice(
                "route",
                vec![(errored("work"), fail("item_failed", "item_failed"))],
                None,
            ),
        ],
    );
    let root = seq("run", vec![mapped(body, 8, &[]), succeed("done", &[])]);
    let mut run = Run::new(graph(root), json!({"items": [1, 2, 3]}));
    run.start();
    run.settle_at("work", &[0], ok(json!(null)));
    let failed = run.settle_at("work", &[1], error(WorkerErrorCode::Malformed));
    assert_eq!(failed.terminal, None);
    assert_eq!(failed.voids.len(), 1);
    assert_eq!(failed.voids[0].reason, VoidReason::MapTerminal);
    assert_eq!(
        run.record_of(failed.voids[0].execution)
            .occurrence
            .map_indices,
        [2]
    );
    run.void_requested();
    assert_eq!(
        run.decide().terminal,
        Some(TerminalResult::Failed {
            reason: "item_failed".into()
        })
    );
}

#[test]
fn k_of_map_counts_mapped_controls() {
    let body = verifier("judge", "verdict", &["adopt", "abort"]);
    let root = seq(
        "run",
        vec![
            mapped(body, 3, &[]),
            choice(
                "decide",
                vec![
                    (
                        k_of_map(
                            1,
                            sel("judge", "error", None),
                            &["crash", "malformed", "refusal", "timeout"],
                        ),
                        fail("judge_failed", "judge_failed"),
                    ),
                    (
                        k_of_map(1, sel("judge", "signal", Some("verdict")), &["abort"]),
                        fail("aborted", "aborted"),
                    ),
                    (
                        k_of_map(3, sel("judge", "signal", Some("verdict")), &["adopt"]),
                        succeed("adopted", &[]),
                    ),
                ],
                Some(fail("recorded", "record_only")),
            ),
        ],
    );
    let outcome = |label: &str| verdict(&[("verdict", label)], json!(null), json!(null));
    let scenarios: [([&str; 3], &str); 3] = [
        (["adopt", "adopt", "adopt"], "adopted"),
        (["adopt", "abort", "adopt"], "aborted"),
        (["adopt", "adopt", "error"], "judge_failed"),
    ];
    for (labels, expected) in scenarios {
        let mut run = Run::new(graph(root.clone()), json!({"items": [1, 2, 3]}));
        run.start();
        let mut last = None;
        for (i, label) in labels.iter().enumerate() {
            let result = if *label == "error" {
                error(WorkerErrorCode::Timeout)
            } else {
                outcome(label)
            };
            last = run.settle_at("judge", &[i as u32], result).terminal;
        }
        let want = match expected {
            "adopted" => TerminalResult::Succeeded {
                output: json!(null),
            },
            reason => TerminalResult::Failed {
                reason: reason.into(),
            },
        };
        assert_eq!(last, Some(want), "{labels:?}");
    }
}

#[test]
fn nested_maps_index_outermost_first() {
    let inner = promote(
        map(
            "inner",
            "item:cells",
            4,
            writes(
                inputs(step("cell"), &[("v", "item:v")]),
                &[("out", "cell.out.v")],
            ),
        ),
        &["out"],
    );
    let outer = promote(map("outer", "state:rows", 4, inner), &["out"]);
    let root = seq(
        "run",
        vec![outer, succeed("done", &[("grid", "state:out")])],
    );
    let input = json!({"rows": [{"cells": [{"v": 1}, {"v": 2}]}, {"cells": [{"v": 3}]}]});
    let mut run = Run::new(graph(root), input);
    let started = run.start();
    assert_eq!(names(&started), ["cell[0,0]", "cell[0,1]", "cell[1,0]"]);
    run.settle_at("cell", &[1, 0], ok(json!({"v": 30})));
    run.settle_at("cell", &[0, 1], ok(json!({"v": 20})));
    let end = run.settle_at("cell", &[0, 0], ok(json!({"v": 10})));
    assert_eq!(
        end.terminal,
        Some(TerminalResult::Succeeded {
            output: json!({"grid": [[10, 20], [30]]})
        })
    );
}
