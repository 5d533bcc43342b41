//! Builders for the GraphSpec documents the subprocess tests run (JSON values, nothing more).

use serde_json::{Value, json};

/// Every error label a step or verifier can settle with.
pub const ERROR_LABELS: [&str; 4] = ["timeout", "crash", "malformed", "refusal"];

/// How long a test step may run unless the test says otherwise.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;

pub fn integer() -> Value {
    json!({"kind": "integer"})
}

pub fn string() -> Value {
    json!({"kind": "string"})
}

pub fn null() -> Value {
    json!({"kind": "null"})
}

pub fn array(items: Value) -> Value {
    json!({"kind": "array", "items": items})
}

/// A record type; each field is `(name, type, required)`.
pub fn record(fields: &[(&str, Value, bool)]) -> Value {
    let fields: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, ty, required)| {
            (
                (*name).to_owned(),
                json!({"type": ty, "required": required}),
            )
        })
        .collect();
    json!({"kind": "record", "fields": fields})
}

/// A state selector: `{"source":"state","path":[…]}`.
pub fn state_path(path: &[&str]) -> Value {
    json!({"source": "state", "path": path})
}

/// A map-item selector: `{"source":"item","path":[…]}`.
pub fn item_path(path: &[&str]) -> Value {
    json!({"source": "item", "path": path})
}

fn input_bindings(reads: &[(&str, Value)]) -> Vec<Value> {
    reads
        .iter()
        .map(|(target, value)| json!({"target": [target], "value": value}))
        .collect()
}

fn write_bindings(node: &str, writes: &[(&str, &str)]) -> Vec<Value> {
    writes
        .iter()
        .map(|(target, field)| {
            json!({"target": [target], "value": {"node": node, "channel": "out", "path": [field]}})
        })
        .collect()
}

/// A step run by the command worker `command.<name>@1`; `reads` fill its input fields,
/// `writes` copy fields of its output into the enclosing state.
pub fn step(
    name: &str,
    input: Value,
    output: Value,
    reads: &[(&str, Value)],
    writes: &[(&str, &str)],
) -> Value {
    json!({
        "kind": "step",
        "name": name,
        "worker": format!("command.{name}@1"),
        "input": input,
        "output": output,
        "inputBindings": input_bindings(reads),
        "writeBindings": write_bindings(name, writes),
        "timeoutMs": DEFAULT_TIMEOUT_MS,
        "attempts": 1,
    })
}

/// A verifier with one signal `verdict ∈ {accepted, rejected}` and diagnostic `{round}`.
pub fn verifier(
    name: &str,
    input: Value,
    output: Value,
    reads: &[(&str, Value)],
    writes: &[(&str, &str)],
) -> Value {
    let mut node = step(name, input, output, reads, writes);
    node["kind"] = json!("verifier");
    node["signals"] = json!({"verdict": ["accepted", "rejected"]});
    node["diagnostic"] = record(&[("round", integer(), true)]);
    node
}

/// Sets an executable's `timeoutMs`.
pub fn with_timeout(mut node: Value, timeout_ms: u64) -> Value {
    node["timeoutMs"] = json!(timeout_ms);
    node
}

pub fn seq(name: &str, state: &Value, children: Vec<Value>, promoted: &[&str]) -> Value {
    json!({
        "kind": "seq",
        "name": name,
        "state": state,
        "children": children,
        "promotedStatePaths": promoted_paths(promoted),
    })
}

/// A choice; each branch is `(guard, node)`. Without `otherwise` an unmatched choice falls
/// through to the next sibling.
pub fn choice(
    name: &str,
    state: &Value,
    branches: Vec<(Value, Value)>,
    otherwise: Option<Value>,
) -> Value {
    let branches: Vec<Value> = branches
        .into_iter()
        .map(|(when, node)| json!({"when": when, "node": node}))
        .collect();
    let mut node = json!({
        "kind": "choice",
        "name": name,
        "state": state,
        "branches": branches,
        "promotedStatePaths": [],
    });
    if let Some(otherwise) = otherwise {
        node["otherwise"] = otherwise;
    }
    node
}

pub fn par(
    name: &str,
    state: &Value,
    branches: Vec<Value>,
    join: Value,
    promoted: &[&str],
) -> Value {
    json!({
        "kind": "par",
        "name": name,
        "state": state,
        "branches": branches,
        "join": join,
        "promotedStatePaths": promoted_paths(promoted),
    })
}

pub fn repeat(
    name: &str,
    state: &Value,
    body: Value,
    max_iterations: u64,
    until: Value,
    promoted: &[&str],
) -> Value {
    json!({
        "kind": "loop",
        "name": name,
        "state": state,
        "body": body,
        "maxIterations": max_iterations,
        "until": until,
        "promotedStatePaths": promoted_paths(promoted),
    })
}

pub fn map(
    name: &str,
    state: &Value,
    body: Value,
    over: Value,
    max_items: u64,
    promoted: &[&str],
) -> Value {
    json!({
        "kind": "map",
        "name": name,
        "state": state,
        "body": body,
        "over": over,
        "maxItems": max_items,
        "promotedStatePaths": promoted_paths(promoted),
    })
}

/// A succeed terminal whose output fields are read from state: `(output field, selector)`.
pub fn succeed(name: &str, output: Value, bindings: &[(&str, Value)]) -> Value {
    json!({
        "kind": "succeed",
        "name": name,
        "output": output,
        "bindings": input_bindings(bindings),
    })
}

pub fn fail(name: &str, reason: &str) -> Value {
    json!({"kind": "fail", "name": name, "reason": reason})
}

/// A guard: `node` settled with one of `labels` as its error.
pub fn error_in(node: &str, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": {"name": node, "source": "error", "field": null}, "labels": labels})
}

/// A guard: `node` settled with any error.
pub fn failed(node: &str) -> Value {
    error_in(node, &ERROR_LABELS)
}

/// A guard: at least one item of the enclosing map of `node` settled with any error.
pub fn any_item_failed(node: &str) -> Value {
    json!({
        "kind": "k_of_map",
        "count": 1,
        "value": {"name": node, "source": "error", "field": null},
        "labels": ERROR_LABELS,
    })
}

/// A guard on a verifier's signal.
pub fn signal_in(node: &str, field: &str, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": {"name": node, "source": "signal", "field": field}, "labels": labels})
}

/// A guard on a group control (`terminated`, `raced`, `joined`, `overflow`).
pub fn group_in(node: &str, field: &str, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": {"name": node, "source": "group", "field": field}, "labels": labels})
}

/// A whole GraphSpec document.
pub fn graph(initial_input: Value, root: Value) -> Value {
    json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": initial_input,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": root,
    })
}

fn promoted_paths<'a>(paths: &[&'a str]) -> Vec<Vec<&'a str>> {
    paths.iter().map(|p| vec![*p]).collect()
}

/// `choice <name>`: when `node` failed the run fails `worker_failed`, otherwise `rest` runs.
/// (A choice must cover every outcome, so later work nests in its `otherwise`.)
pub fn unless_failed(node: &str, state: &Value, rest: Value) -> Value {
    choice(
        &format!("route_{node}"),
        state,
        vec![(
            failed(node),
            fail(&format!("{node}_failed"), "worker_failed"),
        )],
        Some(rest),
    )
}

/// State `{value, result?}`: `double` doubles `value` into `result`, routed on its errors,
/// then the run succeeds with `{result}`.
pub fn doubling_graph() -> Value {
    one_step_graph("double")
}

/// State `{value, result?}`: the step `name` turns `value` into `result`, routed on its
/// errors, then the run succeeds with `{result}`.
pub fn one_step_graph(name: &str) -> Value {
    let state = record(&[("value", integer(), true), ("result", integer(), false)]);
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![
                step(
                    name,
                    record(&[("value", integer(), true)]),
                    record(&[("result", integer(), true)]),
                    &[("value", state_path(&["value"]))],
                    &[("result", "result")],
                ),
                unless_failed(
                    name,
                    &state,
                    succeed(
                        "done",
                        record(&[("result", integer(), true)]),
                        &[("result", state_path(&["result"]))],
                    ),
                ),
            ],
            &[],
        ),
    )
}

/// The item type of the maps the tests run: `{value}`.
pub fn item_type() -> Value {
    record(&[("value", integer(), true)])
}

/// `loop rounds`: each round `bump` adds one to `round`, then the verifier `checkRound`
/// accepts once it is 3 (the loop's `until`). `state` must have `round: integer`.
pub fn converging_loop(state: &Value) -> Value {
    let round = record(&[("round", integer(), true)]);
    let body = seq(
        "roundBody",
        state,
        vec![
            step(
                "bump",
                round.clone(),
                round.clone(),
                &[("round", state_path(&["round"]))],
                &[("round", "round")],
            ),
            unless_failed(
                "bump",
                state,
                verifier(
                    "checkRound",
                    round.clone(),
                    round,
                    &[("round", state_path(&["round"]))],
                    &[],
                ),
            ),
        ],
        &["round"],
    );
    repeat(
        "rounds",
        state,
        body,
        5,
        signal_in("checkRound", "verdict", &["accepted"]),
        &["round"],
    )
}

/// `map fanOut` over `items`: `square` squares each item's value into `squares` (promoted as
/// an array), then `noopSquared` runs on the same value. `state` must have `items` and
/// `squares: array<integer>`.
pub fn squaring_map(state: &Value, max_items: u64) -> Value {
    let body = seq(
        "item",
        state,
        vec![
            step(
                "square",
                item_type(),
                record(&[("result", integer(), true)]),
                &[("value", item_path(&["value"]))],
                &[("squares", "result")],
            ),
            unless_failed(
                "square",
                state,
                step(
                    "noopSquared",
                    item_type(),
                    null(),
                    &[("value", item_path(&["value"]))],
                    &[],
                ),
            ),
        ],
        &["squares"],
    );
    map(
        "fanOut",
        state,
        body,
        state_path(&["items"]),
        max_items,
        &["squares"],
    )
}

/// State `{v}`: steps `chain1..=chain<steps>` one after another, each reading and rewriting
/// `v` and routed on its errors; the run succeeds with `{v}` (see [`chain_output`]).
pub fn chain_graph(steps: usize) -> Value {
    let state = record(&[("v", integer(), true)]);
    let done = succeed(
        "done",
        record(&[("v", integer(), true)]),
        &[("v", state_path(&["v"]))],
    );
    let body = (1..=steps).rev().fold(done, |rest, n| {
        let name = format!("chain{n}");
        seq(
            &format!("stage{n}"),
            &state,
            vec![
                step(
                    &name,
                    record(&[("v", integer(), true)]),
                    record(&[("v", integer(), true)]),
                    &[("v", state_path(&["v"]))],
                    &[("v", "v")],
                ),
                unless_failed(&name, &state, rest),
            ],
            &[],
        )
    });
    graph(state, body)
}

/// The output of [`chain_graph`] from input `{v}`, as the test worker computes it.
pub fn chain_output(steps: usize, v: i64) -> Value {
    let v = (1..=steps as i64).fold(v, |v, n| (v * 31 + n) % 1_000_003);
    json!({"v": v})
}

pub fn composite_state() -> Value {
    record(&[
        ("items", array(item_type()), true),
        ("round", integer(), true),
        ("note", string(), false),
        ("squares", array(integer()), false),
    ])
}

/// A race: `raceCheck` accepts at once and writes `note` (then `raceNoted` runs); `slowRival`
/// never finishes and is voided once the first-join is satisfied.
pub fn race(state: &Value) -> Value {
    let checked = seq(
        "checked",
        state,
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
                state,
                step("noopRaceNoted", null(), null(), &[], &[]),
            ),
        ],
        &["note"],
    );
    par(
        "race",
        state,
        vec![checked, step("slowRival", null(), null(), &[], &[])],
        json!({"kind": "first", "when": signal_in("raceCheck", "verdict", &["accepted"])}),
        &["note"],
    )
}

/// A race, then a loop converging in round 3, then a map squaring every item: succeeds with
/// `{note: "fast", round: 3, squares}`. State `composite_state()`.
pub fn composite_graph() -> Value {
    let state = composite_state();
    let output = record(&[
        ("note", string(), true),
        ("round", integer(), true),
        ("squares", array(integer()), true),
    ]);
    let finish = succeed(
        "done",
        output,
        &[
            ("note", state_path(&["note"])),
            ("round", state_path(&["round"])),
            ("squares", state_path(&["squares"])),
        ],
    );
    let after_loop = choice(
        "afterLoop",
        &state,
        vec![(
            group_in("rounds", "terminated", &["converged"]),
            seq(
                "mapStage",
                &state,
                vec![squaring_map(&state, 64), finish],
                &[],
            ),
        )],
        Some(fail("notConverged", "not_converged")),
    );
    let after_race = choice(
        "afterRace",
        &state,
        vec![(
            group_in("race", "raced", &["satisfied"]),
            seq(
                "loopStage",
                &state,
                vec![converging_loop(&state), after_loop],
                &[],
            ),
        )],
        Some(fail("raceLost", "race_lost")),
    );
    graph(
        state.clone(),
        seq("root", &state, vec![race(&state), after_race], &[]),
    )
}
