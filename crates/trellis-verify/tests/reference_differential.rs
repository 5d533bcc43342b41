//! Behaviours of the shipping reference (Zeroshot 10.19.1) that the differential test
//! (`crates/trellis-cli/tests/reference_agreement.rs`) found beyond graph-contract §13: each on
//! a small graph of our own, with the first diagnostic the reference binary gives for it.

mod support;

use serde_json::{Value, json};
use support::build::*;
use trellis_verify::analyze;

/// The first diagnostic's message and location, or `None` when the analyzer finds nothing.
fn first(root: Value) -> Option<(String, String)> {
    analyze(&graph(root))
        .first()
        .map(|d| (d.message.clone(), dotted(d)))
}

fn first_message(root: Value) -> Option<String> {
    first(root).map(|(message, _)| message)
}

const NOT_EXHAUSTIVE: &str = "choice branches do not cover every legal control assignment";
const UNREACHABLE: &str = "choice branch is unreachable after excluding earlier branches";
const CEILING: &str = "control assignment space exceeds 65536";

/// `k_of_map(count, node.error, [timeout])`.
fn timeouts(count: u64, node: &str) -> Value {
    json!({"kind": "k_of_map", "count": count, "value": sel(node, "error", None),
           "labels": ["timeout"]})
}

fn first_join(when: Value) -> Value {
    json!({"kind": "first", "when": when})
}

/// `before…`, then a `first` par `race` over `branch` and a step `x` with guard `when`, then a
/// choice on `race.raced`: `label` → a step, with or without an otherwise.
fn race_then_choice(
    before: Vec<Value>,
    branch: Value,
    when: Value,
    label: &str,
    otherwise: bool,
) -> Value {
    let race = par("race", first_join(when), vec![branch, step("x")]);
    let raced = is_in(sel("race", "group", Some("raced")), &[label]);
    let after = choice(
        "after",
        vec![(raced, step("r"))],
        otherwise.then(|| step("r2")),
    );
    let mut children = before;
    children.extend([race, after, succeed("done")]);
    seq("root", children)
}

#[test]
fn a_first_join_uses_a_k_of_map_guard_on_the_branch_that_ran_its_map() {
    // The map runs in the branch: its item nodes' `k_of_map` makes that branch a satisfier,
    // so `raced` may be `satisfied` and a choice on `no_satisfier` alone is not exhaustive.
    let in_branch = |branch: Value| {
        first_message(race_then_choice(
            vec![],
            branch,
            timeouts(1, "w"),
            "no_satisfier",
            false,
        ))
    };
    assert_eq!(
        in_branch(map("m", 3, step("w"))).as_deref(),
        Some(NOT_EXHAUSTIVE)
    );
    assert_eq!(
        in_branch(seq("lead", vec![step("y"), map("m", 2, step("w"))])).as_deref(),
        Some(NOT_EXHAUSTIVE)
    );
    assert_eq!(
        in_branch(map("m", 2, seq("body", vec![step("y"), step("w")]))).as_deref(),
        Some(NOT_EXHAUSTIVE)
    );
    // A map nested in the branch's map does not count: the satisfier is never used.
    assert_eq!(in_branch(map("outer", 2, map("m", 2, step("w")))), None);
    // Nor does a map that ran before the par, although the guard may read it there.
    let map_before = |label: &str, otherwise: bool| {
        first_message(race_then_choice(
            vec![map("m", 2, step("w"))],
            step("z"),
            timeouts(1, "w"),
            label,
            otherwise,
        ))
    };
    assert_eq!(map_before("no_satisfier", false), None);
    assert_eq!(map_before("satisfied", true).as_deref(), Some(UNREACHABLE));
    // A map in one alternative of a choice in the branch is not definite there.
    let pick = choice(
        "pick",
        vec![(
            is_in(sel("y", "error", None), &["timeout"]),
            map("m", 2, step("w")),
        )],
        Some(step("q")),
    );
    assert_eq!(
        first_message(race_then_choice(
            vec![step("y")],
            pick,
            timeouts(1, "w"),
            "satisfied",
            true
        ))
        .as_deref(),
        Some(UNREACHABLE)
    );
}

/// The graph of seed 4242 case 3309, minimised: a sequence whose completion conjoins a `first`
/// par (guard: an earlier map's `overflow` and a `k_of_map` over a map branch), a par `all` of
/// two routed branches, and a choice on that par's `joined`.
fn root_over_the_ceiling(items: u64) -> Value {
    let when = json!({"kind": "all", "guards": [
        is_in(sel("m1", "group", Some("overflow")), &["overflow"]), timeouts(2, "w25")]});
    let accepted_twice = json!({"kind": "k_of_n", "count": 1, "labels": ["accepted"],
        "values": [sel("v14", "signal", Some("verdict")), sel("v14", "signal", Some("verdict"))]});
    let c23_when = json!({"kind": "any", "guards": [
        {"kind": "any", "guards": [accepted_twice, errors_of("v14"), errors_of("v15")]},
        verdict("v15", &["rejected"])]});
    let s27 = seq(
        "s27",
        vec![
            verifier("v14"),
            verifier("v15"),
            par(
                "p26",
                first_join(when),
                vec![
                    choice("c23", vec![(c23_when, step("w21"))], None),
                    map("m24", items, step("w25")),
                ],
            ),
        ],
    );
    let routed_branch = |name: &str, head: Value, node: &str| {
        let route = choice(
            &format!("{name}Route"),
            vec![(errors_of(node), fail(&format!("{name}Failed")))],
            None,
        );
        seq(name, vec![head, route])
    };
    let p38 = par(
        "p38",
        json!({"kind": "all"}),
        vec![
            routed_branch("b32", step("w28"), "w28"),
            routed_branch("b37", verifier("v33"), "v33"),
        ],
    );
    let joined = is_in(sel("p38", "group", Some("joined")), &["reached"]);
    seq(
        "root",
        vec![
            map("m1", 2, step("w4")),
            s27,
            p38,
            choice("c41", vec![(joined, step("r39"))], None),
            succeed("done"),
        ],
    )
}

#[test]
fn a_sequence_completion_counts_a_first_joins_k_of_map_satisfier() {
    // 36 verifier outcomes × 2 overflow labels × 35 aggregates of 3 items × 25 routed
    // outcomes × 2 joined labels = 126,000 assignments, past the ceiling, reported at the
    // root's own path.
    assert_eq!(
        first(root_over_the_ceiling(3)),
        Some((CEILING.to_owned(), "root.root".to_owned()))
    );
    // With 2 items there are 15 aggregates: 54,000 assignments, within it.
    assert_eq!(
        first_message(root_over_the_ceiling(2)).as_deref(),
        Some(NOT_EXHAUSTIVE)
    );
}

#[test]
fn a_map_promotes_a_path_its_body_writes_from_an_optional_output() {
    // Seed 2027: a body step writing `results` from an optional `out.result` guarantees
    // nothing, yet the reference admits the map's indexed promotion — the map's array always
    // exists — and a read of it once the map's errors are routed away.
    let mut work = writes(step("work"), "results");
    work["output"]["fields"]["result"]["required"] = json!(false);
    let mut each = map("each", 2, work.clone());
    each["promotedStatePaths"] = json!([["results"]]);
    let mapped_errors = json!({"kind": "k_of_map", "count": 1, "labels": ERRORS,
                               "value": sel("work", "error", None)});
    let read = json!({"kind": "succeed", "name": "done",
        "output": {"kind": "record", "fields": {"results": field(
            json!({"kind": "array", "items": {"kind": "integer"}}), true)}},
        "bindings": [{"target": ["results"], "value": {"source": "state", "path": ["results"]}}]});
    let route = choice(
        "route",
        vec![(mapped_errors, fail("failed"))],
        Some(read.clone()),
    );
    assert_eq!(first_message(seq("root", vec![each.clone(), route])), None);
    // Unrouted, the write is still pending on `work`.
    assert_eq!(
        first_message(seq("root", vec![each.clone(), read])).as_deref(),
        Some("selector path is not definitely defined on every reaching path")
    );

    // A group inside the body still needs the guarantee.
    let mut inner = seq("inner", vec![work]);
    inner["promotedStatePaths"] = json!([["results"]]);
    each["body"] = inner;
    assert_eq!(
        first_message(seq("root", vec![each.clone(), succeed("done")])).as_deref(),
        Some("promoted path is not definitely defined on completion")
    );

    // Without a body write of the path the promotion still fails.
    each["body"] = step("work");
    assert_eq!(
        first_message(seq("root", vec![each, succeed("done")])).as_deref(),
        Some("map promoted path has no indexed body write")
    );
}
