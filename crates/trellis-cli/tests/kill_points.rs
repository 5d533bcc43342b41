//! Kill points: runs whose controller is SIGKILLed at seeded random points and resumed until
//! they finish never run a settled execution twice and end with the uninterrupted output — a
//! 20-node chain with a parallel fan, and a converging loop followed by a map.
//!
//! `TRELLIS_KILL_POINT_SEEDS` sets how many seeds run per scenario (default 10 when `CI` is set,
//! 50 with `TRELLIS_HARDENING_LONG`, else 3).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::graph::*;
use support::{
    STATE_TIMEOUT, Sandbox, describe, is_controller_of, process_exited, send_signal,
    uniform_worker_plan, wait_until,
};
use trellis_runtime::{ExecutionPhase, Runtime, parse_run_id};

/// Most kills per seed; the run is then left to finish.
const MAX_KILLS: usize = 4;
/// How long each chain worker sleeps, so kills land while workers run as well as between.
const WORKER_DELAY_MS: &str = "40";

/// A small deterministic generator (splitmix64), so a failing seed can be replayed.
struct SeededRandom(u64);

impl SeededRandom {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

fn chain(n: usize, reads: &[&str], write_to: Option<&str>) -> Value {
    let input: Vec<(&str, Value, bool)> = reads.iter().map(|f| (*f, integer(), true)).collect();
    let bindings: Vec<(&str, Value)> = reads.iter().map(|f| (*f, state_path(&[f]))).collect();
    let writes: Vec<(&str, &str)> = write_to.map(|target| (target, "v")).into_iter().collect();
    step(
        &format!("chain{n}"),
        record(&input),
        record(&[("v", integer(), true)]),
        &bindings,
        &writes,
    )
}

/// Steps `chain<from>..=chain<to>` one after another on `v`, each routed on its errors, with
/// `rest` after the last.
fn sequence(from: usize, to: usize, state: &Value, rest: Value) -> Value {
    (from..=to).rev().fold(rest, |rest, n| {
        seq(
            &format!("stage{n}"),
            state,
            vec![
                chain(n, &["v"], Some("v")),
                unless_failed(&format!("chain{n}"), state, rest),
            ],
            &[],
        )
    })
}

/// chain1..6 in sequence; four parallel branches `chain<a>` (writing `p<a>`) then `chain<a+1>`
/// for a = 7, 9, 11, 13; chain15 joining the four fields; chain16..20 in sequence. The run
/// succeeds with `{v}`.
fn twenty_node_graph() -> Value {
    let fans = ["p7", "p9", "p11", "p13"];
    let mut fields = vec![("v", integer(), true)];
    fields.extend(fans.iter().map(|f| (*f, integer(), false)));
    let state = record(&fields);
    let done = succeed(
        "done",
        record(&[("v", integer(), true)]),
        &[("v", state_path(&["v"]))],
    );
    let branches = fans
        .iter()
        .zip([7, 9, 11, 13])
        .map(|(field, a)| {
            seq(
                &format!("branch{a}"),
                &state,
                vec![
                    chain(a, &["v"], Some(field)),
                    unless_failed(&format!("chain{a}"), &state, chain(a + 1, &["v"], None)),
                ],
                &[field],
            )
        })
        .collect();
    let fan = par("fan", &state, branches, json!({"kind": "all"}), &fans);
    let joined = seq(
        "joined",
        &state,
        vec![
            chain(15, &fans, Some("v")),
            unless_failed("chain15", &state, sequence(16, 20, &state, done)),
        ],
        &[],
    );
    let route_fan = choice(
        "routeFan",
        &state,
        vec![(group_in("fan", "joined", &["reached"]), joined)],
        Some(fail("fanFailed", "worker_failed")),
    );
    let fan_stage = seq("fanStage", &state, vec![fan, route_fan], &[]);
    graph(
        record(&[("v", integer(), true)]),
        seq("root", &state, vec![sequence(1, 6, &state, fan_stage)], &[]),
    )
}

/// The state of the loop-and-map scenario: a loop converging in round 3, then a map of 8.
fn loop_and_map_graph() -> Value {
    let state = record(&[
        ("items", array(item_type()), true),
        ("round", integer(), true),
        ("squares", array(integer()), false),
    ]);
    let output = record(&[
        ("round", integer(), true),
        ("squares", array(integer()), true),
    ]);
    let done = succeed(
        "done",
        output,
        &[
            ("round", state_path(&["round"])),
            ("squares", state_path(&["squares"])),
        ],
    );
    let after_loop = choice(
        "afterLoop",
        &state,
        vec![(
            group_in("rounds", "terminated", &["converged"]),
            seq("mapStage", &state, vec![squaring_map(&state, 8), done], &[]),
        )],
        Some(fail("notConverged", "not_converged")),
    );
    graph(
        state.clone(),
        seq(
            "root",
            &state,
            vec![converging_loop(&state), after_loop],
            &[],
        ),
    )
}

/// A graph to interrupt, its input, and how many executions an uninterrupted run makes.
struct Scenario {
    graph: Value,
    input: Value,
    executions: u64,
}

fn chain_scenario() -> Scenario {
    Scenario {
        graph: twenty_node_graph(),
        input: json!({"v": 7}),
        executions: 20,
    }
}

fn loop_and_map_scenario() -> Scenario {
    let items: Vec<Value> = (1..=8).map(|value| json!({"value": value})).collect();
    Scenario {
        graph: loop_and_map_graph(),
        input: json!({"items": items, "round": 0}),
        // bump and checkRound three rounds each, square and noopSquared per item.
        executions: 3 + 3 + 8 + 8,
    }
}

fn run_args(sandbox: &Sandbox, scenario: &Scenario) -> Vec<String> {
    sandbox.run_args(
        &scenario.graph,
        &scenario.input,
        &uniform_worker_plan(&[("WORKER_DELAY_MS", WORKER_DELAY_MS)]),
    )
}

/// `value` with every object's keys sorted, as the worker writes its calls.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// One execution's identity as the worker logs it: `[node, input]` (a loop round or a map
/// item differs from the others of its node by its input).
fn call_key(node: &str, input: &Value) -> String {
    json!([node, sorted(input)]).to_string()
}

/// Calls whose worker reported an outcome (in this run or, reused, in a predecessor).
fn settled_calls(runtime: &Runtime, run: &str) -> BTreeSet<String> {
    let run_id = parse_run_id(run).expect("run id");
    let status = runtime.status(&run_id).expect("status");
    status
        .executions
        .iter()
        .filter(|e| e.phase == ExecutionPhase::Completed && e.settled_by.is_none())
        .map(|e| {
            let detail = runtime.execution(&run_id, e.id).expect("execution");
            call_key(&e.node, &detail.input)
        })
        .collect()
}

fn executions_started(runtime: &Runtime, run: &str) -> u64 {
    let run_id = parse_run_id(run).expect("run id");
    runtime.status(&run_id).expect("status").executions_started
}

/// Waits until `run` started `count` executions (or finished), then after `delay` SIGKILLs its
/// controller. Returns false if the run finished before it could be killed.
fn kill_after(
    sandbox: &Sandbox,
    runtime: &Runtime,
    run: &str,
    count: u64,
    delay: Duration,
) -> bool {
    let run_id = parse_run_id(run).expect("run id");
    let deadline = Instant::now() + STATE_TIMEOUT;
    // A tight poll: resumed runs re-settle reused work within milliseconds.
    let status = loop {
        let status = runtime.status(&run_id).expect("status");
        if status.summary.terminal().is_some() || status.executions_started >= count {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} stalled before {count} starts"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    std::thread::sleep(delay);
    let Some(controller) = status.controller.map(|c| c.pid) else {
        return false;
    };
    if !is_controller_of(controller, run) {
        return false;
    }
    send_signal(controller, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        process_exited(controller).then_some(())
    });
    // A worker forked at the moment of the kill holds a copy of the controller's lease until
    // it execs or exits, so the loss may be observable a few milliseconds late.
    let status = wait_until("the killed run to be finalized", STATE_TIMEOUT, || {
        let status = sandbox.status(run);
        (status["status"]["phase"] == "finished").then_some(status)
    });
    let terminal = &status["status"]["terminalResult"];
    if terminal["status"] == "succeeded" {
        return false;
    }
    let left: Vec<String> = sandbox.processes().into_iter().map(describe).collect();
    assert_eq!(
        terminal,
        &json!({"status": "failed", "reason": "runtime_lost"}),
        "run {run}: {status}\nstill running: {left:?}"
    );
    true
}

/// How often each call ran, from the worker's `calls.log`.
fn call_counts(sandbox: &Sandbox) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(sandbox.workspace.join("calls.log")).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        *counts.entry(line.to_owned()).or_insert(0) += 1;
    }
    counts
}

fn uninterrupted_output(scenario: &Scenario) -> Value {
    let sandbox = Sandbox::new();
    let args = run_args(&sandbox, scenario);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lines = sandbox.trellis(&args).success().ndjson();
    let result = lines.last().expect("events")["status"]["terminalResult"].clone();
    assert_eq!(result["status"], "succeeded", "{result}");
    let counts = call_counts(&sandbox);
    assert_eq!(counts.len() as u64, scenario.executions, "{counts:?}");
    assert!(counts.values().all(|&c| c == 1), "{counts:?}");
    result["output"].clone()
}

fn seed_count() -> u64 {
    if let Ok(text) = std::env::var("TRELLIS_KILL_POINT_SEEDS") {
        return text.parse().expect("TRELLIS_KILL_POINT_SEEDS is a number");
    }
    // Part of the hardening suite: 2 scenarios × 10 seeds = 20 killed runs in CI.
    if std::env::var_os("TRELLIS_HARDENING_LONG").is_some() {
        50
    } else if std::env::var_os("CI").is_some() {
        10
    } else {
        3
    }
}

/// One seed: run, kill and resume until the run succeeds; returns the final output and how
/// many times the controller was killed.
fn interrupted_run(scenario: &Scenario, seed: u64) -> (Value, usize) {
    let mut random = SeededRandom(seed);
    let sandbox = Sandbox::new();
    let mut run = sandbox.start_detached(&run_args(&sandbox, scenario));
    let runtime = sandbox.runtime();
    // Call → how often it had run when a kill first found it settled; it must never run again.
    let mut runs_when_settled: BTreeMap<String, usize> = BTreeMap::new();
    let mut kills = 0;
    let mut history = Vec::new();
    let mut first_settled: Option<BTreeSet<String>> = None;
    while kills < MAX_KILLS {
        let started = executions_started(&runtime, &run);
        let count = started + random.between(1, scenario.executions);
        // Half the kills land right at the k-th start, the rest up to 120 ms later.
        let delay = match random.between(0, 1) {
            0 => Duration::ZERO,
            _ => Duration::from_millis(random.between(1, 120)),
        };
        if !kill_after(&sandbox, &runtime, &run, count, delay) {
            break;
        }
        kills += 1;
        let settled = settled_calls(&runtime, &run);
        if first_settled.is_none() {
            first_settled = Some(settled.clone());
        }
        history.push(format!(
            "run {run} killed after {count} starts, settled {settled:?}"
        ));
        let counts = call_counts(&sandbox);
        for call in settled {
            let ran = counts.get(&call).copied().unwrap_or(0);
            runs_when_settled.entry(call).or_insert(ran);
        }
        let receipt = sandbox
            .trellis(&["resume", &run, "--detach", "--json"])
            .success();
        run = receipt.json()["runId"].as_str().expect("runId").to_owned();
    }
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "succeeded", "seed {seed}: {result}");

    let counts = call_counts(&sandbox);
    assert_eq!(
        counts.len() as u64,
        scenario.executions,
        "seed {seed}: every call ran: {counts:?}"
    );
    for (call, ran) in &runs_when_settled {
        assert_eq!(
            counts.get(call),
            Some(ran),
            "seed {seed}: {call} settled before a kill yet ran again: {counts:?}\n{}",
            history.join("\n")
        );
    }
    // A call that settled on its first invocation, before any kill, ran exactly once.
    if let Some(first) = first_settled {
        for call in first {
            assert_eq!(counts.get(&call), Some(&1), "seed {seed}: {call}");
        }
    }
    (result["output"].clone(), kills)
}

fn never_repeats_settled_work(scenario: &Scenario, name: &str) {
    let expected = uninterrupted_output(scenario);
    let seeds = seed_count();
    let mut total_kills = 0;
    for seed in 1..=seeds {
        let (output, kills) = interrupted_run(scenario, seed);
        assert_eq!(output, expected, "seed {seed}");
        total_kills += kills;
    }
    eprintln!(
        "kill trials, {name}: {seeds} seeded runs, {total_kills} controller SIGKILLs, \
         no settled call ran again, every output right"
    );
}

#[test]
fn a_killed_and_resumed_chain_never_repeats_settled_work_and_matches_an_uninterrupted_run() {
    never_repeats_settled_work(&chain_scenario(), "20-node chain with a fan");
}

#[test]
fn a_killed_and_resumed_loop_and_map_never_repeat_settled_work_and_match_an_uninterrupted_run() {
    never_repeats_settled_work(&loop_and_map_scenario(), "loop then map");
}

/// chain1..=chain5 in sequence on `v`; the run succeeds with `{v}`.
fn five_step_scenario() -> Scenario {
    let state = record(&[("v", integer(), true)]);
    let done = succeed(
        "done",
        record(&[("v", integer(), true)]),
        &[("v", state_path(&["v"]))],
    );
    Scenario {
        graph: graph(
            state.clone(),
            seq("root", &state, vec![sequence(1, 5, &state, done)], &[]),
        ),
        input: json!({"v": 3}),
        executions: 5,
    }
}

/// How often `node` ran, from the worker's `calls.log`.
fn runs_of(counts: &BTreeMap<String, usize>, node: &str) -> usize {
    let prefix = format!("[\"{node}\",");
    counts
        .iter()
        .filter(|(call, _)| call.starts_with(&prefix))
        .map(|(_, ran)| ran)
        .sum()
}

/// The deterministic kill point of the merged commit: the controller dies right after the one
/// transaction that holds chain2's outcome and chain3's dispatch, before chain3's worker starts
/// (the test hook `TRELLIS_TEST_DIE_AFTER_STEP_COMMIT`). The dispatch is in the ledger, so the
/// loss is seen and named; chain3 never ran, so its `runtime_lost` crash is not reused and the
/// resumed run runs it exactly once, while chain1 and chain2 never run again.
#[test]
fn a_controller_dying_between_a_step_commit_and_the_spawn_loses_and_repeats_no_dispatch() {
    let scenario = five_step_scenario();
    let expected = uninterrupted_output(&scenario);
    let sandbox = Sandbox::new();
    let mut args = run_args(&sandbox, &scenario);
    args.push("--detach".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // Step commit 1 settles chain1 and dispatches chain2; step commit 2 dispatches chain3.
    let receipt = sandbox
        .trellis_with_env(&args, &[("TRELLIS_TEST_DIE_AFTER_STEP_COMMIT", "2")])
        .success()
        .json();
    let run = receipt["runId"].as_str().expect("runId").to_owned();
    let terminal = sandbox.wait_finished(&run);
    assert_eq!(
        terminal,
        json!({"status": "failed", "reason": "runtime_lost"}),
        "{}",
        sandbox.status(&run)
    );

    let runtime = sandbox.runtime();
    let run_id = parse_run_id(&run).expect("run id");
    let status = runtime.status(&run_id).expect("status");
    let nodes: Vec<(&str, bool)> = status
        .executions
        .iter()
        .map(|e| (e.node.as_str(), e.settled_by.is_none()))
        .collect();
    // chain1 and chain2 settled by their workers; chain3 dispatched (durably) and settled by
    // the loss; nothing after it was dispatched.
    assert_eq!(
        nodes,
        [("chain1", true), ("chain2", true), ("chain3", false)],
        "{status:?}"
    );
    let counts = call_counts(&sandbox);
    assert_eq!(runs_of(&counts, "chain1"), 1, "{counts:?}");
    assert_eq!(runs_of(&counts, "chain2"), 1, "{counts:?}");
    assert_eq!(runs_of(&counts, "chain3"), 0, "never started: {counts:?}");

    let resumed = sandbox
        .trellis(&["resume", &run, "--detach", "--json"])
        .success()
        .json();
    let successor = resumed["runId"].as_str().expect("runId").to_owned();
    let result = sandbox.wait_finished(&successor);
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(result["output"], expected);
    let counts = call_counts(&sandbox);
    assert_eq!(counts.len() as u64, scenario.executions, "{counts:?}");
    assert!(
        counts.values().all(|&ran| ran == 1),
        "every call ran exactly once: {counts:?}"
    );
}
