//! Each analyzer pass on small hand-built graphs, including cases beyond the vectors.

mod support;

use serde_json::json;
use support::build::*;
use trellis_graph::{DiagnosticCode, GraphProfile, TerminationWitness};
use trellis_verify::analyze;

fn codes(spec: &trellis_graph::GraphSpec) -> Vec<(String, String)> {
    summary(&analyze(spec))
}

fn has(list: &[(String, String)], code: &str, message: &str) -> bool {
    list.iter().any(|(c, m)| c == code && m == message)
}

#[test]
fn a_valid_graph_has_no_diagnostics() {
    let mut children = routed("work");
    children.push(succeed("done"));
    assert!(analyze(&graph(seq("root", children))).is_empty());
}

#[test]
fn profile_other_than_full_is_rejected_but_analysed() {
    let mut spec = graph(seq("root", vec![step("work"), succeed("done")]));
    spec.profile = GraphProfile::SingleWorker;
    let diagnostics = analyze(&spec);
    assert_eq!(dotted(&diagnostics[0]), "profile");
    assert_eq!(
        diagnostics[0].message,
        "production full-v1 verifier accepts only openengine.graph.full/v1"
    );
}

#[test]
fn duplicate_names_are_reported_at_the_second_occurrence() {
    let spec = graph(seq("root", vec![step("work"), succeed("work")]));
    let diagnostics = analyze(&spec);
    assert_eq!(messages(&diagnostics), vec!["duplicate node name work"]);
    assert_eq!(dotted(&diagnostics[0]), "root.root.children.1.work");
}

#[test]
fn three_independent_mistakes_are_reported_together() {
    let mut bad_attempts = step("work");
    bad_attempts["attempts"] = json!(101);
    let mut mismatch = step("typed");
    mismatch["input"] =
        json!({"kind": "record", "fields": {"value": field(json!({"kind": "string"}), true)}});
    mismatch["inputBindings"] =
        json!([{"target": ["value"], "value": {"source": "state", "path": ["value"]}}]);
    let spec = graph(seq("root", vec![bad_attempts, mismatch, succeed("work")]));
    let list = codes(&spec);
    assert_eq!(
        list,
        vec![
            (
                "ceiling_exceeded".into(),
                "attempts exceeds full-v1 limit 100".into()
            ),
            (
                "schema_safety".into(),
                "binding source is not a subtype of its target".into()
            ),
            (
                "invalid_graph_shape".into(),
                "duplicate node name work".into()
            ),
        ]
    );
}

#[test]
fn depth_beyond_64_is_reported_for_every_deeper_node() {
    let mut node = step("leaf");
    for i in (0..65).rev() {
        node = loop_(&format!("l{i}"), 1, None, node);
    }
    let diagnostics = analyze(&graph(node));
    let deep: Vec<_> = diagnostics
        .iter()
        .filter(|d| d.message == "graph depth exceeds 64")
        .collect();
    assert_eq!(deep.len(), 2, "the 65th loop and the leaf are too deep");
    assert_eq!(deep[0].code, DiagnosticCode::CeilingExceeded);
}

#[test]
fn node_count_ceiling_counts_every_authored_node() {
    let half = |prefix: &str| {
        seq(
            prefix,
            (0..2049).map(|i| step(&format!("{prefix}{i}"))).collect(),
        )
    };
    let spec = graph(seq("root", vec![half("a"), half("b"), succeed("done")]));
    let list = codes(&spec);
    assert!(has(
        &list,
        "ceiling_exceeded",
        "graph node count exceeds 4096"
    ));
}

#[test]
fn guard_node_ceilings_apply_per_guard_and_in_total() {
    let many: Vec<_> = (0..4095).map(|_| errors_of("work")).collect();
    let guard =
        json!({"kind": "any", "guards": [{"kind": "any", "guards": many}, errors_of("work")]});
    let spec = graph(seq(
        "root",
        vec![
            step("work"),
            choice(
                "route",
                vec![(guard, fail("failed"))],
                Some(succeed("done")),
            ),
        ],
    ));
    let list = codes(&spec);
    assert!(has(
        &list,
        "ceiling_exceeded",
        "guard contains more than 4096 nodes"
    ));
    assert!(has(
        &list,
        "ceiling_exceeded",
        "graph guard-node count exceeds 4096"
    ));
}

#[test]
fn an_unknown_guard_selector_yields_four_diagnostics() {
    let spec = graph(seq(
        "root",
        vec![choice(
            "route",
            vec![(errors_of("ghost"), fail("failed"))],
            Some(succeed("done")),
        )],
    ));
    let list = codes(&spec);
    assert_eq!(list.len(), 4, "{list:?}");
    assert!(has(
        &list,
        "cyclic_reference",
        "node-output/control references contain a cycle"
    ));
    assert!(has(
        &list,
        "undefined_read",
        "reference names unknown node ghost"
    ));
    assert!(has(
        &list,
        "choice_exhaustiveness",
        "illegal control selector for node ghost"
    ));
    assert!(has(
        &list,
        "undefined_read",
        "control selector ghost does not dominate this guard"
    ));
}

#[test]
fn loop_and_map_bounds_are_checked_when_analysed() {
    let spec = graph(seq(
        "root",
        vec![
            loop_("again", 101, None, step("work")),
            map("each", 1025, step("item")),
            succeed("done"),
        ],
    ));
    let list = codes(&spec);
    // 10.19.1 has no maxIterations ceiling of its own (§13.4): 101 rounds are legal.
    assert!(!list.iter().any(|(_, m)| m.starts_with("maxIterations")));
    assert!(has(
        &list,
        "ceiling_exceeded",
        "maxItems exceeds full-v1 limit 1024"
    ));
}

#[test]
fn seven_routed_steps_exceed_the_assignment_space() {
    let mut children: Vec<_> = (0..7).flat_map(|i| routed(&format!("s{i}"))).collect();
    children.push(succeed("done"));
    let diagnostics = analyze(&graph(seq("root", children.clone())));
    assert_eq!(
        messages(&diagnostics),
        vec!["control assignment space exceeds 65536"]
    );
    assert_eq!(dotted(&diagnostics[0]), "root.root");
    // Six stay within it (5^6 = 15625 assignments).
    let six: Vec<_> = (0..6)
        .flat_map(|i| routed(&format!("s{i}")))
        .chain([succeed("done")])
        .collect();
    assert!(analyze(&graph(seq("root", six))).is_empty());
}

#[test]
fn folds_enforce_concurrency_and_execution_ceilings() {
    let wide = par(
        "wide",
        json!({"kind": "all"}),
        (0..1025).map(|i| step(&format!("w{i}"))).collect(),
    );
    let list = codes(&graph(seq("root", vec![wide, succeed("done")])));
    assert_eq!(
        list,
        vec![(
            "ceiling_exceeded".into(),
            "peak concurrency exceed 1024".into()
        )]
    );

    let nested = map("outer", 1024, map("inner", 1024, step("work")));
    let diagnostics = analyze(&graph(seq("root", vec![nested, succeed("done")])));
    let at_outer: Vec<_> = diagnostics
        .iter()
        .filter(|d| dotted(d) == "root.root.children.0.outer.maxItems")
        .map(|d| d.message.as_str())
        .collect();
    // Executions are folded first and stop the fold (§13.5).
    assert_eq!(at_outer, vec!["node executions exceed 65536"]);
}

#[test]
fn loop_exits_must_read_verifiers_or_step_errors_of_every_iteration_and_be_satisfiable() {
    // A step of the body read through `error` is a legal exit (§13.3).
    let step_error = loop_("again", 3, Some(errors_of("work")), step("work"));
    let list = codes(&graph(seq("root", vec![step_error, fail("end")])));
    assert!(
        !list
            .iter()
            .any(|(_, m)| m.starts_with("loop exit selector"))
    );

    // A step entered before the loop is not entered in every iteration.
    let outside = loop_("again", 3, Some(errors_of("before")), verifier("check"));
    let list = codes(&graph(seq(
        "root",
        vec![step("before"), outside, fail("end")],
    )));
    assert!(has(
        &list,
        "loop_exit_satisfiability",
        "loop exit selector before must select a verifier or a step error guaranteed in every iteration"
    ));

    let never = json!({"kind": "all", "guards": [verdict("check", &["accepted"]),
                                                  {"kind": "not", "guard": verdict("check", &["accepted"])}]});
    let list = codes(&graph(seq(
        "root",
        vec![
            loop_("again", 3, Some(never), verifier("check")),
            fail("end"),
        ],
    )));
    assert_eq!(
        list,
        vec![(
            "loop_exit_satisfiability".into(),
            "loop exit guard is unsatisfiable".into()
        )]
    );
}

#[test]
fn choices_report_dead_branches_uncovered_assignments_and_dead_otherwise() {
    let dead = choice(
        "route",
        vec![
            (verdict("check", &["accepted"]), succeed("a")),
            (verdict("check", &["accepted"]), succeed("b")),
        ],
        Some(fail("c")),
    );
    let list = codes(&graph(seq("root", vec![verifier("check"), dead])));
    assert_eq!(
        list,
        vec![(
            "choice_exhaustiveness".into(),
            "choice branch is unreachable after excluding earlier branches".into()
        )]
    );

    // accepted/rejected leave the "no signal" outcome uncovered.
    let partial = choice(
        "route",
        vec![(verdict("check", &["accepted", "rejected"]), succeed("a"))],
        None,
    );
    let list = codes(&graph(seq("root", vec![verifier("check"), partial])));
    assert!(has(
        &list,
        "choice_exhaustiveness",
        "choice branches do not cover every legal control assignment"
    ));
    assert!(has(
        &list,
        "reachability",
        "normal-success path falls through without explicit succeed or fail terminal"
    ));

    let covered = choice(
        "route",
        vec![
            (verdict("check", &["accepted", "rejected"]), succeed("a")),
            (errors_of("check"), fail("b")),
        ],
        Some(fail("c")),
    );
    let list = codes(&graph(seq("root", vec![verifier("check"), covered])));
    assert_eq!(list, vec![("choice_exhaustiveness".into(),
        "choice otherwise is unreachable because earlier branches cover every legal control assignment".into())]);
}

#[test]
fn par_joins_are_validated() {
    let quorum = par(
        "both",
        json!({"kind": "quorum", "count": 3}),
        vec![step("a"), step("b")],
    );
    let list = codes(&graph(seq("root", vec![quorum, succeed("done")])));
    assert_eq!(
        list,
        vec![(
            "invalid_graph_shape".into(),
            "parallel quorum exceeds branch count".into()
        )]
    );

    let conflict = par(
        "both",
        json!({"kind": "all"}),
        vec![writes(step("a"), "result"), writes(step("b"), "result")],
    );
    let diagnostics = analyze(&graph(seq("root", vec![conflict, succeed("done")])));
    assert_eq!(
        messages(&diagnostics),
        vec!["parallel all branches have overlapping writes"]
    );
    assert_eq!(diagnostics[0].related_nodes.len(), 2);

    let first = par(
        "race",
        json!({"kind": "first", "when": errors_of("outside")}),
        vec![step("a")],
    );
    let list = codes(&graph(seq("root", vec![first, succeed("done")])));
    assert!(has(
        &list,
        "invalid_graph_shape",
        "illegal control selector for node outside"
    ));
}

#[test]
fn writes_become_readable_only_behind_a_route_excluding_errors() {
    let reader = || {
        json!({"kind": "succeed", "name": "done", "output": result_output(),
        "bindings": [{"target": ["result"], "value": {"source": "state", "path": ["result"]}}]})
    };
    let unrouted = graph(seq("root", vec![writes(step("work"), "result"), reader()]));
    assert_eq!(
        messages(&analyze(&unrouted)),
        vec!["selector path is not definitely defined on every reaching path"]
    );

    let routed = graph(seq(
        "root",
        vec![
            writes(step("work"), "result"),
            choice(
                "route",
                vec![(errors_of("work"), fail("failed"))],
                Some(reader()),
            ),
        ],
    ));
    assert!(analyze(&routed).is_empty());
}

#[test]
fn an_alternative_that_admits_some_error_labels_sees_the_step_failing() {
    let reader = json!({"kind": "succeed", "name": "done", "output": result_output(),
        "bindings": [{"target": ["result"], "value": {"source": "state", "path": ["result"]}}]});
    // Only timeouts are routed away; a crash still reaches the reader, without the write.
    let partly_routed = graph(seq(
        "root",
        vec![
            writes(step("work"), "result"),
            choice(
                "route",
                vec![(
                    is_in(sel("work", "error", None), &["timeout"]),
                    fail("failed"),
                )],
                Some(reader),
            ),
        ],
    ));
    assert_eq!(
        messages(&analyze(&partly_routed)),
        vec!["selector path is not definitely defined on every reaching path"]
    );
}

#[test]
fn a_verifier_routed_by_its_signal_alone_fails_where_no_label_counted() {
    let reader = || {
        json!({"kind": "succeed", "name": "done", "output": result_output(),
        "bindings": [{"target": ["result"], "value": {"source": "state", "path": ["result"]}}]})
    };
    // Every label routes to the reader: the rest (the verifier ran and counted nothing, so it
    // failed) goes to the fail terminal, and the write is definite before the reader.
    let covered = graph(seq(
        "root",
        vec![
            writes(verifier("judge"), "result"),
            choice(
                "route",
                vec![(verdict("judge", &["accepted", "rejected"]), reader())],
                Some(fail("failed")),
            ),
        ],
    ));
    assert!(analyze(&covered).is_empty());

    // The reader is reached without a counted label as well, where the write never happened.
    let uncovered = graph(seq(
        "root",
        vec![
            writes(verifier("judge"), "result"),
            choice(
                "route",
                vec![(verdict("judge", &["accepted"]), fail("failed"))],
                Some(reader()),
            ),
        ],
    ));
    assert_eq!(
        messages(&analyze(&uncovered)),
        vec!["selector path is not definitely defined on every reaching path"]
    );
}

#[test]
fn node_output_reads_need_dominance_and_success() {
    let mut early = step("early");
    early["writeBindings"] = json!([{"value": {"node": "late", "channel": "out", "path": ["result"]}, "target": ["result"]}]);
    let mut late = step("late");
    late["writeBindings"] = json!([{"value": {"node": "first", "channel": "out", "path": ["result"]}, "target": ["result"]}]);
    let list = codes(&graph(seq(
        "root",
        vec![step("first"), early, late, succeed("done")],
    )));
    assert!(has(
        &list,
        "undefined_read",
        "node output late does not dominate this read"
    ));
    assert!(has(
        &list,
        "undefined_read",
        "node output first is unavailable on its error path"
    ));
}

#[test]
fn map_bodies_promote_indexed_writes() {
    let mut work = writes(step("work"), "results");
    work["input"] =
        json!({"kind": "record", "fields": {"value": field(json!({"kind": "integer"}), true)}});
    work["inputBindings"] =
        json!([{"target": ["value"], "value": {"source": "item", "path": ["value"]}}]);
    let mut each = map("each", 2, work);
    each["promotedStatePaths"] = json!([["results"]]);
    let reader = json!({"kind": "succeed", "name": "done",
        "output": {"kind": "record", "fields": {"results": field(json!({"kind": "array", "items": {"kind": "integer"}}), true)}},
        "bindings": [{"target": ["results"], "value": {"source": "state", "path": ["results"]}}]});
    let route = choice(
        "route",
        vec![(
            json!({"kind": "k_of_map", "count": 1, "value": sel("work", "error", None), "labels": ERRORS}),
            fail("failed"),
        )],
        Some(reader),
    );
    assert!(analyze(&graph(seq("root", vec![each, route]))).is_empty());

    let scopeless = choice(
        "route",
        vec![(
            json!({"kind": "k_of_map", "count": 1, "value": sel("work", "error", None), "labels": ["timeout"]}),
            fail("failed"),
        )],
        Some(succeed("done")),
    );
    let list = codes(&graph(seq("root", vec![step("work"), scopeless])));
    assert!(has(
        &list,
        "choice_exhaustiveness",
        "k_of_map selector has no bounded enclosing map scope"
    ));
}

#[test]
fn item_selectors_are_legal_only_in_map_bodies() {
    let mut work = step("work");
    work["input"] =
        json!({"kind": "record", "fields": {"value": field(json!({"kind": "integer"}), true)}});
    work["inputBindings"] =
        json!([{"target": ["value"], "value": {"source": "item", "path": ["value"]}}]);
    let list = codes(&graph(seq("root", vec![work, succeed("done")])));
    assert!(has(
        &list,
        "invalid_graph_shape",
        "item selector is legal only inside a map body"
    ));
}

#[test]
fn children_after_a_terminal_are_unreachable() {
    let diagnostics = analyze(&graph(seq("root", vec![fail("stop"), step("after")])));
    assert_eq!(
        messages(&diagnostics),
        vec!["node is unreachable after an unconditional terminal"]
    );
    assert_eq!(
        diagnostics[0]
            .related_nodes
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>(),
        vec!["after", "root"]
    );
}

#[test]
fn bounds_order_nodes_by_dependency_then_authored_order() {
    let registry = support::mixed::bench_registry();
    let mut reader = step("reader");
    reader["worker"] = json!("bench.step-null@1");
    reader["writeBindings"] = json!([{"value": {"node": "producer", "channel": "out", "path": ["result"]}, "target": ["result"]}]);
    let mut producer = step("producer");
    producer["worker"] = json!("bench.step-null@1");
    let route = choice(
        "route",
        vec![(errors_of("producer"), fail("failed"))],
        Some(seq("rest", vec![reader, succeed("done")])),
    );
    let spec = graph(seq("root", vec![producer, route]));
    let trellis_verify::Verification::Verified(verified) = trellis_verify::verify(&spec, &registry)
    else {
        panic!("{:#}", trellis_verify::verify(&spec, &registry).envelope());
    };
    let TerminationWitness::Acyclic { order } = &verified.ir.bounds.termination else {
        panic!("no loops, so the witness is acyclic");
    };
    let order: Vec<&str> = order.iter().map(|n| n.as_str()).collect();
    assert_eq!(
        order,
        vec![
            "root", "producer", "route", "failed", "rest", "reader", "done"
        ]
    );
    assert_eq!(verified.ir.bounds.max_node_executions.get(), 2);
}
