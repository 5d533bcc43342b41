//! Property: the incremental reducer (fed change by change, and rebuilt from the history)
//! always decides exactly what the full replay decides. Graphs come from a random generator
//! and from a fixed corpus (hand-written shapes plus the reference templates); outcomes follow
//! each node's declared types; the driver interleaves dispatch records, settlements (crashes
//! included), voids and races in random order with gaps in ledger positions.

mod generator;
#[path = "../support/mod.rs"]
mod support;

use generator::{Rng, random_graph, value_of};
use proptest::arbitrary::any as arbitrary;
use proptest::prelude::{ProptestConfig, proptest};
use serde_json::{Value, json};
use support::*;
use trellis_engine::{ExecutionState, Reduction};
use trellis_graph::{GraphNode, GraphSpec, WorkerErrorCode, WorkerOutcome};
use trellis_run_model::Cursor;

fn find<'g>(node: &'g GraphNode, name: &str) -> Option<&'g GraphNode> {
    let mut found = None;
    node.walk(&mut |n| {
        if n.name().as_str() == name {
            found = Some(n);
        }
    });
    found
}

fn outcome_for(graph: &GraphSpec, node: &str, rng: &mut Rng) -> WorkerOutcome {
    if rng.chance(25) {
        let code = *rng.pick(&[
            WorkerErrorCode::Crash,
            WorkerErrorCode::Crash,
            WorkerErrorCode::Timeout,
            WorkerErrorCode::Malformed,
            WorkerErrorCode::Refusal,
        ]);
        return error(code);
    }
    match find(&graph.root, node) {
        Some(GraphNode::Verifier(v)) => {
            let signals: Vec<(String, String)> = v
                .signals
                .iter()
                .map(|(field, labels)| {
                    let labels: Vec<&str> = labels.iter().map(|l| l.as_str()).collect();
                    (field.to_string(), rng.pick(&labels).to_string())
                })
                .collect();
            let refs: Vec<(&str, &str)> = signals
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let output = value_of(&v.exec.output, rng);
            let diagnostic = value_of(&v.diagnostic, rng);
            verdict(&refs, output, diagnostic)
        }
        Some(GraphNode::Step(s)) => ok(value_of(&s.output, rng)),
        _ => ok(Value::Null),
    }
}

// ---- the driver -------------------------------------------------------------------------------

/// What a driven run went through, to show the property is not vacuous.
#[derive(Debug, Default)]
struct Stats {
    steps: usize,
    terminals: usize,
    replay_errors: usize,
    voids: usize,
    map_voids: usize,
    retries: usize,
    dispatches: usize,
}

/// Drives a run with random events until it ends, checking agreement at every step (inside
/// `Run::try_decide`).
fn drive(graph: GraphSpec, input: Value, seed: u64, max_steps: usize) -> Stats {
    let mut rng = Rng::new(seed);
    let mut run = Run::new(graph.clone(), input);
    let mut stats = Stats::default();
    for _ in 0..max_steps {
        let reduction: Reduction = match run.try_decide() {
            Ok(r) => r,
            Err(error) => {
                if std::env::var_os("SHOW_REPLAY_ERRORS").is_some() {
                    eprintln!("replay error: {error}");
                }
                stats.replay_errors += 1;
                return stats;
            }
        };
        if reduction.terminal.is_some() {
            stats.terminals += 1;
            return stats;
        }
        stats.steps += 1;
        if std::env::var_os("SHOW_REPLAY_ERRORS").is_some()
            && reduction
                .voids
                .iter()
                .any(|v| v.reason == trellis_engine::VoidReason::MapTerminal)
        {
            eprintln!("map voids listed");
        }
        stats.retries += reduction
            .dispatches
            .iter()
            .filter(|d| d.attempt > 1)
            .count()
            .min(1);
        let active: Vec<_> = run
            .history
            .executions
            .iter()
            .filter(|r| r.state.is_active())
            .map(|r| (r.execution, r.occurrence.node.to_string()))
            .collect();
        let mut options = Vec::new();
        if !reduction.dispatches.is_empty() {
            options.extend([0, 0]);
        }
        if !active.is_empty() {
            options.extend([1, 1, 1]);
        }
        if !reduction.voids.is_empty() {
            options.extend([2, 2]);
        }
        assert!(
            !options.is_empty(),
            "run is stuck: no dispatch, no active execution, no void and no terminal"
        );
        match *rng.pick(&options) {
            0 => {
                stats.dispatches += 1;
                run.record_dispatch(&reduction.dispatches[0]);
            }
            1 => {
                let (execution, node) = rng.pick(&active).clone();
                let outcome = outcome_for(&graph, &node, &mut rng);
                let at = run.next_position();
                run.change_state(
                    execution,
                    ExecutionState::completed(Cursor::at(at).expect("position"), 0, outcome),
                );
            }
            _ => {
                let void = rng.pick(&reduction.voids).clone();
                stats.voids += 1;
                if void.reason == trellis_engine::VoidReason::MapTerminal {
                    stats.map_voids += 1;
                }
                let at = run.next_position();
                run.change_state(
                    void.execution,
                    ExecutionState::Voided {
                        at: Cursor::at(at).expect("position"),
                        at_ms: 0,
                        reason: void.reason,
                    },
                );
            }
        }
        run.skip_positions(rng.below(3));
    }
    stats
}

fn random_input(graph: &GraphSpec, seed: u64) -> Value {
    value_of(&graph.initial_input, &mut Rng::new(seed.rotate_left(17)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_reduce_identically(graph_seed in arbitrary::<u64>(), run_seed in arbitrary::<u64>()) {
        let graph = random_graph(graph_seed);
        let input = random_input(&graph, run_seed);
        drive(graph, input, run_seed, 120);
    }
}

// ---- fixed corpus ----------------------------------------------------------------------------

fn corpus() -> Vec<(GraphSpec, Value)> {
    let out = |node: Value| {
        let mut node = node;
        node["output"] = json!({"kind": "record", "fields": {
            "v": {"type": {"kind": "integer"}, "required": true}}});
        node
    };
    let lane = |name: &str| {
        seq(
            &format!("{name}_lane"),
            vec![
                out(writes(
                    attempts(step(name), 2),
                    &[(name, &format!("{name}.out.v"))],
                )),
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
    let race_in_loop = seq(
        "run",
        vec![
            looped(
                "rounds",
                3,
                Some(signal_is("gate", "verdict", &["p"])),
                seq(
                    "round",
                    vec![
                        par(
                            "race",
                            json!({"kind": "any"}),
                            vec![lane("a"), map("each", "state:items", 3, lane("b"))],
                        ),
                        verifier("gate", "verdict", &["p", "q"]),
                    ],
                ),
            ),
            succeed("done", &[]),
        ],
    );
    let first_join = seq(
        "run",
        vec![
            par(
                "first",
                json!({"kind": "first", "when": signal_is("judge", "verdict", &["p"])}),
                vec![
                    seq(
                        "left",
                        vec![out(step("prep")), verifier("judge", "verdict", &["p", "q"])],
                    ),
                    map("fan", "state:items", 2, out(step("fanout"))),
                ],
            ),
            choice(
                "after",
                vec![(
                    is_in(sel("first", "group", Some("raced")), &["no_satisfier"]),
                    fail("none", "none"),
                )],
                Some(succeed("done", &[])),
            ),
        ],
    );
    let items = json!({"items": [1, 2, 3]});
    vec![
        (graph(race_in_loop), items.clone()),
        (graph(first_join), items),
    ]
}

fn templates() -> Vec<(GraphSpec, Value)> {
    let Some(dir) = trellis_graph::conformance::require(env!("CARGO_MANIFEST_DIR"))
        .expect("conformance vectors are required under CI")
    else {
        return Vec::new();
    };
    [
        "single-worker",
        "software-change",
        "issue-review",
        "pr-review",
        "auto-research",
    ]
    .iter()
    .map(|name| dir.join("zeroshot-templates").join(format!("{name}.json")))
    // Trellis's own research protocol, which no exported template covers.
    .chain(["auto-research", "auto-research-push"].iter().map(|name| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../templates/{name}.json"))
    }))
    .map(|path| {
        let text = std::fs::read_to_string(path).expect("template readable");
        let graph = GraphSpec::from_json_str(&text).expect("template parses");
        (graph, Value::Null)
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn corpus_and_templates_reduce_identically(run_seed in arbitrary::<u64>()) {
        let mut graphs = corpus();
        graphs.extend(templates());
        for (index, (graph, input)) in graphs.into_iter().enumerate() {
            let input = if input.is_null() {
                let mut input = random_input(&graph, run_seed);
                // Keep auto-research's requested round count small.
                if let Some(options) = input.get_mut("options") {
                    options["iterations"] = json!(1 + run_seed % 3);
                }
                input
            } else {
                input
            };
            drive(graph, input, run_seed.wrapping_add(index as u64), 200);
        }
    }
}

#[test]
fn the_generator_produces_runs_that_go_somewhere() {
    // Guards the property from passing vacuously: generated runs dispatch, retry, void losers
    // and map siblings, and mostly end in a terminal rather than a replay error.
    let mut total = Stats::default();
    for seed in 1..60u64 {
        let graph = random_graph(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let input = random_input(&graph, seed);
        let stats = drive(graph, input, seed, 120);
        total.steps += stats.steps;
        total.terminals += stats.terminals;
        total.replay_errors += stats.replay_errors;
        total.voids += stats.voids;
        total.map_voids += stats.map_voids;
        total.retries += stats.retries;
        total.dispatches += stats.dispatches;
    }
    eprintln!("{total:?}");
    assert!(total.dispatches > 300, "{total:?}");
    assert!(total.terminals > 45, "{total:?}");
    assert!(total.voids > 8 && total.map_voids > 1, "{total:?}");
    assert!(total.retries > 15, "{total:?}");
}

// ---- corrupted histories ---------------------------------------------------------------------

/// Breaks one thing in a consistent history: an id, a position, an occurrence, an attempt, an
/// instance, an input, a state, or a record's presence.
fn corrupt(history: &mut trellis_engine::History, graph: &GraphSpec, rng: &mut Rng) {
    use trellis_engine::{ExecutionId, NodeInstanceId, VoidReason};
    let len = history.executions.len() as u64;
    if len == 0 {
        return;
    }
    let index = rng.below(len) as usize;
    let mut names = Vec::new();
    graph.root.walk(&mut |n| names.push(n.name().clone()));
    let record = &mut history.executions[index];
    match rng.below(10) {
        0 => record.execution = ExecutionId(rng.below(len + 2)),
        1 => record.dispatched_at = rng.below(record.dispatched_at + 3),
        2 => record.occurrence.node = rng.pick(&names).clone(),
        3 => {
            record.occurrence.map_indices = (0..rng.below(3)).map(|_| rng.below(4) as u32).collect()
        }
        4 => record.attempt = rng.below(4) as u32,
        5 => record.node_instance = NodeInstanceId(rng.below(len + 2)),
        6 => record.input = json!({"corrupted": true}),
        7 => {
            let at = record.dispatched_at + rng.below(4);
            record.state = match rng.below(3) {
                0 => ExecutionState::Active {},
                1 => ExecutionState::completed(
                    Cursor::at(at).expect("position"),
                    0,
                    error(WorkerErrorCode::Crash),
                ),
                _ => ExecutionState::Voided {
                    at: Cursor::at(at).expect("position"),
                    at_ms: 0,
                    reason: if rng.chance(50) {
                        VoidReason::ParallelJoin
                    } else {
                        VoidReason::MapTerminal
                    },
                },
            };
        }
        8 => {
            history.executions.remove(index);
        }
        _ => {
            let copy = history.executions[index].clone();
            history.executions.push(copy);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_histories_are_refused_alike_and_never_panic(
        graph_seed in arbitrary::<u64>(),
        run_seed in arbitrary::<u64>(),
    ) {
        let graph = random_graph(graph_seed);
        let input = random_input(&graph, run_seed);
        let mut history = drive_history(&graph, &input, run_seed);
        let mut rng = Rng::new(run_seed ^ 0x5555);
        for _ in 0..1 + rng.below(2) {
            corrupt(&mut history, &graph, &mut rng);
        }
        let full = trellis_engine::reduce(&runnable(&graph), &input, &history);
        let rebuilt = trellis_engine::Reducer::from_history(&runnable(&graph), &input, &history).decide();
        match (&full, &rebuilt) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            _ => panic!("acceptance differs: {full:?} / {rebuilt:?} for {history:?}"),
        }
        // Feeding the records in list order must not panic either.
        let mut reducer = trellis_engine::Reducer::new(&runnable(&graph), &input);
        for record in &history.executions {
            let _ = reducer.apply(record);
        }
        let _ = reducer.decide();
    }
}

/// The history of a randomly driven run, stopped at a random point.
fn drive_history(graph: &GraphSpec, input: &Value, seed: u64) -> trellis_engine::History {
    let mut rng = Rng::new(seed);
    let mut run = Run::new(graph.clone(), input.clone());
    let steps = rng.below(60);
    for _ in 0..steps {
        let Ok(reduction) = run.try_decide() else {
            break;
        };
        if reduction.terminal.is_some() {
            break;
        }
        if let Some(dispatch) = reduction.dispatches.first() {
            run.record_dispatch(dispatch);
            continue;
        }
        let active: Vec<_> = run
            .history
            .executions
            .iter()
            .filter(|r| r.state.is_active())
            .map(|r| (r.execution, r.occurrence.node.to_string()))
            .collect();
        if let Some(void) = reduction.voids.first() {
            let at = run.next_position();
            run.change_state(
                void.execution,
                ExecutionState::Voided {
                    at: Cursor::at(at).expect("position"),
                    at_ms: 0,
                    reason: void.reason,
                },
            );
        } else if !active.is_empty() {
            let (execution, node) = rng.pick(&active).clone();
            let outcome = outcome_for(graph, &node, &mut rng);
            let at = run.next_position();
            run.change_state(
                execution,
                ExecutionState::completed(Cursor::at(at).expect("position"), 0, outcome),
            );
        } else {
            break;
        }
    }
    run.history
}
