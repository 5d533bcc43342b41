//! The nesting family: random trees of every group kind (maps inside pars inside maps, choices
//! in loop bodies, first-joins over branch verifiers) with random guards over the nodes that
//! dominate them — signals, errors, join and map outcomes, `k_of_n` and `k_of_map` — where
//! the assignment engine's correlations (joins, map presence, shared keys) are exercised.

use serde_json::{Value, json};

use super::blocks::Gen;
use super::build::*;

/// What a guard may read at a point of the tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// Executables entered on every path so far: (name, is_verifier, enclosing maps).
    executables: Vec<(String, bool, Vec<String>)>,
    /// Pars, loops and maps completed on every path so far: (name, field, labels).
    groups: Vec<(String, &'static str, [&'static str; 2])>,
    /// Maps around this point, innermost last.
    maps: Vec<String>,
}

impl Gen<'_> {
    /// A random tree as root-sequence children.
    pub(crate) fn nesting(&mut self) -> Vec<Value> {
        self.tag("nested");
        let mut scope = Scope::default();
        let count = 1 + self.dice.below(3);
        (0..count).map(|_| self.tree(3, &mut scope)).collect()
    }

    fn tree(&mut self, depth: usize, scope: &mut Scope) -> Value {
        let kinds: &[u32] = if depth == 0 {
            &[6, 3, 0, 0, 0, 0, 0]
        } else {
            &[4, 3, 3, 3, 2, 2, 2]
        };
        match self.dice.weighted(kinds) {
            0 => {
                let (mut node, name) = self.plain_step();
                self.maybe_write(&mut node, &name, scope);
                scope.executables.push((name, false, scope.maps.clone()));
                node
            }
            1 => {
                let (mut node, name) = self.plain_verifier();
                self.maybe_write(&mut node, &name, scope);
                scope.executables.push((name, true, scope.maps.clone()));
                node
            }
            2 => {
                let count = 1 + self.dice.below(3);
                let children = (0..count).map(|_| self.tree(depth - 1, scope)).collect();
                seq(&self.name("s"), &self.state.clone(), &[], children)
            }
            3 => self.nested_choice(depth, scope),
            4 => self.nested_par(depth, scope),
            5 => self.nested_loop(depth, scope),
            _ => self.nested_map(depth, scope),
        }
    }

    /// Sometimes writes the node's own output into an optional target or, in a map body,
    /// into `results` by index.
    fn maybe_write(&mut self, node: &mut Value, name: &str, scope: &Scope) {
        if !self.dice.chance(0.3) {
            return;
        }
        let target = if !scope.maps.is_empty() && self.dice.chance(0.5) {
            "results".to_owned()
        } else {
            let numeric: Vec<String> = (self.targets.iter())
                .filter(|(_, ty)| ty["kind"] == "integer" || ty["kind"] == "number")
                .map(|(n, _)| n.clone())
                .collect();
            match numeric.first() {
                Some(t) => t.clone(),
                None => return,
            }
        };
        node["writeBindings"] = json!([write_binding(name, "out", &["result"], &[&target])]);
    }

    /// A guard over what `scope` offers (sometimes over a node it does not).
    fn random_guard(&mut self, scope: &Scope, depth: usize) -> Value {
        if depth > 0 && self.dice.chance(0.35) {
            let parts = 2 + self.dice.below(2);
            let guards: Vec<Value> = (0..parts)
                .map(|_| self.random_guard(scope, depth - 1))
                .collect();
            return match self.dice.below(3) {
                0 => all(guards),
                1 => any(guards),
                _ => not(guards
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| errors_of("none"))),
            };
        }
        let use_group = !scope.groups.is_empty() && self.dice.chance(0.25);
        if use_group {
            let (name, field, labels) = self.dice.pick(&scope.groups).clone();
            let chosen: &[&str] = if self.dice.chance(0.5) {
                &labels[..1]
            } else {
                &labels[1..]
            };
            return is_in(selector(&name, "group", Some(field)), chosen);
        }
        if scope.executables.is_empty() {
            return errors_of("missing");
        }
        let (name, is_verifier, maps) = self.dice.pick(&scope.executables).clone();
        let signal = is_verifier && self.dice.chance(0.6);
        let (sel, labels): (Value, Vec<&str>) = if signal {
            let labels = if self.dice.chance(0.5) {
                vec!["accepted"]
            } else {
                vec!["rejected"]
            };
            (selector(&name, "signal", Some("verdict")), labels)
        } else {
            let labels = if self.dice.chance(0.6) {
                ERRORS.to_vec()
            } else {
                vec!["timeout"]
            };
            (selector(&name, "error", None), labels)
        };
        // Outside the maps the node ran in, its outcomes are read as per-item counts.
        let aggregated =
            maps.len() > scope.maps.len() || (!maps.is_empty() && self.dice.chance(0.3));
        if aggregated {
            let count = 1 + self.dice.below(2) as u64;
            return k_of_map(count, sel, &labels);
        }
        if self.dice.chance(0.15) && scope.executables.len() > 1 {
            let (other, other_verifier, _) = self.dice.pick(&scope.executables).clone();
            let other_sel = if other_verifier && signal {
                selector(&other, "signal", Some("verdict"))
            } else {
                selector(&other, "error", None)
            };
            let labels: Vec<&str> = if signal {
                vec!["accepted"]
            } else {
                ERRORS.to_vec()
            };
            return k_of_n(1 + self.dice.below(2) as u64, vec![sel, other_sel], &labels);
        }
        is_in(sel, &labels)
    }

    fn nested_choice(&mut self, depth: usize, scope: &mut Scope) -> Value {
        self.tag("nested:choice");
        let branches = 1 + self.dice.below(2);
        let mut built = Vec::new();
        let mut after: Option<Scope> = None;
        for _ in 0..branches {
            let when = self.random_guard(scope, 2);
            let mut inner = scope.clone();
            let node = if self.dice.chance(0.25) {
                fail(&self.name("f"), "rejected")
            } else {
                self.tree(depth - 1, &mut inner)
            };
            after = Some(intersect(after, inner));
            built.push((when, node));
        }
        let otherwise = (!self.flaw(0.2)).then(|| {
            let mut inner = scope.clone();
            let node = self.tree(depth - 1, &mut inner);
            after = Some(intersect(after.take(), inner));
            node
        });
        // Nodes of one alternative only do not dominate what follows.
        if let Some(after) = after {
            *scope = after;
        }
        choice(&self.name("c"), &self.state.clone(), &[], built, otherwise)
    }

    fn nested_par(&mut self, depth: usize, scope: &mut Scope) -> Value {
        self.tag("nested:par");
        let count = 2 + self.dice.below(2);
        let mut inner_scopes = Vec::new();
        let branches: Vec<Value> = (0..count)
            .map(|_| {
                let mut inner = scope.clone();
                let node = self.tree(depth - 1, &mut inner);
                inner_scopes.push(inner);
                node
            })
            .collect();
        let name = self.name("p");
        let join = if self.dice.chance(0.3) {
            // A first-join's guard may read any node of its branches.
            let mut reach = scope.clone();
            for inner in &inner_scopes {
                reach.executables.extend(inner.executables.iter().cloned());
            }
            let when = self.random_guard(&reach, 1);
            scope
                .groups
                .push((name.clone(), "raced", ["satisfied", "no_satisfier"]));
            json!({"kind": "first", "when": when})
        } else {
            let join = self.join(count);
            let join = if join["kind"] == "first" {
                json!({"kind": "any"})
            } else {
                join
            };
            scope
                .groups
                .push((name.clone(), "joined", ["reached", "quorum_unreachable"]));
            join
        };
        par(&name, &self.state.clone(), &[], join, branches)
    }

    fn nested_loop(&mut self, depth: usize, scope: &mut Scope) -> Value {
        self.tag("nested:loop");
        let mut inner = scope.clone();
        let before = inner.executables.len();
        let body = self.tree(depth - 1, &mut inner);
        let body_nodes = Scope {
            executables: inner.executables[before..].to_vec(),
            ..Scope::default()
        };
        let until = (!body_nodes.executables.is_empty() && self.dice.chance(0.7))
            .then(|| self.random_guard(&body_nodes, 1));
        let name = self.name("l");
        *scope = inner;
        scope
            .groups
            .push((name.clone(), "terminated", ["converged", "exhausted"]));
        let max = 1 + self.dice.below(4) as u64;
        loop_(&name, &self.state.clone(), &[], max, until, body)
    }

    fn nested_map(&mut self, depth: usize, scope: &mut Scope) -> Value {
        self.tag("nested:map");
        let name = self.name("m");
        let mut inner = scope.clone();
        inner.maps.push(name.clone());
        let body = self.tree(depth - 1, &mut inner);
        inner.maps.pop();
        *scope = inner;
        scope
            .groups
            .push((name.clone(), "overflow", ["ok", "overflow"]));
        let max = 1 + self.dice.below(3) as u64;
        let promoted: &[&[&str]] = if self.dice.chance(0.5) {
            &[&["results"]]
        } else {
            &[]
        };
        map(&name, &self.state.clone(), promoted, &["items"], max, body)
    }
}

/// The executables and groups both scopes have (what every alternative entered).
fn intersect(a: Option<Scope>, b: Scope) -> Scope {
    match a {
        None => b,
        Some(a) => Scope {
            executables: a
                .executables
                .into_iter()
                .filter(|e| b.executables.contains(e))
                .collect(),
            groups: a
                .groups
                .into_iter()
                .filter(|g| b.groups.contains(g))
                .collect(),
            maps: a.maps,
        },
    }
}
