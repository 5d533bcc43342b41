//! Runtime differential against the shipping reference (Zeroshot 10.19.1, installed by
//! `scripts/install-zeroshot.sh`): graphs run by `trellis run` and by `zeroshot run` with the
//! same deterministic fake `claude` (`trellis_testkit::fake_agent`: its reply is chosen from a
//! hash of node, input and call number and built from the response contract both tools print),
//! compared on the terminal result (status, reason, output), the executions per node and which
//! of them resumed a session.
//!
//! First the session cases of issue 38 (a loop of 2 rounds over a verifier whose first call
//! crashes or answers malformed), then generated graphs (`trellis_testkit::graphgen`) both tools
//! admit. `TRELLIS_RUNTIME_DIFFERENTIAL_GRAPHS` sets how many (default 6: the reference takes
//! 4–18 s per run), `TRELLIS_RUNTIME_DIFFERENTIAL_SEED` the seed. Skipped with a note when the
//! reference is not installed, except under `CI`.
//!
//! This test has no libtest harness: the same executable is also the fake `claude` (a wrapper
//! script on `PATH` runs it with `TRELLIS_FAKE_AGENT_STATE` set).

mod runtime_reference;

use std::process::ExitCode;

use runtime_reference::{Observation, Runner};
use serde_json::{Value, json};
use trellis_testkit::fake_agent::claude;
use trellis_testkit::graphgen::{self, Settings, WorkerStyle};
use trellis_testkit::reference::{OracleCase, Reference};

fn main() -> ExitCode {
    if std::env::var_os(claude::STATE_ENV).is_some() {
        return claude::main();
    }
    let reference = match Reference::locate(env!("CARGO_MANIFEST_DIR")) {
        Ok(Some(reference)) => reference,
        Ok(None) => return ExitCode::SUCCESS,
        Err(error) => panic!("{error}"),
    };
    let runner = Runner::new(reference);
    a_crashed_session_is_replaced_and_a_malformed_one_kept(&runner);
    generated_graphs_run_alike(&runner);
    println!("runtime differential: ok");
    ExitCode::SUCCESS
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The uniform plan both tools run with: one Claude lane, `node_instance` sessions, and the
/// reference's Active Memory and postmortem agents off (they would call the agent after the
/// graph ended; Trellis has neither).
fn plan() -> Value {
    json!({"harness": "claude", "provider": "anthropic", "model": "m",
           "sessionScope": "node_instance",
           "activeMemory": {"repository": false, "graph": false},
           "globalAgents": {"postmortem": {"enabled": false}}})
}

/// Issue 38's minimal graph: a loop of up to 2 rounds over verifier `check` (until it
/// accepts), then any error of `check` fails the run `check_failed`.
fn session_loop() -> Value {
    let state = json!({"kind": "record", "fields": {"value": {"type": {"kind": "integer"}, "required": true}}});
    let check = json!({"kind": "verifier", "name": "check", "worker": "gen.check@1",
        "instructions": "Do the work of check.", "input": {"kind": "null"},
        "output": {"kind": "null"}, "inputBindings": [], "writeBindings": [],
        "timeoutMs": 60000, "attempts": 1,
        "signals": {"verdict": ["accepted"]}, "diagnostic": {"kind": "null"}});
    let until = json!({"kind": "in", "value": {"name": "check", "source": "signal", "field": "verdict"},
                       "labels": ["accepted"]});
    let failed = json!({"kind": "in", "value": {"name": "check", "source": "error", "field": null},
                        "labels": ["crash", "malformed", "refusal", "timeout"]});
    json!({"profile": "openengine.graph.full/v1", "initialInput": state,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [],
            "children": [
                {"kind": "loop", "name": "rounds", "state": state, "body": check,
                 "maxIterations": 2, "until": until, "promotedStatePaths": []},
                {"kind": "choice", "name": "route", "state": state, "promotedStatePaths": [],
                 "branches": [{"when": failed,
                               "node": {"kind": "fail", "name": "checkFailed", "reason": "check_failed"}}],
                 "otherwise": {"kind": "succeed", "name": "done", "output": {"kind": "null"}, "bindings": []}}]}})
}

fn a_crashed_session_is_replaced_and_a_malformed_one_kept(runner: &Runner) {
    let input = json!({"value": 0});
    for (script, resumed) in [(["crash", "reply"], false), (["malformed", "reply"], true)] {
        let (ours, theirs) = runner.both(&session_loop(), &input, &plan(), Some(&script));
        let expected = Observation {
            terminal: json!({"status": "succeeded", "output": null}),
            executions: [("check".to_owned(), vec![(1, false), (2, resumed)])].into(),
        };
        assert_eq!(theirs, expected, "the reference, script {script:?}");
        assert_eq!(ours, expected, "Trellis, script {script:?}");
    }
}

/// The most executions a generated graph may need to be run (its worst case under admission).
const MAX_EXECUTIONS: u64 = 48;

fn generated_graphs_run_alike(runner: &Runner) {
    let wanted = env_number("TRELLIS_RUNTIME_DIFFERENTIAL_GRAPHS", 6) as usize;
    let seed = env_number("TRELLIS_RUNTIME_DIFFERENTIAL_SEED", 3838);
    let started = std::time::Instant::now();
    let corpus = graphgen::corpus(&Settings {
        seed,
        count: wanted * 60,
        workers: WorkerStyle::Arbitrary,
        heavy: false,
        seeds: Vec::new(),
    });
    let mut ran = 0;
    let mut executions = 0;
    let mut differences = Vec::new();
    for (index, case) in corpus.iter().enumerate() {
        if ran == wanted {
            break;
        }
        let oracle = OracleCase {
            graph: case.graph.clone(),
            input: case.input.clone(),
            plan: plan(),
        };
        if !runner.runnable(&oracle, MAX_EXECUTIONS) {
            continue;
        }
        ran += 1;
        let (ours, theirs) = runner.both(&case.graph, &case.input, &plan(), None);
        let count = theirs.executions.values().map(Vec::len).sum::<usize>();
        executions += count;
        println!(
            "case {index}: {} executions, {}, {}",
            count,
            theirs.terminal["status"],
            if ours == theirs { "agree" } else { "DIFFER" }
        );
        if ours != theirs {
            differences.push(format!(
                "seed {seed} case {index} ({}):\n  trellis:   {ours:?}\n  reference: {theirs:?}\n  graph: {}\n  input: {}",
                case.families.join(","),
                case.graph,
                case.input
            ));
        }
    }
    println!(
        "runtime differential: seed {seed}, {ran} graphs, {executions} executions by the \
         reference, {} differences, {:?}",
        differences.len(),
        started.elapsed()
    );
    assert!(
        ran == wanted,
        "only {ran} of {wanted} generated graphs were runnable"
    );
    assert!(
        differences.is_empty(),
        "{} unexplained differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
