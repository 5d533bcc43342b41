//! Where the shipping reference (Zeroshot 10.19.1) moved past the vectors' snapshot
//! (graph-contract §13): each behaviour on a small graph, with the answer the reference binary
//! gives for the same graph (first diagnostic, or none).

mod support;

use serde_json::{Value, json};
use support::build::*;
use trellis_verify::analyze;

/// The first diagnostic's message, or `None` when the analyzer finds nothing.
fn first(root: Value) -> Option<String> {
    analyze(&graph(root)).first().map(|d| d.message.clone())
}

fn promoting(mut group: Value, path: &str) -> Value {
    group["promotedStatePaths"] = json!([[path]]);
    group
}

/// A succeed terminal that reads state `result`.
fn reads_result(name: &str) -> Value {
    json!({"kind": "succeed", "name": name,
           "output": {"kind": "record", "fields": {"r": field(json!({"kind": "integer"}), true)}},
           "bindings": [{"target": ["r"], "value": {"source": "state", "path": ["result"]}}]})
}

const UNDEFINED_READ: &str = "selector path is not definitely defined on every reaching path";

#[test]
fn an_optional_promoted_path_passes_on_a_pending_write_of_any_channel() {
    // out: `work` writes its required `out.result`; the write stays pending on `work`.
    let inner = promoting(seq("inner", vec![writes(step("work"), "result")]), "result");
    assert_eq!(
        first(seq("root", vec![inner.clone(), succeed("done")])),
        None
    );
    // The promoted path is still not definite: an unrouted read fails at the read.
    assert_eq!(
        first(seq("root", vec![inner, reads_result("done")])).as_deref(),
        Some(UNDEFINED_READ)
    );

    // signal: a verifier's signal is always present when it succeeds.
    let mut check = verifier("check");
    check["writeBindings"] = json!([{"value": {"node": "check", "channel": "signal",
                                              "path": ["verdict"]}, "target": ["verdict"]}]);
    let mut inner = promoting(seq("inner", vec![check]), "verdict");
    inner["state"]["fields"]["verdict"] = field(
        json!({"kind": "enum",
                                                      "values": ["accepted", "rejected"]}),
        false,
    );
    let mut root = seq("root", vec![inner, succeed("done")]);
    root["state"] = inner_state(&root);
    assert_eq!(first(root), None);

    // An optional source path guarantees nothing, so the promotion fails.
    let mut optional = writes(step("work"), "result");
    optional["output"]["fields"]["result"]["required"] = json!(false);
    let inner = promoting(seq("inner", vec![optional]), "result");
    assert_eq!(
        first(seq("root", vec![inner, succeed("done")])).as_deref(),
        Some("promoted path is not definitely defined on completion")
    );
}

/// The state of the first child of `root` (used when a test widens a child's state).
fn inner_state(root: &Value) -> Value {
    root["children"][0]["state"].clone()
}

#[test]
fn a_write_pending_from_before_a_group_is_not_the_groups_write() {
    let route = choice(
        "route",
        vec![(errors_of("work"), fail("failed"))],
        Some(step("next")),
    );
    // The choice resolves `work`'s write in its otherwise, but the write was made before the
    // choice: promoting it from the choice fails (§13.7).
    let promoted_choice = promoting(route.clone(), "result");
    assert_eq!(
        first(seq(
            "root",
            vec![
                writes(step("work"), "result"),
                promoted_choice,
                reads_result("done")
            ]
        ))
        .as_deref(),
        Some("promoted path is not defined by every completing alternative")
    );
    // The same for a sequence around the choice.
    let wrapped = promoting(seq("wrapped", vec![route.clone()]), "result");
    assert_eq!(
        first(seq(
            "root",
            vec![
                writes(step("work"), "result"),
                wrapped,
                reads_result("done")
            ]
        ))
        .as_deref(),
        Some("promoted path is not definitely defined on completion")
    );
    // Without a promotion the resolved write is visible after the choice.
    assert_eq!(
        first(seq(
            "root",
            vec![
                writes(step("work"), "result"),
                route.clone(),
                reads_result("done")
            ]
        )),
        None
    );
    // A write made inside the sequence and resolved there is the sequence's own.
    let own = promoting(
        seq("own", vec![writes(step("work"), "result"), route]),
        "result",
    );
    assert_eq!(first(seq("root", vec![own, reads_result("done")])), None);
}

/// `root: [check, pick: verdict accepted → a, otherwise → b, then]`.
fn after_pick(then: Value, pick_promotes: bool, a: Value, b: Value) -> Value {
    let mut pick = choice("pick", vec![(verdict("check", &["accepted"]), a)], Some(b));
    if pick_promotes {
        pick = promoting(pick, "result");
    }
    seq("root", vec![verifier("check"), pick, then])
}

#[test]
fn an_error_guard_may_read_a_node_of_the_alternative_its_prefix_selects() {
    let accepted = || verdict("check", &["accepted"]);
    let guarded = |when: Value| {
        let gate = choice("gate", vec![(when, fail("failed"))], Some(succeed("done")));
        first(after_pick(gate, false, step("a"), step("b")))
    };
    let not_dominating = Some("control selector a does not dominate this guard".to_owned());
    assert_eq!(guarded(errors_of("a")), not_dominating);
    // `a` ran wherever `check` accepted: an earlier conjunct, or the negation of an earlier
    // disjunct, selects its alternative.
    assert_eq!(
        guarded(json!({"kind": "all", "guards": [accepted(), errors_of("a")]})),
        None
    );
    assert_eq!(
        guarded(
            json!({"kind": "any", "guards": [{"kind": "not", "guard": accepted()},
                                                  errors_of("a")]})
        ),
        None
    );
    // A later conjunct is no prefix, and an earlier disjunct that held is the wrong one.
    assert_eq!(
        guarded(json!({"kind": "all", "guards": [errors_of("a"), accepted()]})),
        not_dominating
    );
    assert_eq!(
        guarded(json!({"kind": "any", "guards": [accepted(), errors_of("a")]})),
        not_dominating
    );
    // Only `error` selectors are excepted.
    assert_eq!(
        first(after_pick(
            choice(
                "gate",
                vec![(
                    json!({"kind": "all", "guards": [accepted(),
                                 is_in(sel("b", "error", None), &ERRORS)]}),
                    fail("failed")
                )],
                Some(succeed("done"))
            ),
            false,
            step("a"),
            step("b")
        ))
        .as_deref(),
        Some("control selector b does not dominate this guard")
    );
}

#[test]
fn a_path_every_alternative_writes_is_one_pending_write_of_the_choice() {
    let accepted = || verdict("check", &["accepted"]);
    let both_routed = json!({"kind": "any", "guards": [
        {"kind": "all", "guards": [accepted(), errors_of("a")]},
        {"kind": "all", "guards": [{"kind": "not", "guard": accepted()}, errors_of("b")]}]});
    let gate = |when: Value, then: Value| choice("gate", vec![(when, fail("failed"))], Some(then));
    let writers = || (writes(step("a"), "result"), writes(step("b"), "result"));

    // The choice promotes the optional `result` on its common pending write, and a later
    // residual ruling out both producers' errors resolves it.
    let (a, b) = writers();
    let routed = after_pick(gate(both_routed.clone(), reads_result("done")), true, a, b);
    assert_eq!(first(routed), None);
    // After the routing choice the write stays resolved.
    let (a, b) = writers();
    let mut later = after_pick(gate(both_routed.clone(), step("next")), true, a, b);
    later["children"]
        .as_array_mut()
        .unwrap()
        .push(reads_result("done"));
    assert_eq!(first(later), None);
    // Ruling out only `a`'s errors leaves the `b` alternative unresolved.
    let (a, b) = writers();
    let half = json!({"kind": "all", "guards": [accepted(), errors_of("a")]});
    assert_eq!(
        first(after_pick(gate(half, reads_result("done")), true, a, b)).as_deref(),
        Some(UNDEFINED_READ)
    );
    // Without the promotion the writes never leave the choice.
    let (a, b) = writers();
    assert_eq!(
        first(after_pick(
            gate(both_routed, reads_result("done")),
            false,
            a,
            b
        ))
        .as_deref(),
        Some(UNDEFINED_READ)
    );
}

#[test]
fn a_map_over_a_non_array_reports_its_body_item_selectors() {
    let mut work = step("work");
    work["input"] =
        json!({"kind": "record", "fields": {"value": field(json!({"kind": "integer"}), true)}});
    work["inputBindings"] =
        json!([{"target": ["value"], "value": {"source": "item", "path": ["value"]}}]);
    let mut over_value = map("each", 2, work);
    over_value["over"]["path"] = json!(["value"]);
    let diagnostics = analyze(&graph(seq("root", vec![over_value, succeed("done")])));
    assert_eq!(
        messages(&diagnostics),
        vec![
            "item selector is legal only inside a map body",
            "map selector must resolve to an array"
        ]
    );
}

#[test]
fn loops_have_no_iteration_ceiling_and_folds_stop_at_the_first_excess() {
    let rounds = |n: u64| loop_("again", n, None, step("work"));
    assert_eq!(first(seq("root", vec![rounds(101), succeed("done")])), None);
    // 70,000 rounds exceed executions and loop entries; only executions are reported.
    let diagnostics = analyze(&graph(seq("root", vec![rounds(70_000), succeed("done")])));
    assert_eq!(messages(&diagnostics), vec!["node executions exceed 65536"]);
}

#[test]
fn a_choice_promotes_a_path_written_definitely_in_one_alternative_and_pending_in_another() {
    // `a`'s write is resolved inside its alternative; `b`'s stays pending. The choice carries
    // one pending write, resolved where a later residual shows the producers of some
    // completing alternative succeeding (the definite one's producer too).
    let routed_a = promoting(
        seq(
            "routedA",
            vec![
                writes(step("a"), "result"),
                choice(
                    "routeA",
                    vec![(errors_of("a"), fail("aFailed"))],
                    Some(step("x")),
                ),
            ],
        ),
        "result",
    );
    let accepted = || verdict("check", &["accepted"]);
    let gate = |when: Value| {
        choice(
            "gate",
            vec![(when, fail("failed"))],
            Some(reads_result("done")),
        )
    };
    let graph_with = |when: Value| {
        after_pick(
            gate(when),
            true,
            routed_a.clone(),
            writes(step("b"), "result"),
        )
    };
    let both = json!({"kind": "any", "guards": [
        {"kind": "all", "guards": [accepted(), errors_of("a")]},
        {"kind": "all", "guards": [{"kind": "not", "guard": accepted()}, errors_of("b")]}]});
    assert_eq!(first(graph_with(both)), None);
    // Leaving `a` unmentioned where its alternative was taken resolves nothing.
    let only_b = json!({"kind": "all", "guards": [{"kind": "not", "guard": accepted()},
                                                   errors_of("b")]});
    assert_eq!(first(graph_with(only_b)).as_deref(), Some(UNDEFINED_READ));
}

#[test]
fn a_read_outside_a_narrower_group_state_is_typed_by_its_definition() {
    // `value` is defined (required in the input) but not declared by the inner sequence:
    // the read reports the missing path and is still typed as an integer.
    let mut inner = seq(
        "inner",
        vec![
            json!({"kind": "step", "name": "read", "worker": "test.step@1",
            "input": {"kind": "record", "fields": {"v": field(json!({"kind": "string"}), true)}},
            "output": result_output(), "attempts": 1, "writeBindings": [],
            "inputBindings": [{"target": ["v"], "value": {"source": "state", "path": ["value"]}}]}),
        ],
    );
    inner["state"]["fields"]
        .as_object_mut()
        .unwrap()
        .remove("value");
    assert_eq!(
        first(seq("root", vec![inner, succeed("done")])).as_deref(),
        Some("binding source is not a subtype of its target")
    );
}

#[test]
fn bindings_into_a_non_record_payload_are_still_checked() {
    let done = json!({"kind": "succeed", "name": "done",
        "output": {"kind": "array", "items": {"kind": "integer"}},
        "bindings": [{"target": ["out"], "value": {"source": "state", "path": ["value"]}}]});
    assert_eq!(
        messages(&analyze(&graph(seq("root", vec![done])))),
        vec![
            "binding target does not exist in declared payload",
            "v1 field bindings cannot construct a whole non-record payload; use null or record"
        ]
    );
}

#[test]
fn a_loop_exit_whose_space_is_past_the_ceiling_is_unsatisfiable() {
    let mut check = verifier("check");
    check["name"] = json!("check");
    let until = json!({"kind": "k_of_map", "count": 2,
                       "value": {"name": "check", "source": "error", "field": null},
                       "labels": ERRORS});
    let each = map("each", 1025, loop_("again", 3, Some(until), check));
    let diagnostics = analyze(&graph(seq("root", vec![each, succeed("done")])));
    assert_eq!(
        (
            diagnostics[0].message.as_str(),
            diagnostics[1].message.as_str()
        ),
        (
            "loop exit guard is unsatisfiable",
            "control assignment space exceeds 65536"
        )
    );
}

#[test]
fn a_dead_otherwise_is_reported_under_its_choice_even_when_its_name_is_a_duplicate() {
    let mut twin = step("check");
    twin["worker"] = json!("test.other@1");
    let pick = choice(
        "pick",
        vec![
            (errors_of("check"), fail("failed")),
            (verdict("check", &["accepted", "rejected"]), step("next")),
        ],
        Some(twin),
    );
    let diagnostics = analyze(&graph(seq(
        "root",
        vec![verifier("check"), pick, succeed("done")],
    )));
    let dead = diagnostics
        .iter()
        .find(|d| d.message.starts_with("choice otherwise is unreachable"))
        .unwrap();
    assert_eq!(dotted(dead), "root.root.children.1.pick.otherwise.check");
}

#[test]
fn a_root_field_the_run_fills_is_read_as_the_root_state_declares_it() {
    // `items` is optional in the input, so the run fills it; it is then what the root state
    // declares (`[number]`), not the input's narrower `[integer]`.
    let list = |item: &str| {
        json!({"kind": "record", "fields": {"items": field(
        json!({"kind": "array", "items": {"kind": item}}), true)}})
    };
    let mut input = list("integer");
    input["fields"]["items"]["required"] = json!(false);
    let mut inner = seq("inner", vec![step("work")]);
    inner["state"] = list("integer");
    let mut root = seq("root", vec![inner, succeed("done")]);
    root["state"] = list("number");
    let spec = trellis_graph::GraphSpec::parse(
        &json!({"profile": "openengine.graph.full/v1", "initialInput": input,
                "policy": {"policy": "policy.strict@1", "default": "deny"}, "root": root}),
        &trellis_graph::json::JsonPath::root(),
    )
    .unwrap();
    assert_eq!(
        messages(&analyze(&spec)),
        vec!["incoming state is not a subtype of the group's declared state"]
    );
    assert_eq!(
        dotted(&analyze(&spec)[0]),
        "root.root.children.0.inner.state"
    );

    // The root itself is checked against the input's own type for that field.
    let mut strings = list("string");
    strings["fields"]["items"]["required"] = json!(false);
    let mut root = seq("root", vec![step("work"), succeed("done")]);
    root["state"] = list("number");
    let spec = trellis_graph::GraphSpec::parse(
        &json!({"profile": "openengine.graph.full/v1", "initialInput": strings,
                "policy": {"policy": "policy.strict@1", "default": "deny"}, "root": root}),
        &trellis_graph::json::JsonPath::root(),
    )
    .unwrap();
    let diagnostics = analyze(&spec);
    assert_eq!(dotted(&diagnostics[0]), "root.root.state");
}

#[test]
fn a_first_join_reading_a_selector_with_no_candidates_never_settles() {
    // The guard is used on the branch where its node is available although it is illegal;
    // a `group` field a step lacks has no candidate, so the par never settles and the root
    // does not fall through. An illegal `error` selector of a sequence has one.
    let race = |when: Value| {
        let race = par(
            "race",
            json!({"kind": "first", "when": when}),
            vec![seq("left", vec![step("a")]), step("b")],
        );
        messages(&analyze(&graph(seq("root", vec![race])))).join(" | ")
    };
    let joined = is_in(sel("a", "group", Some("joined")), &["reached"]);
    assert_eq!(race(joined), "illegal control selector for node a");
    assert_eq!(
        race(errors_of("left")),
        "normal-success path falls through without explicit succeed or fail terminal | \
         illegal control selector for node left"
    );
}

#[test]
fn a_duplicate_writing_from_its_own_name_reads_the_first_occurrence() {
    // The name `work` resolves to the verifier entered first; it may still fail, so the
    // second `work`'s write of its own output is on that error path.
    let twin = writes(step("work"), "result");
    let diagnostics = analyze(&graph(seq(
        "root",
        vec![verifier("work"), twin, succeed("done")],
    )));
    assert_eq!(
        diagnostics[0].message,
        "node output work is unavailable on its error path"
    );
}

#[test]
fn a_duplicate_reads_its_own_out_but_the_first_occurrences_signals() {
    // `work` is first a fail terminal (no outputs), then a verifier writing from its own name.
    let with_write = |channel: &str, path: &str, target: &str| {
        let mut twin = verifier("work");
        twin["signals"] = json!({"verdict": ["accepted", "rejected"]});
        twin["writeBindings"] = json!([{"value": {"node": "work", "channel": channel,
                                                  "path": [path]}, "target": [target]}]);
        let verdict = field(
            json!({"kind": "enum", "values": ["accepted", "rejected"]}),
            false,
        );
        let mut route = choice(
            "route",
            vec![(errors_of("first"), fail("work"))],
            Some(twin),
        );
        route["state"]["fields"]["verdict"] = verdict.clone();
        let mut root = seq("root", vec![step("first"), route, succeed("done")]);
        root["state"]["fields"]["verdict"] = verdict;
        analyze(&graph(root)).first().map(|d| d.message.clone())
    };
    // Its own `out` is read from its own declaration: only the duplicate is reported.
    assert_eq!(
        with_write("out", "result", "result").as_deref(),
        Some("duplicate node name work")
    );
    // Its signal is looked up by name and finds the fail terminal (the reference's answer).
    assert_eq!(
        with_write("signal", "verdict", "verdict").as_deref(),
        Some("node output selector channel or path is invalid")
    );
}

#[test]
fn only_writes_of_exactly_the_promoted_path_are_type_checked() {
    // `inner` writes the signal `verdict` (three labels) into `review.verdict`; the root's
    // `review.verdict` admits two. Promoting `review` does not check the write below it;
    // promoting `review.verdict` does (both as the reference answers).
    let review = |labels: &[&str]| {
        field(
            json!({"kind": "record", "fields": {"verdict": field(
                json!({"kind": "enum", "values": labels}), false)}}),
            true,
        )
    };
    let promoting_review = |path: Value| {
        let mut check = verifier("check");
        check["signals"] = json!({"verdict": ["accepted", "revise", "stop"]});
        check["writeBindings"] = json!([{"value": {"node": "check", "channel": "signal",
                                                  "path": ["verdict"]},
                                        "target": ["review", "verdict"]}]);
        let mut inner = seq("inner", vec![check]);
        inner["state"]["fields"]["review"] = review(&["accepted", "revise", "stop"]);
        inner["promotedStatePaths"] = json!([path]);
        let mut root = seq("root", vec![inner, succeed("done")]);
        root["state"]["fields"]["review"] = review(&["accepted", "revise"]);
        first(root)
    };
    assert_eq!(promoting_review(json!(["review"])), None);
    assert_eq!(
        promoting_review(json!(["review", "verdict"])).as_deref(),
        Some("promoted value is not a subtype of its enclosing state target")
    );
}

#[test]
fn an_optional_input_record_is_filled_inside_when_given() {
    // The input's optional `t` may leave out `y`; the root state requires `y` inside its
    // optional `t`. A run fills a given `t`'s missing string, so the root state fits (the
    // reference admits it); a wider enum is still refused.
    let with_t = |input_t: Value, state_t: Value| {
        let record = |t: Value| {
            json!({"kind": "record", "fields": {
                "value": field(json!({"kind": "integer"}), true), "t": field(t, false)}})
        };
        let mut root = seq("root", vec![succeed("done")]);
        root["state"] = record(state_t);
        let spec = trellis_graph::GraphSpec::parse(
            &json!({"profile": "openengine.graph.full/v1", "initialInput": record(input_t),
                    "policy": {"policy": "policy.strict@1", "default": "deny"}, "root": root}),
            &trellis_graph::json::JsonPath::root(),
        )
        .unwrap();
        analyze(&spec).first().map(|d| d.message.clone())
    };
    let pair = |y_required: bool| {
        json!({"kind": "record", "fields": {"x": field(json!({"kind": "integer"}), true),
                                            "y": field(json!({"kind": "string"}), y_required)}})
    };
    assert_eq!(with_t(pair(false), pair(true)), None);
    assert_eq!(
        with_t(
            json!({"kind": "enum", "values": ["a", "z"]}),
            json!({"kind": "enum", "values": ["a"]})
        )
        .as_deref(),
        Some("incoming state is not a subtype of the group's declared state")
    );
}
