//! A seeded generator of GraphSpec graphs for differential tests and fuzzing.
//!
//! Each graph is a root sequence of blocks drawn from the verifier's rule families —
//! promotions over every channel with optional and required paths, loops and their `until`,
//! choices with error guards (masked ones too) and common writes, par joins, maps with indexed
//! promotion, payload subtyping of every kind, bounds at and past each ceiling — built to be
//! valid or nearly so, then mutated along the same families. Seed documents (exported
//! templates, public vectors) are mutated the same way. The same seed always gives the same
//! graphs.

mod blocks;
mod bounds;
pub mod build;
mod dice;
mod families;
mod mutate;
mod nested;

use std::collections::BTreeSet;

use serde_json::Value;

pub use blocks::WorkerStyle;
pub use build::sample;
pub use dice::Dice;

/// One generated case.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The rule families that shaped it (blocks and mutations), e.g. `loop`, `mutate:retype`.
    pub families: Vec<String>,
    pub graph: Value,
    pub input: Value,
}

/// Settings of a corpus.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub count: usize,
    pub workers: WorkerStyle,
    /// Also generate graphs at the node-count and guard-node ceilings (4,096 nodes), which
    /// the reference takes tens of seconds to validate.
    pub heavy: bool,
    /// Documents to mutate (with the input each is run with), used for about a quarter of
    /// the corpus.
    pub seeds: Vec<(Value, Value)>,
}

/// Generates `settings.count` cases.
pub fn corpus(settings: &Settings) -> Vec<Generated> {
    let mut dice = Dice::new(settings.seed);
    (0..settings.count)
        .map(|_| one(&mut dice, settings))
        .collect()
}

fn one(dice: &mut Dice, settings: &Settings) -> Generated {
    if !settings.seeds.is_empty() && dice.chance(0.25) {
        let (graph, input) = dice.pick(&settings.seeds).clone();
        let mut families = BTreeSet::from(["seed".to_owned()]);
        let mut graph = graph;
        let rounds = 1 + dice.below(3);
        for _ in 0..rounds {
            families.insert(format!("mutate:{}", mutate::mutate(dice, &mut graph)));
        }
        let mut input = input;
        set_iterations(dice, &graph, &mut input);
        return Generated {
            families: families.into_iter().collect(),
            graph,
            input,
        };
    }
    let workers = match settings.workers {
        WorkerStyle::Mixed if dice.chance(0.5) => WorkerStyle::Arbitrary,
        WorkerStyle::Mixed => WorkerStyle::Command,
        style => style,
    };
    let mut generator = blocks::Gen::new(dice, workers, settings.heavy);
    let (mut graph, input) = generator.graph();
    let mut families = generator.families;
    if !generator.clean && generator.dice.chance(0.5) {
        let rounds = 1 + generator.dice.below(2);
        for _ in 0..rounds {
            families.insert(format!(
                "mutate:{}",
                mutate::mutate(generator.dice, &mut graph)
            ));
        }
    }
    let mut input = input;
    set_iterations(generator.dice, &graph, &mut input);
    Generated {
        families: families.into_iter().collect(),
        graph,
        input,
    }
}

/// Gives the iteration-count field a mutated loop reads a value: absent, in range, past the
/// fold ceilings, or not a positive safe integer.
fn set_iterations(dice: &mut Dice, graph: &Value, input: &mut Value) {
    if graph["initialInput"]["fields"]
        .get(mutate::ITERATIONS_FIELD)
        .is_none()
    {
        return;
    }
    let Some(fields) = input.as_object_mut() else {
        return;
    };
    let choices: [Option<i64>; 7] = [
        None,
        Some(1),
        Some(2),
        Some(70_000),
        Some(0),
        Some(-3),
        Some(1 << 53),
    ];
    if let Some(n) = *dice.pick(&choices) {
        fields.insert(mutate::ITERATIONS_FIELD.to_owned(), n.into());
    }
}

/// Byte-level mutations of a document's text (for fuzzing the parser front end): flipped
/// bytes, cut text, duplicated and deleted spans, inserted JSON punctuation.
pub fn mutate_bytes(dice: &mut Dice, text: &[u8]) -> Vec<u8> {
    let mut bytes = text.to_vec();
    let edits = 1 + dice.below(4);
    for _ in 0..edits {
        if bytes.is_empty() {
            bytes.push(b'{');
        }
        let at = dice.below(bytes.len());
        match dice.below(6) {
            0 => bytes[at] ^= 1 << dice.below(8),
            1 => bytes.truncate(at),
            2 => {
                let end = (at + 1 + dice.below(32)).min(bytes.len());
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
            3 => {
                let end = (at + 1 + dice.below(32)).min(bytes.len());
                bytes.drain(at..end);
            }
            4 => {
                let punct = *dice.pick(&[b'{', b'}', b'[', b']', b',', b':', b'"', b'\\', 0xff]);
                bytes.insert(at, punct);
            }
            _ => bytes[at] = *dice.pick(b"09-e. nt"),
        }
    }
    bytes
}
