//! The generator's core: one graph's state type, names, workers, and the small pieces every
//! family is built from (producers that write state, routes that rule out a producer's
//! errors, readers, terminals).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::build::*;
use super::dice::Dice;

/// How generated executables name their workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStyle {
    /// `command.<node>@1`: resolves in Trellis's built-in registry by the node's own
    /// declaration, and in the reference as any reference under a uniform agent plan.
    Command,
    /// `gen.<node>@1`: a reference only a uniform agent plan resolves.
    Arbitrary,
    /// Either, drawn per graph.
    Mixed,
}

/// Generates one graph; `families` collects the rule families it used.
pub(crate) struct Gen<'d> {
    pub(crate) dice: &'d mut Dice,
    pub(crate) families: BTreeSet<String>,
    workers: WorkerStyle,
    /// Whether graphs near the node-count and guard-node ceilings (4,096 nodes; the reference
    /// needs tens of seconds for each) may be generated.
    pub(crate) heavy: bool,
    /// A clean graph takes no deliberate flaw: every block is built to verify.
    pub(crate) clean: bool,
    next: usize,
    /// The state every group declares.
    pub(crate) state: Value,
    /// Optional state fields that blocks write, with their types.
    pub(crate) targets: Vec<(String, Value)>,
    /// Targets some earlier block left defined at the root sequence.
    pub(crate) defined: Vec<String>,
    /// Verifiers entered on every path so far at the root sequence.
    pub(crate) verifiers: Vec<String>,
}

/// The payload types optional state targets take.
pub(crate) fn target_types() -> Vec<Value> {
    vec![
        integer(),
        number(),
        string(),
        boolean(),
        enumeration(&["a", "b"]),
        enumeration(&["a", "b", "c"]),
        array(integer()),
        record(&[("x", integer(), true), ("y", string(), false)]),
        null(),
    ]
}

/// A type near `ty`: a subtype, a supertype, or an unrelated type (payload subtyping of every
/// kind).
pub(crate) fn related(dice: &mut Dice, ty: &Value) -> Value {
    let options: Vec<Value> = match ty["kind"].as_str() {
        Some("integer") => vec![number(), string(), enumeration(&["a"])],
        Some("number") => vec![integer(), string(), boolean()],
        Some("string") => vec![enumeration(&["a"]), integer(), null()],
        Some("boolean") => vec![string(), null(), integer()],
        Some("null") => vec![integer(), record(&[]), string()],
        Some("enum") => vec![
            enumeration(&["a"]),
            enumeration(&["a", "b", "c", "d"]),
            enumeration(&["c"]),
            string(),
        ],
        Some("array") => vec![
            array(number()),
            array(string()),
            array(enumeration(&["a"])),
            integer(),
        ],
        _ => vec![
            record(&[("x", integer(), true), ("y", string(), true)]),
            record(&[
                ("x", integer(), true),
                ("y", string(), false),
                ("z", boolean(), true),
            ]),
            record(&[("x", integer(), false), ("y", string(), false)]),
            record(&[("y", string(), false)]),
            record(&[("x", number(), true), ("y", string(), false)]),
            record(&[("x", integer(), true), ("y", enumeration(&["a"]), false)]),
            record(&[]),
        ],
    };
    dice.pick(&options).clone()
}

impl<'d> Gen<'d> {
    pub(crate) fn new(dice: &'d mut Dice, workers: WorkerStyle, heavy: bool) -> Self {
        let types = target_types();
        let targets: Vec<(String, Value)> = (0..3)
            .map(|i| (format!("t{i}"), dice.pick(&types).clone()))
            .chain([
                ("verdict".to_owned(), enumeration(&["accepted", "rejected"])),
                ("note".to_owned(), string()),
            ])
            .collect();
        let mut fields: Vec<(&str, Value, bool)> = vec![
            ("n", integer(), true),
            ("s", string(), true),
            (
                "items",
                array(record(&[("v", integer(), true), ("w", string(), false)])),
                true,
            ),
            ("results", array(integer()), false),
        ];
        for (name, ty) in &targets {
            fields.push((name.as_str(), ty.clone(), false));
        }
        let state = record(&fields);
        Gen {
            dice,
            families: BTreeSet::new(),
            workers,
            heavy,
            clean: false,
            next: 0,
            state,
            targets,
            defined: Vec::new(),
            verifiers: Vec::new(),
        }
    }

    /// Whether to build a deliberate flaw (probability `p`; never in a clean graph).
    pub(crate) fn flaw(&mut self, p: f64) -> bool {
        !self.clean && self.dice.chance(p)
    }

    pub(crate) fn tag(&mut self, family: impl Into<String>) {
        self.families.insert(family.into());
    }

    /// A fresh node name with `prefix`.
    pub(crate) fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    pub(crate) fn worker(&self, node: &str) -> String {
        match self.workers {
            // A mixed corpus resolves its style per graph before building it.
            WorkerStyle::Command | WorkerStyle::Mixed => format!("command.{node}@1"),
            WorkerStyle::Arbitrary => format!("gen.{node}@1"),
        }
    }

    /// A plain step with null input and `{result!: integer}` output.
    pub(crate) fn plain_step(&mut self) -> (Value, String) {
        let name = self.name("w");
        let node = step(
            &name,
            &self.worker(&name),
            null(),
            record(&[("result", integer(), true)]),
        );
        (node, name)
    }

    /// A verifier with a `verdict` signal (`accepted`/`rejected`, sometimes `skipped` too) and
    /// a `{message!: string, code?: integer}` diagnostic.
    pub(crate) fn plain_verifier(&mut self) -> (Value, String) {
        let name = self.name("v");
        let labels: &[&str] = if self.flaw(0.15) {
            &["accepted", "rejected", "skipped"]
        } else {
            &["accepted", "rejected"]
        };
        let node = verifier(
            &name,
            &self.worker(&name),
            null(),
            record(&[("result", integer(), true)]),
            json!({"verdict": labels}),
            record(&[("message", string(), true), ("code", integer(), false)]),
        );
        (node, name)
    }

    /// A random optional target and its type.
    pub(crate) fn pick_target(&mut self) -> (String, Value) {
        self.dice.pick(&self.targets).clone()
    }

    /// An executable writing `target` (a signal for `verdict`, a diagnostic for `note`, an
    /// output otherwise); returns the node, its name and the channel.
    pub(crate) fn producer(&mut self, target: &str, ty: &Value) -> (Value, String, &'static str) {
        let subtyping = self.flaw(0.12);
        match target {
            "verdict" if !subtyping => {
                let (mut node, name) = self.plain_verifier();
                node["writeBindings"] =
                    json!([write_binding(&name, "signal", &["verdict"], &[target])]);
                (node, name, "signal")
            }
            "note" if !subtyping => {
                let (mut node, name) = self.plain_verifier();
                let path = if self.flaw(0.2) { "code" } else { "message" };
                node["writeBindings"] =
                    json!([write_binding(&name, "diagnostic", &[path], &[target])]);
                (node, name, "diagnostic")
            }
            _ => {
                let written = if subtyping {
                    self.tag("types:write");
                    related(self.dice, ty)
                } else {
                    ty.clone()
                };
                let required = !self.flaw(0.1);
                let name = self.name("w");
                let output = record(&[("result", written, required), ("extra", string(), false)]);
                let mut node = step(&name, &self.worker(&name), null(), output);
                node["writeBindings"] =
                    json!([write_binding(&name, "out", &["result"], &[target])]);
                (node, name, "out")
            }
        }
    }

    /// A choice sending `producer`'s errors to a fail terminal, continuing with a step; for
    /// a verifier sometimes routed by its signal instead.
    pub(crate) fn route(&mut self, producer: &str, is_verifier: bool) -> Value {
        let name = self.name("route");
        let (next, _) = self.plain_step();
        let failed = fail(&self.name("failed"), "failed");
        let when = if is_verifier && self.dice.chance(0.4) {
            not(signal_is(producer, "verdict", &["accepted"]))
        } else {
            errors_of(producer)
        };
        choice(
            &name,
            &self.state.clone(),
            &[],
            vec![(when, failed)],
            Some(next),
        )
    }

    /// A step reading state `path` into its input (sometimes with a near type).
    pub(crate) fn reader(&mut self, path: &str, ty: &Value) -> Value {
        let name = self.name("r");
        let wanted = if self.flaw(0.1) {
            self.tag("types:read");
            related(self.dice, ty)
        } else {
            ty.clone()
        };
        let mut node = step(
            &name,
            &self.worker(&name),
            record(&[("val", wanted, true)]),
            record(&[("result", integer(), true)]),
        );
        node["inputBindings"] = json!([input_binding(&["val"], state_selector(&[path]))]);
        node
    }

    /// The type of state field `path` (`null` when unknown).
    pub(crate) fn type_of(&self, path: &str) -> Value {
        self.state["fields"][path]["type"].clone()
    }

    /// A whole graph: blocks in a root sequence, then a terminal; with its input.
    pub(crate) fn graph(&mut self) -> (Value, Value) {
        self.clean = self.dice.chance(0.4);
        if self.clean {
            self.tag("clean");
        }
        // Every route multiplies the root sequence's completion space by five, and the
        // reference slows down sharply past a few thousand assignments.
        let blocks = 1 + self.dice.weighted(&[5, 4, 1]);
        let mut children = Vec::new();
        for _ in 0..blocks {
            let block = self.block();
            children.extend(block);
        }
        self.terminal(&mut children);
        let initial = self.initial_input();
        let root = seq("root", &self.state.clone(), &[], children);
        let input = sample(&initial, self.dice.chance(0.3));
        (document(&initial, root), input)
    }

    /// Usually the root state itself; sometimes an input the run fills (a required string,
    /// array or record field left out) or one it cannot (a required integer left out).
    fn initial_input(&mut self) -> Value {
        let mut initial = self.state.clone();
        if self.dice.chance(0.1) {
            self.tag("root-fill");
            let fields: &[&str] = if self.clean {
                &["s", "items"]
            } else {
                &["s", "items", "n"]
            };
            let field = *self.dice.pick(fields);
            if let Some(fields) = initial["fields"].as_object_mut() {
                fields.remove(field);
            }
        }
        initial
    }

    fn terminal(&mut self, children: &mut Vec<Value>) {
        let weights: &[u32] = if self.clean {
            &[10, 5, 2]
        } else {
            &[10, 5, 2, 1, 1]
        };
        match self.dice.weighted(weights) {
            0 => children.push(succeed("done", null(), vec![])),
            1 if self.clean && self.defined.is_empty() => {
                children.push(succeed("done", null(), vec![]))
            }
            1 => {
                let flawed = self.flaw(0.2);
                let path = match self.defined.last() {
                    Some(path) if !flawed => path.clone(),
                    _ => self.pick_target().0,
                };
                let ty = self.type_of(&path);
                let output = record(&[("out", ty, true)]);
                let binding = input_binding(&["out"], state_selector(&[&path]));
                children.push(succeed("done", output, vec![binding]));
            }
            2 => children.push(fail("stopped", "stopped")),
            3 => self.tag("fallthrough"),
            _ => {
                self.tag("unreachable");
                children.push(succeed("done", null(), vec![]));
                children.push(self.plain_step().0);
            }
        }
    }

    fn block(&mut self) -> Vec<Value> {
        match self.dice.weighted(&[6, 4, 6, 4, 4, 3, 2, 6]) {
            0 => self.promotion(),
            1 => self.looping(),
            2 => self.choosing(),
            3 => self.parallel(),
            4 => self.mapping(),
            5 => self.subtyping(),
            6 => self.bounds(),
            _ => self.nesting(),
        }
    }
}
