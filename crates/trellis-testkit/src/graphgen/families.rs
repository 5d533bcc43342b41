//! The control and dataflow families: promotions, loops, choices (error guards, masked
//! guards, common writes), par joins and maps with indexed promotion.

use serde_json::{Value, json};

use super::blocks::Gen;
use super::build::*;

/// Promoted paths as the builders take them.
fn paths(promoted: &[Vec<String>]) -> Vec<Vec<&str>> {
    promoted
        .iter()
        .map(|p| p.iter().map(String::as_str).collect())
        .collect()
}

fn slices<'a>(paths: &'a [Vec<&'a str>]) -> Vec<&'a [&'a str]> {
    paths.iter().map(Vec::as_slice).collect()
}

impl Gen<'_> {
    /// A group writing an optional target and promoting it (every group kind, every channel),
    /// routed inside or after, then maybe read.
    pub(crate) fn promotion(&mut self) -> Vec<Value> {
        self.tag("promotion");
        let (target, ty) = self.pick_target();
        let (producer, pname, channel) = self.producer(&target, &ty);
        self.tag(format!("promotion:{channel}"));
        let is_verifier = producer["kind"] == "verifier";
        let routed_inside = self.dice.chance(0.35);
        let mut inner = vec![producer];
        if routed_inside {
            inner.push(self.route(&pname, is_verifier));
        }
        let promoted: Vec<Vec<String>> = if self.flaw(0.3) {
            match self.dice.below(4) {
                0 => vec![vec!["missing".to_owned()]],
                1 => vec![vec![target.clone(), "x".to_owned()]],
                2 => vec![],
                _ => vec![vec![target.clone()], vec!["n".to_owned()]],
            }
        } else {
            vec![vec![target.clone()]]
        };
        let promoted_paths = paths(&promoted);
        let promoted = slices(&promoted_paths);
        let state = self.state.clone();
        let mut out = Vec::new();
        let group_name = self.name("g");
        let body_name = self.name("b");
        let group = match self.dice.below(6) {
            0 | 1 => seq(&group_name, &state, &promoted, inner),
            2 => {
                self.tag("promotion:loop");
                let max = 1 + self.dice.below(3) as u64;
                let body = seq(&body_name, &state, &promoted, inner);
                loop_(&group_name, &state, &promoted, max, None, body)
            }
            3 => {
                self.tag("promotion:par");
                let (other, oname, _) = self.producer(&target, &ty);
                let second = if routed_inside || self.flaw(0.5) {
                    let route = self.route(&oname, other["kind"] == "verifier");
                    seq(&self.name("b"), &state, &promoted, vec![other, route])
                } else {
                    other
                };
                // Both branches write the target: under join all they conflict.
                let join = if self.flaw(0.3) {
                    json!({"kind": "all"})
                } else {
                    json!({"kind": "any"})
                };
                let first = seq(&body_name, &state, &promoted, inner);
                par(&group_name, &state, &promoted, join, vec![first, second])
            }
            _ => {
                self.tag("promotion:choice");
                let (check, vname) = self.plain_verifier();
                out.push(check);
                let otherwise = match self.dice.below(3) {
                    0 => fail(&self.name("f"), "rejected"),
                    1 if routed_inside => {
                        let (other, oname, _) = self.producer(&target, &ty);
                        let route = self.route(&oname, other["kind"] == "verifier");
                        seq(&self.name("b"), &state, &promoted, vec![other, route])
                    }
                    1 => self.producer(&target, &ty).0,
                    _ if self.clean => fail(&self.name("f"), "rejected"),
                    _ => self.plain_step().0,
                };
                let when = signal_is(&vname, "verdict", &["accepted"]);
                let body = seq(&body_name, &state, &promoted, inner);
                choice(
                    &group_name,
                    &state,
                    &promoted,
                    vec![(when, body)],
                    Some(otherwise),
                )
            }
        };
        out.push(group);
        let mut routed = routed_inside;
        if !routed_inside && !self.clean && self.dice.chance(0.6) {
            out.push(self.route(&pname, is_verifier));
            routed = true;
        }
        if routed
            && promoted_paths
                .first()
                .is_some_and(|p| p == &[target.as_str()])
        {
            self.defined.push(target.clone());
        }
        if (routed && self.dice.chance(0.6)) || self.flaw(0.3) {
            out.push(self.reader(&target, &ty));
        }
        out
    }

    /// A do-while loop of a worker and a verifier with an exit guard over every kind of
    /// selector, a bound from 1 to past the old ceiling of 100, and maybe a promotion.
    pub(crate) fn looping(&mut self) -> Vec<Value> {
        self.tag("loop");
        let state = self.state.clone();
        let (target, ty) = self.pick_target();
        let (work, wname, _) = self.producer(&target, &ty);
        let (check, vname) = self.plain_verifier();
        let accepted = || signal_is(&vname, "verdict", &["accepted"]);
        let outer = self.verifiers.first().cloned();
        let legal = self.clean || self.dice.chance(0.6);
        let until = if legal {
            match self.dice.below(6) {
                0 | 1 => Some(accepted()),
                2 => Some(errors_of(&wname)),
                3 => Some(any(vec![accepted(), errors_of(&vname)])),
                4 => Some(k_of_n(
                    1,
                    vec![selector(&vname, "signal", Some("verdict"))],
                    &["accepted"],
                )),
                _ => None,
            }
        } else {
            self.tag("loop:bad-exit");
            match self.dice.below(4) {
                0 => outer.map(|o| signal_is(&o, "verdict", &["accepted"])),
                1 => Some(signal_is(&wname, "verdict", &["accepted"])),
                2 => Some(all(vec![accepted(), not(accepted())])),
                _ => Some(is_in(
                    selector(&vname, "group", Some("terminated")),
                    &["converged"],
                )),
            }
        };
        let max = *self.dice.pick(&[1, 2, 3, 5, 10, 100, 101, 250]);
        let promoted: Vec<Vec<String>> = if self.dice.chance(0.5) {
            vec![vec![target.clone()]]
        } else {
            vec![]
        };
        let promoted_paths = paths(&promoted);
        let promoted = slices(&promoted_paths);
        let body_name = self.name("b");
        let body = seq(&body_name, &state, &promoted, vec![work, check]);
        let name = self.name("l");
        let mut out = vec![loop_(&name, &state, &promoted, max, until, body)];
        let routed = self.dice.chance(0.6);
        if routed {
            out.push(self.route(&wname, false));
            if !promoted.is_empty() {
                self.defined.push(target.clone());
            }
        }
        if (routed && !promoted.is_empty() && self.dice.chance(0.5)) || self.flaw(0.3) {
            out.push(self.reader(&target, &ty));
        }
        out
    }

    /// A verifier and a choice over it: exhaustive and not, dead branches and otherwise,
    /// error guards masked by an earlier choice's alternative, and common writes.
    pub(crate) fn choosing(&mut self) -> Vec<Value> {
        self.tag("choice");
        let state = self.state.clone();
        let (check, v) = self.plain_verifier();
        let mut out = vec![check];
        let accepted = || signal_is(&v, "verdict", &["accepted"]);
        let rejected = || signal_is(&v, "verdict", &["rejected"]);
        let name = self.name("c");
        let fail_node = |g: &mut Self| fail(&g.name("f"), "rejected");
        let pattern = if self.clean {
            *self.dice.pick(&[0, 1, 2, 5, 6, 7, 9])
        } else {
            self.dice.below(10)
        };
        let node = match pattern {
            0 => {
                let otherwise = (!self.flaw(0.5)).then(|| fail_node(self));
                let step = self.plain_step().0;
                let branches = vec![(accepted(), step), (rejected(), fail_node(self))];
                choice(&name, &state, &[], branches, otherwise)
            }
            1 => {
                let step = self.plain_step().0;
                let branches = vec![
                    (errors_of(&v), fail_node(self)),
                    (rejected(), fail_node(self)),
                ];
                choice(&name, &state, &[], branches, Some(step))
            }
            2 => {
                let step = self.plain_step().0;
                choice(
                    &name,
                    &state,
                    &[],
                    vec![(not(accepted()), fail_node(self))],
                    Some(step),
                )
            }
            3 => {
                self.tag("choice:dead");
                let (a, b) = (self.plain_step().0, self.plain_step().0);
                let branches = vec![(accepted(), a), (accepted(), b)];
                choice(&name, &state, &[], branches, Some(fail_node(self)))
            }
            4 => {
                self.tag("choice:dead");
                let (a, b) = (self.plain_step().0, self.plain_step().0);
                let both = signal_is(&v, "verdict", &["accepted", "rejected"]);
                choice(
                    &name,
                    &state,
                    &[],
                    vec![(errors_of(&v), fail_node(self)), (both, a)],
                    Some(b),
                )
            }
            5 => return self.masked(out, &v),
            6 => return self.common_write(out, &v),
            7 => {
                self.tag("choice:k_of_n");
                let (second, v2) = self.plain_verifier();
                out.push(second);
                let k = if self.flaw(0.3) {
                    3
                } else {
                    *self.dice.pick(&[1, 2])
                };
                let sels = vec![
                    selector(&v, "signal", Some("verdict")),
                    selector(&v2, "signal", Some("verdict")),
                ];
                let step = self.plain_step().0;
                let when = k_of_n(k, sels, &["accepted"]);
                choice(
                    &name,
                    &state,
                    &[],
                    vec![(when, step)],
                    Some(fail_node(self)),
                )
            }
            8 => {
                self.tag("choice:illegal");
                let (s, sname) = self.plain_step();
                out.push(s);
                let when = match self.dice.below(3) {
                    0 => signal_is(&sname, "verdict", &["accepted"]),
                    1 => signal_is(&v, "verdict", &["accepted", "maybe"]),
                    _ => is_in(selector(&v, "group", Some("joined")), &["reached"]),
                };
                let step = self.plain_step().0;
                choice(
                    &name,
                    &state,
                    &[],
                    vec![(when, step)],
                    Some(fail_node(self)),
                )
            }
            _ => {
                let step = self.plain_step().0;
                let when = any(vec![errors_of(&v), rejected()]);
                choice(
                    &name,
                    &state,
                    &[],
                    vec![(when, fail_node(self))],
                    Some(step),
                )
            }
        };
        out.push(node);
        if matches!(pattern, 1 | 2 | 9) {
            self.verifiers.push(v);
        }
        out
    }

    /// `pick: accepted → a, otherwise → b`, then a gate whose guard reads `a.error` under
    /// various evaluation prefixes (§13.6).
    fn masked(&mut self, mut out: Vec<Value>, v: &str) -> Vec<Value> {
        self.tag("choice:masked-error");
        let state = self.state.clone();
        let accepted = || signal_is(v, "verdict", &["accepted"]);
        let (a, an) = self.plain_step();
        let (b, bn) = self.plain_step();
        let pick = choice(&self.name("c"), &state, &[], vec![(accepted(), a)], Some(b));
        out.push(pick);
        let legal = [
            all(vec![accepted(), errors_of(&an)]),
            any(vec![not(accepted()), errors_of(&an)]),
            all(vec![not(accepted()), errors_of(&bn)]),
            all(vec![accepted(), not(errors_of(&an))]),
        ];
        let illegal = [
            errors_of(&an),
            all(vec![errors_of(&an), accepted()]),
            any(vec![accepted(), errors_of(&an)]),
            all(vec![accepted(), errors_of(&bn)]),
        ];
        let when = if self.flaw(0.4) {
            self.dice.pick(&illegal).clone()
        } else {
            self.dice.pick(&legal).clone()
        };
        let next = self.plain_step().0;
        let gate_name = self.name("c");
        let failed = fail(&self.name("f"), "failed");
        out.push(choice(
            &gate_name,
            &state,
            &[],
            vec![(when, failed)],
            Some(next),
        ));
        out
    }

    /// Both alternatives of a choice write one target through different producers; the
    /// choice promotes it (or not), and a gate routes one, both or neither producer (§13.6).
    fn common_write(&mut self, mut out: Vec<Value>, v: &str) -> Vec<Value> {
        self.tag("choice:common-write");
        let state = self.state.clone();
        let (target, ty) = self.pick_target();
        let accepted = || signal_is(v, "verdict", &["accepted"]);
        let (a, an, _) = self.producer(&target, &ty);
        let (b, bn, _) = self.producer(&target, &ty);
        let promoted_path = [target.as_str()];
        let promoted: Vec<&[&str]> = if self.flaw(0.3) {
            vec![]
        } else {
            vec![&promoted_path]
        };
        let pick = choice(
            &self.name("c"),
            &state,
            &promoted,
            vec![(accepted(), a)],
            Some(b),
        );
        out.push(pick);
        let both = any(vec![
            all(vec![accepted(), errors_of(&an)]),
            all(vec![not(accepted()), errors_of(&bn)]),
        ]);
        let when = if self.flaw(0.4) {
            if self.dice.chance(0.5) {
                all(vec![accepted(), errors_of(&an)])
            } else {
                not(accepted())
            }
        } else {
            both
        };
        let reader = self.reader(&target, &ty);
        let then = if self.dice.chance(0.5) {
            reader
        } else {
            let next = self.plain_step().0;
            seq(&self.name("b"), &state, &[], vec![next, reader])
        };
        let failed = fail(&self.name("f"), "failed");
        let gate_name = self.name("c");
        out.push(choice(
            &gate_name,
            &state,
            &[],
            vec![(when, failed)],
            Some(then),
        ));
        out
    }

    /// A join over `branches` branches: all, any, quorum (sometimes past the branch count),
    /// or first.
    pub(crate) fn join(&mut self, branches: usize) -> Value {
        match self.dice.below(4) {
            0 => json!({"kind": "all"}),
            1 => json!({"kind": "any"}),
            2 => {
                let count = if self.flaw(0.3) {
                    branches + 1
                } else {
                    1 + self.dice.below(branches)
                };
                json!({"kind": "quorum", "count": count})
            }
            _ => match self.verifiers.first() {
                Some(v) => json!({"kind": "first", "when": signal_is(v, "verdict", &["accepted"])}),
                None => json!({"kind": "any"}),
            },
        }
    }

    /// A par of producing branches with every join, promotions, and a later guard on the
    /// join's outcome.
    pub(crate) fn parallel(&mut self) -> Vec<Value> {
        self.tag("par");
        let state = self.state.clone();
        let branches = 2 + self.dice.below(2);
        let mut join = self.join(branches);
        let (target, ty) = self.pick_target();
        // Branches of a join-all writing one target conflict.
        let common = if join["kind"] == "all" {
            self.flaw(0.5)
        } else {
            self.dice.chance(0.6)
        };
        let routed = self.clean || self.dice.chance(0.5);
        let mut nodes = Vec::new();
        let mut written: Vec<(String, Value)> = Vec::new();
        let mut last_verifier = None;
        for i in 0..branches {
            let (t, t_ty) = if common || i == 0 {
                (target.clone(), ty.clone())
            } else {
                let others: Vec<(String, Value)> = (self.targets.iter())
                    .filter(|(n, _)| !written.iter().any(|(w, _)| w == n))
                    .cloned()
                    .collect();
                self.dice.pick(&others).clone()
            };
            let (producer, pname, _) = self.producer(&t, &t_ty);
            let is_verifier = producer["kind"] == "verifier";
            if is_verifier {
                last_verifier = Some(pname.clone());
            }
            written.push((t, t_ty));
            nodes.push(if routed {
                let route = self.route(&pname, is_verifier);
                seq(&self.name("b"), &state, &[], vec![producer, route])
            } else {
                producer
            });
        }
        written.sort_by(|a, b| a.0.cmp(&b.0));
        written.dedup_by(|a, b| a.0 == b.0);
        if join["kind"] == "first"
            && let Some(v) = &last_verifier
            && self.dice.chance(0.6)
        {
            join["when"] = signal_is(v, "verdict", &["accepted"]);
        }
        let promoted: Vec<Vec<String>> = match self.dice.below(4) {
            0 => vec![],
            1 => vec![vec![target.clone()]],
            _ => written.iter().map(|(w, _)| vec![w.clone()]).collect(),
        };
        let promoted_paths = paths(&promoted);
        let promoted = slices(&promoted_paths);
        let name = self.name("p");
        let is_first = join["kind"] == "first";
        let mut out = vec![par(&name, &state, &promoted, join, nodes)];
        let readable = routed && promoted_paths.iter().any(|p| p == &[target.as_str()]);
        if self.dice.chance(0.6) {
            let (field, good, bad) = if is_first {
                ("raced", "satisfied", "no_satisfier")
            } else {
                ("joined", "reached", "quorum_unreachable")
            };
            let field = if self.flaw(0.1) { "overflow" } else { field };
            let outcome = selector(&name, "group", Some(field));
            let (when, then) = if self.dice.chance(0.5) || (self.clean && !readable) {
                (is_in(outcome, &[bad]), fail(&self.name("f"), "failed"))
            } else {
                (is_in(outcome, &[good]), self.reader(&target, &ty))
            };
            let otherwise = if self.clean || self.dice.chance(0.8) {
                Some(self.plain_step().0)
            } else {
                None
            };
            out.push(choice(
                &self.name("c"),
                &state,
                &[],
                vec![(when, then)],
                otherwise,
            ));
        }
        if self.flaw(0.3) {
            out.push(self.reader(&target, &ty));
        }
        out
    }

    /// A map over the item list (or a non-array, a missing or an optional path) whose body
    /// reads `item` and writes `results` by index, with a later `k_of_map` route.
    pub(crate) fn mapping(&mut self) -> Vec<Value> {
        self.tag("map");
        let state = self.state.clone();
        let over = if self.flaw(0.3) {
            *self.dice.pick(&["s", "nothing", "results"])
        } else {
            "items"
        };
        let item_field = if self.flaw(0.2) {
            *self.dice.pick(&["w", "zz"])
        } else {
            "v"
        };
        let item_path = [item_field];
        let name = self.name("w");
        let mut work = step(
            &name,
            &self.worker(&name),
            record(&[("v", integer(), true)]),
            record(&[("result", integer(), true)]),
        );
        work["inputBindings"] = json!([input_binding(&["v"], item_selector(&item_path))]);
        let target = if self.flaw(0.15) { "t0" } else { "results" };
        work["writeBindings"] = json!([write_binding(&name, "out", &["result"], &[target])]);
        let promoted: Vec<Vec<String>> = if self.flaw(0.25) {
            if self.dice.chance(0.5) {
                vec![]
            } else {
                vec![vec!["t0".to_owned()]]
            }
        } else {
            vec![vec!["results".to_owned()]]
        };
        let promoted_paths = paths(&promoted);
        let promoted = slices(&promoted_paths);
        let body = if self.dice.chance(0.4) {
            let inner_route = self.route(&name, false);
            seq(&self.name("b"), &state, &promoted, vec![work, inner_route])
        } else {
            work
        };
        let max = *self.dice.pick(&[1, 2, 3, 8]);
        let map_name = self.name("m");
        let mut out = vec![map(&map_name, &state, &promoted, &[over], max, body)];
        let reads = self.reader("results", &array(integer()));
        match self.dice.below(4) {
            0 | 1 => {
                let count = if self.flaw(0.2) { max + 1 } else { 1 };
                let when = k_of_map(count, selector(&name, "error", None), &ERRORS);
                let failed = fail(&self.name("f"), "failed");
                out.push(choice(
                    &self.name("c"),
                    &state,
                    &[],
                    vec![(when, failed)],
                    Some(reads),
                ));
            }
            2 if !self.clean => out.push(reads),
            _ => {
                let outcome = selector(&map_name, "group", Some("overflow"));
                let otherwise = Some(self.plain_step().0);
                let failed = fail(&self.name("f"), "failed");
                let when = is_in(outcome, &["overflow"]);
                out.push(choice(
                    &self.name("c"),
                    &state,
                    &[],
                    vec![(when, failed)],
                    otherwise,
                ));
            }
        }
        out
    }
}
