//! The typing and bounds families: bindings, writes and group states between payload types
//! of every kind, and every structural ceiling at and just past its limit.

use serde_json::{Value, json};

use super::blocks::{Gen, related, target_types};
use super::build::*;

impl Gen<'_> {
    /// Bindings, payloads and group states that are, or are nearly, subtypes.
    pub(crate) fn subtyping(&mut self) -> Vec<Value> {
        self.tag("types");
        let state = self.state.clone();
        match self.dice.below(6) {
            0 => {
                // Read a required state field into an input field of a near type.
                self.tag("types:input");
                let (path, ty) = *self.dice.pick(&[("n", 0), ("s", 1), ("items", 2)]);
                let declared = match ty {
                    0 => integer(),
                    1 => string(),
                    _ => array(record(&[("v", integer(), true), ("w", string(), false)])),
                };
                let wanted = if self.flaw(0.5) {
                    related(self.dice, &declared)
                } else {
                    declared
                };
                let name = self.name("r");
                let mut node = step(
                    &name,
                    &self.worker(&name),
                    record(&[("val", wanted, true)]),
                    record(&[("result", integer(), true)]),
                );
                node["inputBindings"] = json!([input_binding(&["val"], state_selector(&[path]))]);
                vec![node]
            }
            1 => {
                // A write whose value type is near its target's.
                self.tag("types:write");
                let (target, ty) = self.pick_target();
                let written = if self.flaw(0.7) {
                    related(self.dice, &ty)
                } else {
                    ty
                };
                let name = self.name("w");
                let mut node = step(
                    &name,
                    &self.worker(&name),
                    null(),
                    record(&[("result", written, true)]),
                );
                node["writeBindings"] =
                    json!([write_binding(&name, "out", &["result"], &[&target])]);
                let route = self.route(&name, false);
                vec![node, route]
            }
            2 => {
                // A child group declaring a state near its parent's.
                self.tag("types:state");
                let mut inner = state.clone();
                let fields = inner["fields"].as_object_mut();
                if let Some(fields) = fields {
                    match if self.clean { 4 } else { self.dice.below(5) } {
                        0 => {
                            fields["n"]["required"] = json!(false);
                        }
                        1 => {
                            fields["t0"]["required"] = json!(true);
                        }
                        2 => {
                            fields.insert(
                                "extra".to_owned(),
                                json!({"type": string(), "required": true}),
                            );
                        }
                        3 => {
                            let types = target_types();
                            fields["t1"]["type"] = self.dice.pick(&types).clone();
                        }
                        _ => {
                            fields.insert(
                                "extra".to_owned(),
                                json!({"type": string(), "required": false}),
                            );
                        }
                    }
                }
                let child = self.plain_step().0;
                vec![seq(&self.name("g"), &inner, &[], vec![child])]
            }
            3 => {
                // Input payloads that bindings cannot build, or build twice.
                self.tag("types:payload");
                let name = self.name("r");
                let (input, bindings) = match if self.clean { 4 } else { self.dice.below(5) } {
                    0 => (
                        string(),
                        json!([input_binding(&["val"], state_selector(&["s"]))]),
                    ),
                    1 => (
                        record(&[("val", integer(), true)]),
                        json!([input_binding(&["nope"], state_selector(&["n"]))]),
                    ),
                    2 => (
                        record(&[("val", integer(), true), ("more", string(), true)]),
                        json!([input_binding(&["val"], state_selector(&["n"]))]),
                    ),
                    3 => (
                        record(&[("val", record(&[("x", integer(), true)]), true)]),
                        json!([
                            input_binding(&["val"], state_selector(&["n"])),
                            input_binding(&["val", "x"], state_selector(&["n"]))
                        ]),
                    ),
                    _ => (
                        record(&[("val", number(), true), ("more", string(), false)]),
                        json!([input_binding(&["val"], state_selector(&["n"]))]),
                    ),
                };
                let mut node = step(
                    &name,
                    &self.worker(&name),
                    input,
                    record(&[("result", integer(), true)]),
                );
                node["inputBindings"] = bindings;
                vec![node]
            }
            4 => {
                // Verifier channels read with a wrong channel or path.
                self.tag("types:channel");
                let (check, v) = self.plain_verifier();
                let variant = if self.clean {
                    5 + self.dice.below(2)
                } else {
                    self.dice.below(7)
                };
                let (channel, path, target): (&str, &[&str], &str) = match variant {
                    0 => ("signal", &["verdict"], "note"),
                    1 => ("signal", &["missing"], "verdict"),
                    2 => ("diagnostic", &["code"], "t0"),
                    3 => ("out", &["nothing"], "t0"),
                    4 => ("diagnostic", &["message"], "verdict"),
                    5 => ("signal", &["verdict"], "verdict"),
                    _ => ("diagnostic", &["message"], "note"),
                };
                let mut check = check;
                check["writeBindings"] = json!([write_binding(&v, channel, path, &[target])]);
                let route = self.route(&v, true);
                vec![check, route]
            }
            _ => {
                // Reading another node's output directly, routed or not.
                self.tag("types:node-output");
                let (first, fname) = self.plain_step();
                let mut out = vec![first];
                if !self.flaw(0.5) {
                    out.push(self.route(&fname, false));
                }
                let name = self.name("w");
                let numeric: Vec<String> = (self.targets.iter())
                    .filter(|(_, ty)| ty["kind"] == "integer" || ty["kind"] == "number")
                    .map(|(n, _)| n.clone())
                    .collect();
                let target = match numeric.first() {
                    Some(t) if !self.flaw(0.3) => t.clone(),
                    _ => self.pick_target().0,
                };
                let mut reader = step(
                    &name,
                    &self.worker(&name),
                    null(),
                    record(&[("result", integer(), true)]),
                );
                reader["writeBindings"] =
                    json!([write_binding(&fname, "out", &["result"], &[&target])]);
                out.push(reader);
                out
            }
        }
    }

    /// A structure at or just past one ceiling.
    pub(crate) fn bounds(&mut self) -> Vec<Value> {
        self.tag("bounds");
        let state = self.state.clone();
        let past = self.flaw(0.5);
        let edge = |limit: u64| if past { limit + 1 } else { limit };
        match self.dice.below(9) {
            0 => {
                self.tag("bounds:loop-executions");
                let (work, _) = self.plain_step();
                let max = if self.dice.chance(0.2) {
                    9_007_199_254_740_991
                } else {
                    edge(65_536)
                };
                vec![loop_(&self.name("l"), &state, &[], max, None, work)]
            }
            1 => {
                self.tag("bounds:loop-entries");
                // 21,845 rounds of a 2-round inner loop: 43,690 executions, 65,535 entries.
                let (work, _) = self.plain_step();
                let inner = loop_(&self.name("l"), &state, &[], 2, None, work);
                let max = if past { 21_846 } else { 21_845 };
                vec![loop_(&self.name("l"), &state, &[], max, None, inner)]
            }
            2 => {
                self.tag("bounds:map-items");
                let (work, _) = self.plain_step();
                vec![map(
                    &self.name("m"),
                    &state,
                    &[],
                    &["items"],
                    edge(1024),
                    work,
                )]
            }
            3 => {
                self.tag("bounds:concurrency");
                let (a, b) = (self.plain_step().0, self.plain_step().0);
                let inner = par(
                    &self.name("p"),
                    &state,
                    &[],
                    json!({"kind": "all"}),
                    vec![a, b],
                );
                let items = if past { 513 } else { 512 };
                vec![map(&self.name("m"), &state, &[], &["items"], items, inner)]
            }
            4 => {
                self.tag("bounds:depth");
                // Loops nest a node one JSON level deeper (a sequence two), so 64 levels stay
                // within the parsers' nesting limit of 128. The root is depth 1, this block's
                // outermost loop depth 2, its step depth `levels + 2`.
                let levels = if past { 63 } else { 62 };
                let mut node = self.plain_step().0;
                for _ in 0..levels {
                    node = loop_(&self.name("d"), &state, &[], 1, None, node);
                }
                vec![node]
            }
            5 if self.heavy => {
                self.tag("bounds:guard-nodes");
                let (check, v) = self.plain_verifier();
                let count = if past { 4096 } else { 4095 };
                let guards = vec![signal_is(&v, "verdict", &["accepted"]); count];
                let next = self.plain_step().0;
                let gate = choice(
                    &self.name("c"),
                    &state,
                    &[],
                    vec![(any(guards), next)],
                    Some(fail(&self.name("f"), "rejected")),
                );
                vec![check, gate]
            }
            6 if self.heavy => {
                self.tag("bounds:node-count");
                let count = if past { 4094 } else { 4093 };
                let steps: Vec<Value> = (0..count).map(|_| self.plain_step().0).collect();
                vec![seq(&self.name("g"), &state, &[], steps)]
            }
            5..=7 => {
                // A map aggregate of four error outcomes over M items has C(M+4, 4)
                // candidates, past 65,536 from 33 items on. Just under the ceiling the
                // reference enumerates for most of a minute, so the space stays small here.
                self.tag("bounds:assignment-space");
                let (work, name) = self.plain_step();
                let items = if past {
                    *self.dice.pick(&[33, 64, 1024])
                } else {
                    8
                };
                let each = map(&self.name("m"), &state, &[], &["items"], items, work);
                let when = k_of_map(1, selector(&name, "error", None), &ERRORS);
                let next = self.plain_step().0;
                let failed = fail(&self.name("f"), "failed");
                let gate = choice(
                    &self.name("c"),
                    &state,
                    &[],
                    vec![(when, failed)],
                    Some(next),
                );
                vec![each, gate]
            }
            _ => {
                self.tag("bounds:counts");
                let (a, b) = (self.plain_step().0, self.plain_step().0);
                let count = if past { 3 } else { 2 };
                let join = json!({"kind": "quorum", "count": count});
                vec![par(&self.name("p"), &state, &[], join, vec![a, b])]
            }
        }
    }
}
