//! Kill points: a 20-node run whose controller is SIGKILLed at seeded random points and resumed
//! until it finishes never runs a settled node twice and ends with the uninterrupted output.
//!
//! `TRELLIS_KILL_POINT_SEEDS` sets how many seeds run (default 10 when `CI` is set, else 3).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::graph::*;
use support::{
    STATE_TIMEOUT, Sandbox, is_controller_of, process_alive, send_signal, uniform_worker_plan,
    wait_until,
};
use trellis_ledger::{ExecutionState, RunId, RunStore, SqliteStore};

/// Most kills per seed; the run is then left to finish.
const MAX_KILLS: usize = 4;
/// How long each chain worker sleeps, so kills land while workers run as well as between.
const WORKER_DELAY_MS: &str = "40";
/// The nodes of the graph, in the order they first run (the par's four in any order).
const NODES: usize = 20;

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

fn run_args(sandbox: &Sandbox) -> Vec<String> {
    sandbox.run_args(
        &twenty_node_graph(),
        &json!({"v": 7}),
        &uniform_worker_plan(&[("WORKER_DELAY_MS", WORKER_DELAY_MS)]),
    )
}

/// Nodes whose worker reported an outcome (in this run or, reused, in a predecessor).
fn settled_nodes(ledger: &SqliteStore, run: &str) -> BTreeSet<String> {
    let snapshot = ledger
        .snapshot(&RunId::new(run).expect("run id"))
        .expect("snapshot");
    snapshot
        .executions
        .values()
        .filter(|e| {
            matches!(
                e.state,
                ExecutionState::Completed {
                    settled_by: None,
                    ..
                }
            )
        })
        .map(|e| e.node.to_string())
        .collect()
}

fn executions_started(ledger: &SqliteStore, run: &str) -> u64 {
    let head = ledger
        .head(&RunId::new(run).expect("run id"))
        .expect("head");
    head.progress.executions_started
}

/// Waits until `run` started `count` executions (or finished), then after `delay` SIGKILLs its
/// controller. Returns false if the run finished before it could be killed.
fn kill_after(
    sandbox: &Sandbox,
    ledger: &SqliteStore,
    run: &str,
    count: u64,
    delay: Duration,
) -> bool {
    let run_id = RunId::new(run).expect("run id");
    let deadline = Instant::now() + STATE_TIMEOUT;
    // A tight poll: resumed runs re-settle reused work within milliseconds.
    let head = loop {
        let head = ledger.head(&run_id).expect("head");
        if head.is_finished() || head.progress.executions_started >= count {
            break head;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} stalled before {count} starts"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    std::thread::sleep(delay);
    let Some(controller) = head.progress.controller.map(|c| c.pid) else {
        return false;
    };
    if !is_controller_of(controller, run) {
        return false;
    }
    send_signal(controller, libc::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        (!process_alive(controller)).then_some(())
    });
    let terminal = sandbox.status(run)["status"]["terminalResult"].clone();
    if terminal["status"] == "succeeded" {
        return false;
    }
    assert_eq!(
        terminal,
        json!({"status": "failed", "reason": "runtime_lost"}),
        "run {run}"
    );
    true
}

fn uninterrupted_output() -> Value {
    let sandbox = Sandbox::new();
    let args = run_args(&sandbox);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let lines = sandbox.trellis(&args).success().ndjson();
    let result = lines.last().expect("events")["status"]["terminalResult"].clone();
    assert_eq!(result["status"], "succeeded", "{result}");
    let counts = count_by_node(&sandbox.invocations());
    assert_eq!(counts.len(), NODES, "{counts:?}");
    assert!(counts.values().all(|&c| c == 1), "{counts:?}");
    result["output"].clone()
}

fn count_by_node(invocations: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for node in invocations {
        *counts.entry(node.clone()).or_insert(0) += 1;
    }
    counts
}

fn seed_count() -> u64 {
    if let Ok(text) = std::env::var("TRELLIS_KILL_POINT_SEEDS") {
        return text.parse().expect("TRELLIS_KILL_POINT_SEEDS is a number");
    }
    if std::env::var_os("CI").is_some() {
        10
    } else {
        3
    }
}

/// One seed: run, kill and resume until the run succeeds; returns the final output.
fn interrupted_run(seed: u64) -> Value {
    let mut random = SeededRandom(seed);
    let sandbox = Sandbox::new();
    let mut run = sandbox.start_detached(&run_args(&sandbox));
    let ledger = sandbox.ledger();
    // Node → how often it had run when a kill first found it settled; it must never run again.
    let mut runs_when_settled: BTreeMap<String, usize> = BTreeMap::new();
    let mut kills = 0;
    let mut history = Vec::new();
    let mut first_settled: Option<BTreeSet<String>> = None;
    while kills < MAX_KILLS {
        let started = executions_started(&ledger, &run);
        let count = started + random.between(1, NODES as u64);
        // Half the kills land right at the k-th start, the rest up to 120 ms later.
        let delay = match random.between(0, 1) {
            0 => Duration::ZERO,
            _ => Duration::from_millis(random.between(1, 120)),
        };
        if !kill_after(&sandbox, &ledger, &run, count, delay) {
            break;
        }
        kills += 1;
        let settled = settled_nodes(&ledger, &run);
        if first_settled.is_none() {
            first_settled = Some(settled.clone());
        }
        history.push(format!(
            "run {run} killed after {count} starts, settled {settled:?}"
        ));
        let counts = count_by_node(&sandbox.invocations());
        for node in settled {
            let ran = counts.get(&node).copied().unwrap_or(0);
            runs_when_settled.entry(node).or_insert(ran);
        }
        let receipt = sandbox
            .trellis(&["resume", &run, "--detach", "--json"])
            .success();
        run = receipt.json()["runId"].as_str().expect("runId").to_owned();
    }
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "succeeded", "seed {seed}: {result}");

    let counts = count_by_node(&sandbox.invocations());
    assert_eq!(
        counts.len(),
        NODES,
        "seed {seed}: every node ran: {counts:?}"
    );
    for (node, ran) in &runs_when_settled {
        assert_eq!(
            counts.get(node),
            Some(ran),
            "seed {seed}: {node} settled before a kill yet ran again: {counts:?}\n{}",
            history.join("\n")
        );
    }
    // A node that settled on its first invocation, before any kill, ran exactly once.
    if let Some(first) = first_settled {
        for node in first {
            assert_eq!(counts.get(&node), Some(&1), "seed {seed}: {node}");
        }
    }
    result["output"].clone()
}

#[test]
fn killed_and_resumed_runs_never_repeat_settled_work_and_match_an_uninterrupted_run() {
    let expected = uninterrupted_output();
    for seed in 1..=seed_count() {
        let output = interrupted_run(seed);
        assert_eq!(output, expected, "seed {seed}");
    }
}
