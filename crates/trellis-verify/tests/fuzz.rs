//! A proptest-driven fuzz test (cargo fuzz needs nightly): arbitrary JSON, mutated vector
//! and template documents, corrupted text and generated graphs go through the parser and the
//! verifier, which must never panic and must be deterministic. `TRELLIS_FUZZ_CASES` sets the
//! case count per target (default 64) so CI can bound the time.

mod support;

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::TestRng;
use serde_json::{Map, Value, json};
use trellis_graph::conformance::{json_files, locate};
use trellis_graph::json::JsonPath;
use trellis_graph::{GraphSpec, StaticRegistry};
use trellis_verify::{Verification, canonical_bytes, verify, verify_builtin};

fn cases() -> u32 {
    std::env::var("TRELLIS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

const KEYS: [&str; 24] = [
    "profile",
    "initialInput",
    "policy",
    "root",
    "kind",
    "name",
    "worker",
    "input",
    "output",
    "inputBindings",
    "writeBindings",
    "attempts",
    "state",
    "children",
    "branches",
    "when",
    "node",
    "otherwise",
    "promotedStatePaths",
    "join",
    "body",
    "maxIterations",
    "until",
    "over",
];
const STRINGS: [&str; 16] = [
    "openengine.graph.full/v1",
    "step",
    "verifier",
    "seq",
    "choice",
    "par",
    "loop",
    "map",
    "succeed",
    "fail",
    "record",
    "integer",
    "error",
    "signal",
    "w@1",
    "a",
];

/// Arbitrary JSON biased towards the wire vocabulary.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        proptest::sample::select(STRINGS.to_vec()).prop_map(|s| json!(s)),
        "[a-z@./]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS.to_vec()), inner), 0..6)
                .prop_map(|entries| {
                    let mut map = Map::new();
                    for (k, v) in entries {
                        map.insert(k.to_owned(), v);
                    }
                    Value::Object(map)
                }),
        ]
    })
}

/// Graph documents of the vectors and templates, read once.
fn seeds() -> &'static Vec<Value> {
    static SEEDS: OnceLock<Vec<Value>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let Some(dir) = locate(env!("CARGO_MANIFEST_DIR")) else {
            return vec![support::mixed::mixed_graph(64).to_value()];
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for folder in [
            "openengine-v1/verifier/positive",
            "openengine-v1/verifier/negative",
        ] {
            files.extend(json_files(&dir.join(folder)));
        }
        files.extend(json_files(&dir.join("zeroshot-templates")));
        files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|v| v.get("graph").cloned().unwrap_or(v))
            .collect()
    })
}

fn below(rng: &mut TestRng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Every value position in a document, as a list of steps.
fn positions(value: &Value, at: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                at.push(PathStep::Key(k.clone()));
                positions(v, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(PathStep::Index(i));
                positions(v, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn at_mut<'v>(value: &'v mut Value, path: &[PathStep]) -> Option<&'v mut Value> {
    let mut current = value;
    for step in path {
        current = match (step, current) {
            (PathStep::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (PathStep::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

/// One structural mutation at a random position.
fn mutate(doc: &mut Value, rng: &mut TestRng, replacement: &Value) {
    let mut all = Vec::new();
    positions(doc, &mut Vec::new(), &mut all);
    let path = all[below(rng, all.len())].clone();
    let names: Vec<String> = {
        let mut names = Vec::new();
        collect_names(doc, &mut names);
        names
    };
    let Some(target) = at_mut(doc, &path) else {
        return;
    };
    match below(rng, 8) {
        0 => *target = replacement.clone(),
        1 => *target = Value::Null,
        2 => {
            let numbers: [u64; 9] = [0, 1, 2, 100, 101, 1024, 1025, 4097, 9_007_199_254_740_991];
            *target = json!(numbers[below(rng, numbers.len())]);
        }
        3 => {
            if let Value::Object(map) = target
                && !map.is_empty()
            {
                let key = map
                    .keys()
                    .nth(below(rng, map.len()))
                    .cloned()
                    .unwrap_or_default();
                map.remove(&key);
            }
        }
        4 => {
            if let Value::Array(items) = target
                && !items.is_empty()
            {
                let i = below(rng, items.len());
                let copy = items[i].clone();
                items.push(copy);
            }
        }
        5 => {
            if let Value::Array(items) = target
                && items.len() > 1
            {
                let (i, j) = (below(rng, items.len()), below(rng, items.len()));
                items.swap(i, j);
            }
        }
        6 => {
            if !names.is_empty() && target.is_string() {
                *target = json!(names[below(rng, names.len())]);
            }
        }
        _ => {
            // Deepen: wrap in a seq or a loop so nesting and depth limits get exercised.
            if target.get("kind").is_some() && target.get("name").is_some() {
                let inner = target.take();
                *target = json!({"kind": "loop", "name": format!("wrap{}", below(rng, 1000)),
                    "state": {"kind": "null"}, "promotedStatePaths": [], "maxIterations": 2, "body": inner});
            }
        }
    }
}

fn collect_names(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(n)) = map.get("name") {
                out.push(n.clone());
            }
            map.values().for_each(|v| collect_names(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_names(v, out)),
        _ => {}
    }
}

fn fixture_registry() -> &'static StaticRegistry {
    static REGISTRY: OnceLock<StaticRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        locate(env!("CARGO_MANIFEST_DIR"))
            .and_then(|d| {
                std::fs::read_to_string(d.join("openengine-v1/fixture-registry.json")).ok()
            })
            .and_then(|t| StaticRegistry::from_json_str(&t).ok())
            .unwrap_or_default()
    })
}

/// Verifies twice with both registries: no panic, same verdict, canonical bytes for admitted
/// graphs.
fn exercise(spec: &GraphSpec) {
    for verdict in [verify(spec, fixture_registry()), verify_builtin(spec)] {
        if let Verification::Verified(graph) = &verdict {
            assert!(canonical_bytes(&graph.ir).is_ok());
        }
        if let Verification::Rejected(list) = &verdict {
            assert!(!list.is_empty());
        }
    }
    assert_eq!(
        verify(spec, fixture_registry()),
        verify(spec, fixture_registry())
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        let text = value.to_string();
        if let Ok(spec) = GraphSpec::from_json_str(&text) {
            exercise(&spec);
        }
        if let Ok(spec) = GraphSpec::parse(&json!({"profile": "openengine.graph.full/v1",
            "initialInput": {"kind": "null"}, "policy": {"policy": "p@1", "default": "deny"},
            "root": value}), &JsonPath::root()) {
            exercise(&spec);
        }
    }

    #[test]
    fn mutated_vectors_never_panic(seed in any::<u64>(), pick in any::<usize>(), rounds in 1usize..6, replacement in json_value()) {
        let seeds = seeds();
        let mut doc = seeds[pick % seeds.len()].clone();
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed.to_le_bytes().repeat(4));
        for _ in 0..rounds {
            mutate(&mut doc, &mut rng, &replacement);
        }
        if let Ok(spec) = GraphSpec::parse(&doc, &JsonPath::root()) {
            exercise(&spec);
        }
    }

    #[test]
    fn corrupted_text_never_panics(pick in any::<usize>(), cut in any::<usize>(), junk in "[\\\\{}\\[\\]\",:a-z0-9 ]{0,8}") {
        let seeds = seeds();
        let text = seeds[pick % seeds.len()].to_string();
        let at = cut % (text.len() + 1);
        let at = (0..=at).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        let corrupted = format!("{}{}{}", &text[..at], junk, &text[at..]);
        if let Ok(spec) = GraphSpec::from_json_str(&corrupted) {
            exercise(&spec);
        }
        let _ = GraphSpec::from_json_str(&text[..at]);
    }

    #[test]
    fn generated_graphs_verify_deterministically(spec in support::arb::graph_spec()) {
        exercise(&spec);
    }
}
