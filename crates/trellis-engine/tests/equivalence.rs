//! Property: the incremental reducer (fed change by change, and rebuilt from the history)
//! always decides exactly what the full replay decides. Graphs come from a random generator
//! and from a fixed corpus (hand-written shapes plus the reference templates); outcomes follow
//! each node's declared types; the driver interleaves dispatch records, settlements (crashes
//! included), voids and races in random order with gaps in ledger positions.

mod support;

use proptest::arbitrary::any as arbitrary;
use proptest::prelude::{ProptestConfig, proptest};
use serde_json::{Value, json};
use support::*;
use trellis_engine::{ExecutionState, Reduction};
use trellis_graph::{GraphNode, GraphSpec, PayloadType, WorkerErrorCode, WorkerOutcome};

/// A small deterministic generator so a failing proptest case reports one seed.
struct Rng(u64);

impl Rng {
    /// Seeds through splitmix64 so that small or similar seeds still diverge at once.
    fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---- random graphs ---------------------------------------------------------------------------

struct GraphGen {
    rng: Rng,
    count: usize,
    /// Names usable in guards, with the selector they support.
    verifiers: Vec<String>,
    executables: Vec<String>,
    groups: Vec<(String, &'static str, &'static [&'static str])>,
    written: Vec<String>,
}

const ERRORS: [&str; 4] = ["crash", "malformed", "refusal", "timeout"];

impl GraphGen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.count += 1;
        format!("{prefix}{}", self.count)
    }

    fn leaf(&mut self, in_map: bool) -> Value {
        let is_verifier = self.rng.chance(50);
        let name = self.fresh(if is_verifier { "v" } else { "s" });
        let mut node = if is_verifier {
            let mut v = verifier(&name, "verdict", &["p", "q"]);
            v["diagnostic"] = json!({"kind": "record", "fields": {
                "message": {"type": {"kind": "string"}, "required": true}}});
            v
        } else {
            step(&name)
        };
        node["output"] = json!({"kind": "record", "fields": {
            "v": {"type": {"kind": "integer"}, "required": true}}});
        node = attempts(node, *self.rng.pick(&[1, 1, 2, 3]));
        let mut bindings = Vec::new();
        if self.rng.chance(60) {
            bindings.push(("x", "state:x"));
        }
        if in_map && self.rng.chance(70) {
            bindings.push(("item", "item:v"));
        }
        node = inputs(node, &bindings);
        let mut wb = vec![(format!("w_{name}"), format!("{name}.out.v"))];
        if is_verifier {
            wb.push((format!("d_{name}"), format!("{name}.diagnostic.message")));
            wb.push((format!("g_{name}"), format!("{name}.signal.verdict")));
        }
        let wb_refs: Vec<(&str, &str)> = wb.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        node = writes(node, &wb_refs);
        self.written.push(format!("w_{name}"));
        if is_verifier {
            self.verifiers.push(name.clone());
        }
        self.executables.push(name);
        node
    }

    fn selector(&mut self) -> (Value, Vec<&'static str>) {
        match self.rng.below(3) {
            0 if !self.verifiers.is_empty() => {
                let name = self.rng.pick(&self.verifiers).clone();
                (sel(&name, "signal", Some("verdict")), vec!["p", "q"])
            }
            1 if !self.groups.is_empty() => {
                let (name, field, labels) = self.rng.pick(&self.groups).clone();
                (sel(&name, "group", Some(field)), labels.to_vec())
            }
            _ if !self.executables.is_empty() => {
                let name = self.rng.pick(&self.executables).clone();
                (sel(&name, "error", None), ERRORS.to_vec())
            }
            _ => (sel("nobody", "error", None), ERRORS.to_vec()),
        }
    }

    fn labels(&mut self, domain: &[&'static str]) -> Vec<&'static str> {
        let mut chosen: Vec<&'static str> = domain
            .iter()
            .copied()
            .filter(|_| self.rng.chance(50))
            .collect();
        if chosen.is_empty() {
            chosen.push(*self.rng.pick(domain));
        }
        chosen
    }

    fn guard(&mut self, depth: u32) -> Value {
        match self.rng.below(if depth == 0 { 3 } else { 6 }) {
            0 | 1 => {
                let (s, domain) = self.selector();
                let labels = self.labels(&domain);
                is_in(s, &labels)
            }
            2 => {
                let (s, domain) = self.selector();
                let labels = self.labels(&domain);
                k_of_map(1 + self.rng.below(2), s, &labels)
            }
            3 => all(vec![self.guard(depth - 1), self.guard(depth - 1)]),
            4 => any(vec![self.guard(depth - 1), self.guard(depth - 1)]),
            _ => not(self.guard(depth - 1)),
        }
    }

    fn promoted(&mut self) -> Vec<String> {
        let written = self.written.clone();
        written
            .into_iter()
            .filter(|_| self.rng.chance(40))
            .collect()
    }

    fn with_promotion(&mut self, node: Value) -> Value {
        let paths = self.promoted();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        promote(node, &refs)
    }

    fn terminal(&mut self) -> Value {
        let name = self.fresh("t");
        if self.rng.chance(70) {
            fail(&name, "stopped")
        } else {
            succeed(&name, &[("x", "state:x")])
        }
    }

    /// seq[executable, choice(its error → terminal)]: the guarded step of the templates.
    fn guarded(&mut self, in_map: bool) -> Value {
        let name = self.fresh("lane");
        let leaf = self.leaf(in_map);
        let executable = leaf["name"].as_str().unwrap_or_default().to_owned();
        let route = self.fresh("route");
        let terminal = self.terminal();
        seq(
            &name,
            vec![
                leaf,
                choice(&route, vec![(errored(&executable), terminal)], None),
            ],
        )
    }

    fn node(&mut self, depth: u32, in_map: bool) -> Value {
        let choice_of = if depth == 0 { 0 } else { self.rng.below(9) };
        match choice_of {
            0 if in_map => self.guarded(in_map),
            0 => self.leaf(in_map),
            1 | 2 => {
                let name = self.fresh("seq");
                let count = 1 + self.rng.below(3);
                let children = (0..count).map(|_| self.node(depth - 1, in_map)).collect();
                self.with_promotion(seq(&name, children))
            }
            3 | 4 => {
                let name = self.fresh("par");
                let count = 2 + self.rng.below(2);
                let branches: Vec<Value> =
                    (0..count).map(|_| self.node(depth - 1, in_map)).collect();
                const JOINED: &[&str] = &["reached", "quorum_unreachable"];
                const RACED: &[&str] = &["satisfied", "no_satisfier"];
                let (join, field, labels) = match self.rng.below(4) {
                    0 => (json!({"kind": "all"}), "joined", JOINED),
                    1 => (json!({"kind": "any"}), "joined", JOINED),
                    2 => (json!({"kind": "quorum", "count": 2}), "joined", JOINED),
                    _ => (
                        json!({"kind": "first", "when": self.guard(1)}),
                        "raced",
                        RACED,
                    ),
                };
                self.groups.push((name.clone(), field, labels));
                self.with_promotion(par(&name, join, branches))
            }
            5 => {
                let name = self.fresh("loop");
                let body = self.node(depth - 1, in_map);
                let until = self.rng.chance(60).then(|| self.guard(1));
                self.groups
                    .push((name.clone(), "terminated", &["converged", "exhausted"]));
                let max = 1 + self.rng.below(3);
                self.with_promotion(looped(&name, max, until, body))
            }
            6 | 7 => {
                let name = self.fresh("map");
                let over = if in_map { "item:sub" } else { "state:items" };
                let body = if self.rng.chance(60) {
                    self.guarded(true)
                } else {
                    self.node(depth - 1, true)
                };
                self.groups
                    .push((name.clone(), "overflow", &["ok", "overflow"]));
                let max_items = 2 + self.rng.below(3);
                self.with_promotion(map(&name, over, max_items, body))
            }
            _ => {
                let name = self.fresh("choice");
                let count = 1 + self.rng.below(2);
                let mut branches = Vec::new();
                for _ in 0..count {
                    let when = self.guard(2);
                    let node = if self.rng.chance(20) {
                        self.terminal()
                    } else {
                        self.node(depth - 1, in_map)
                    };
                    branches.push((when, node));
                }
                let otherwise = self.rng.chance(60).then(|| self.node(depth - 1, in_map));
                self.with_promotion(choice(&name, branches, otherwise))
            }
        }
    }
}

fn random_graph(seed: u64) -> GraphSpec {
    let mut generator = GraphGen {
        rng: Rng::new(seed),
        count: 0,
        verifiers: Vec::new(),
        executables: Vec::new(),
        groups: Vec::new(),
        written: Vec::new(),
    };
    let depth = 2 + generator.rng.below(3) as u32;
    let count = 2 + generator.rng.below(3);
    let mut children: Vec<Value> = (0..count).map(|_| generator.node(depth, false)).collect();
    children.push(succeed("end", &[("x", "state:x")]));
    let item = json!({"kind": "record", "fields": {
        "v": {"type": {"kind": "integer"}, "required": true},
        "sub": {"type": {"kind": "array", "items": {"kind": "record", "fields": {
            "v": {"type": {"kind": "integer"}, "required": true}}}}, "required": true}}});
    let input = json!({"kind": "record", "fields": {
        "x": {"type": {"kind": "integer"}, "required": true},
        "items": {"type": {"kind": "array", "items": item}, "required": true}}});
    graph_with_input(input, seq("root", children))
}

// ---- values and outcomes that follow declared types ------------------------------------------

fn value_of(ty: &PayloadType, rng: &mut Rng) -> Value {
    match ty {
        PayloadType::Null => Value::Null,
        PayloadType::Boolean => json!(rng.chance(50)),
        PayloadType::Integer => json!(rng.below(4)),
        PayloadType::Number => json!(rng.below(100) as f64 / 4.0),
        PayloadType::String => json!(format!("s{}", rng.below(6))),
        PayloadType::Enum { values } => {
            let labels: Vec<&str> = values.iter().map(|l| l.as_str()).collect();
            json!(rng.pick(&labels))
        }
        PayloadType::Array { items } => {
            let len = rng.below(4);
            Value::Array((0..len).map(|_| value_of(items, rng)).collect())
        }
        PayloadType::Record { fields } => {
            let mut out = serde_json::Map::new();
            for (name, field) in fields {
                if field.required || rng.chance(50) {
                    out.insert(name.to_string(), value_of(&field.ty, rng));
                }
            }
            Value::Object(out)
        }
    }
}

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
            .filter(|r| r.state == ExecutionState::Active)
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
                run.change_state(execution, ExecutionState::Settled { at, outcome });
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
                        at,
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
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

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
    .map(|name| {
        let path = dir.join("zeroshot-templates").join(format!("{name}.json"));
        let text = std::fs::read_to_string(path).expect("template readable");
        let graph = GraphSpec::from_json_str(&text).expect("template parses");
        (graph, Value::Null)
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

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
    for seed in 1..200u64 {
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
    assert!(total.dispatches > 1000, "{total:?}");
    assert!(total.terminals > 150, "{total:?}");
    assert!(total.voids > 20 && total.map_voids > 5, "{total:?}");
    assert!(total.retries > 50, "{total:?}");
}
