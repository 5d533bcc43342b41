//! Kill points for GaP runs: a detached GaP run whose controller is SIGKILLed at seeded points
//! (right after the k-th body was recorded as dispatched, or a little later) and resumed until
//! it finishes never runs a settled body twice, and ends with the uninterrupted result — a
//! seven-super-step workflow with a three-way parallel step, every script appending its name to
//! an effects file before it sleeps.
//!
//! `TRELLIS_KILL_POINT_SEEDS` sets how many seeds run (default 6 when `CI` is set, else 3).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{
    STATE_TIMEOUT, Sandbox, describe, is_controller_of, process_alive, send_signal, wait_until,
};
use trellis_ledger::{Cursor, EventFilter, GapNodeOutcome, RunEvent, RunId, RunStore, SqliteStore};

/// Most kills per seed; the run is then left to finish.
const MAX_KILLS: usize = 3;

/// Bodies one run dispatches: s1, s2, p1, p2, p3, join, s3, s4.
const BODIES: u64 = 8;

const EFFECT_SCRIPT: &str = r#"
import time


def run(ctx, effects, node, v=0, w=0, pause=0.15):
    with open(effects, "a") as out:
        out.write(node + "\n")
    time.sleep(pause)
    return {"v": v + w + len(node)}
"#;

fn body(name: &str, inputs: Value) -> Value {
    let mut all = json!({"effects": {"$ref": "in.effects"}, "node": name});
    for (key, value) in inputs.as_object().expect("inputs object") {
        all[key] = value.clone();
    }
    json!({"type": "script", "script": "scripts/effect.py", "inputs": all})
}

fn reference(node: &str) -> Value {
    json!({"$ref": format!("{node}.v")})
}

/// s1 → s2 → {p1, p2, p3} → join → s3 → s4 → done.
fn workflow() -> Value {
    json!({"version": 3, "nodes": {
        "s1": body("s1", json!({})),
        "s2": body("s2", json!({"v": reference("s1")})),
        "p1": body("p1", json!({"v": reference("s2")})),
        "p2": body("p2", json!({"v": reference("s2")})),
        "p3": body("p3", json!({"v": reference("s2")})),
        "join": body("join", json!({"v": reference("p1"), "w": reference("p2")})),
        "s3": body("s3", json!({"v": reference("join"), "w": reference("p3")})),
        "s4": body("s4", json!({"v": reference("s3")})),
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "s1"], ["s1", "s2"], ["s2", "p1"], ["s2", "p2"], ["s2", "p3"],
                  ["p1", "join"], ["p2", "join"], ["p3", "join"], ["join", "s3"],
                  ["s3", "s4"], ["s4", "done"]]})
}

/// Writes the workflow, its script and its inputs into the sandbox; returns the `run` args.
fn run_args(sandbox: &Sandbox) -> Vec<String> {
    let dir = sandbox.workspace.join("policy");
    std::fs::create_dir_all(dir.join("scripts")).expect("workflow dir");
    std::fs::write(dir.join("scripts/effect.py"), EFFECT_SCRIPT).expect("script");
    std::fs::write(
        dir.join("workflow.json"),
        serde_json::to_vec_pretty(&workflow()).expect("json"),
    )
    .expect("workflow");
    let effects = sandbox.workspace.join("effects.log");
    let inputs = sandbox.write_json("inputs.json", &json!({"effects": effects}));
    vec![
        "run".into(),
        dir.to_str().expect("UTF-8").to_owned(),
        "--inputs".into(),
        inputs,
        "--json".into(),
    ]
}

/// A small deterministic generator (splitmix64), so a failing seed can be replayed.
struct SeededRandom(u64);

impl SeededRandom {
    fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        low + (z ^ (z >> 31)) % (high - low + 1)
    }
}

/// What one run recorded of its bodies: dispatched (node → count), settled by running
/// (node → count) and settled by reuse.
#[derive(Debug, Default)]
struct Recorded {
    started: BTreeMap<String, usize>,
    ran: BTreeMap<String, usize>,
    reused: BTreeMap<String, usize>,
    /// The output each body settled with, run or reused.
    outputs: BTreeMap<String, Value>,
}

fn recorded(sandbox: &Sandbox, run: &str) -> Recorded {
    let store = SqliteStore::open(sandbox.home.join("ledger.sqlite3")).expect("ledger");
    let run_id = RunId::new(run).expect("run id");
    let events = store
        .events_after(&run_id, Cursor::START, 10_000, EventFilter::ExceptLogs)
        .expect("events");
    let mut seen = Recorded::default();
    for stored in events {
        match stored.event {
            RunEvent::GapNodeStarted { node, .. } => *seen.started.entry(node).or_default() += 1,
            RunEvent::GapNodeSettled {
                node,
                outcome:
                    GapNodeOutcome::Succeeded {
                        reused_from,
                        output,
                        ..
                    },
                ..
            } => {
                if let Some(output) = output {
                    seen.outputs.insert(node.clone(), output);
                }
                let into = if reused_from.is_some() {
                    &mut seen.reused
                } else {
                    &mut seen.ran
                };
                *into.entry(node).or_default() += 1;
            }
            _ => {}
        }
    }
    seen
}

fn effect_counts(sandbox: &Sandbox) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(sandbox.workspace.join("effects.log")).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        *counts.entry(line.to_owned()).or_default() += 1;
    }
    counts
}

fn status(sandbox: &Sandbox, run: &str) -> Value {
    sandbox.status(run)
}

/// Waits for `count` recorded dispatches (or the run's end), waits `delay`, SIGKILLs the
/// controller and waits until the run is finalized lost; false when the run ended first.
fn kill_after(sandbox: &Sandbox, run: &str, count: usize, delay: Duration) -> bool {
    let deadline = Instant::now() + STATE_TIMEOUT;
    loop {
        let started: usize = recorded(sandbox, run).started.values().sum();
        if started >= count || status(sandbox, run)["status"]["phase"] == "finished" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} stalled before {count} dispatches"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(delay);
    let Some(pid) = status(sandbox, run)["controller"]["pid"]
        .as_u64()
        .and_then(|pid| u32::try_from(pid).ok())
    else {
        return false;
    };
    if !is_controller_of(pid, run) {
        return false;
    }
    send_signal(pid, support::Signal::SIGKILL);
    wait_until("the controller to die", STATE_TIMEOUT, || {
        (!process_alive(pid)).then_some(())
    });
    let finished = wait_until("the killed run to be finalized", STATE_TIMEOUT, || {
        let status = status(sandbox, run);
        (status["status"]["phase"] == "finished").then_some(status)
    });
    let terminal = &finished["status"]["terminalResult"];
    if terminal["status"] == "succeeded" {
        return false;
    }
    let left: Vec<String> = sandbox.processes().into_iter().map(describe).collect();
    assert_eq!(
        terminal,
        &json!({"status": "failed", "reason": "runtime_lost"}),
        "run {run}: {finished}\nstill running: {left:?}"
    );
    true
}

fn seed_count() -> u64 {
    if let Ok(text) = std::env::var("TRELLIS_KILL_POINT_SEEDS") {
        return text.parse().expect("TRELLIS_KILL_POINT_SEEDS is a number");
    }
    if std::env::var_os("CI").is_some() {
        6
    } else {
        3
    }
}

fn uninterrupted_result() -> Value {
    let sandbox = Sandbox::new();
    let mut args = run_args(&sandbox);
    args.push("--detach".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sandbox.trellis(&args).success().json()["runId"]
        .as_str()
        .expect("runId")
        .to_owned();
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "succeeded", "{result}");
    let counts = effect_counts(&sandbox);
    assert_eq!(counts.len() as u64, BODIES, "{counts:?}");
    assert!(counts.values().all(|&c| c == 1), "{counts:?}");
    result["output"].clone()
}

/// One seed: run, kill and resume until the run succeeds; returns the final result and how
/// many kills landed.
fn interrupted_run(seed: u64) -> (Value, usize) {
    let mut random = SeededRandom(seed);
    let sandbox = Sandbox::new();
    let mut run = sandbox.start_detached(&run_args(&sandbox));
    let mut lineage = vec![run.clone()];
    let mut kills = 0;
    while kills < MAX_KILLS {
        let count = usize::try_from(random.between(1, BODIES)).expect("small");
        let delay = match random.between(0, 1) {
            0 => Duration::ZERO,
            _ => Duration::from_millis(random.between(1, 200)),
        };
        if !kill_after(&sandbox, &run, count, delay) {
            break;
        }
        kills += 1;
        let receipt = sandbox
            .trellis(&["resume", &run, "--detach", "--json"])
            .success();
        run = receipt.json()["runId"].as_str().expect("runId").to_owned();
        lineage.push(run.clone());
    }
    let result = sandbox.wait_finished(&run);
    assert_eq!(result["status"], "succeeded", "seed {seed}: {result}");

    // Across the lineage: every body settled by running exactly once, and a body settled in
    // one run was reused (never dispatched again) by every later run.
    let runs: Vec<Recorded> = lineage.iter().map(|r| recorded(&sandbox, r)).collect();
    let history = format!("seed {seed}: {lineage:?}\n{runs:#?}");
    let last = runs.last().expect("a run");
    // s1 2, s2 4, p1..p3 6, join 6+6+4, s3 16+6+2, s4 24+2: replayed values flowed on.
    assert_eq!(last.outputs.get("s4"), Some(&json!({"v": 26})), "{history}");
    let mut ran: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, this) in runs.iter().enumerate() {
        for (node, count) in &this.ran {
            *ran.entry(node).or_default() += count;
        }
        for earlier in &runs[..index] {
            for node in earlier.ran.keys() {
                assert!(
                    !this.started.contains_key(node),
                    "{node} settled before yet was dispatched again\n{history}"
                );
                assert_eq!(this.reused.get(node), Some(&1), "{node}\n{history}");
            }
        }
    }
    assert_eq!(ran.len() as u64, BODIES, "{history}");
    assert!(ran.values().all(|&c| c == 1), "{history}");
    // The effects: a body ran at most once per recorded dispatch, and once when never cut.
    let effects = effect_counts(&sandbox);
    for (node, count) in &effects {
        let dispatched: usize = runs.iter().filter_map(|r| r.started.get(node)).sum();
        assert!(*count <= dispatched, "{node}: {effects:?}\n{history}");
    }
    if kills == 0 {
        assert!(effects.values().all(|&c| c == 1), "{effects:?}");
    }
    (result["output"].clone(), kills)
}

#[test]
fn a_killed_and_resumed_gap_run_never_repeats_settled_bodies_and_matches_an_uninterrupted_run() {
    let expected = uninterrupted_result();
    assert_eq!(
        expected["exit_status"], "success",
        "the result is the executor's: {expected}"
    );
    let mut kills = 0;
    for seed in 1..=seed_count() {
        let (result, landed) = interrupted_run(seed);
        assert_eq!(result, expected, "seed {seed}");
        kills += landed;
    }
    assert!(kills > 0, "no kill landed, so nothing was resumed");
}
