//! Random material for the equivalence property: a seeded generator, random graphs built
//! from every node kind and join with guards over any node, and values of declared types.

use serde_json::{Value, json};
use trellis_graph::{GraphSpec, PayloadType};

use crate::support::*;

/// A small deterministic generator so a failing proptest case reports one seed.
pub struct Rng(u64);

impl Rng {
    /// Seeds through splitmix64 so that small or similar seeds still diverge at once.
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
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

pub fn random_graph(seed: u64) -> GraphSpec {
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

pub fn value_of(ty: &PayloadType, rng: &mut Rng) -> Value {
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
