//! Mutations of whole documents along the verifier's rule families: required flags, payload
//! types, routes, channels, promotions, guard labels and selectors, joins, bounds at each
//! ceiling, otherwise branches, duplicate names, loop exits, map sources, child order; and the
//! admission fields of executables (attempts, instructions) and loop iteration counts taken
//! from the input (`maxIterationsInput`, see [`ITERATIONS_FIELD`]); binding targets (missing,
//! below a scalar, bound twice), `in` guards read as `k_of_map`, and worker references
//! (another node's, built-in agent and delivery workers, the reserved one, malformed ones).

use serde_json::{Value, json};

use super::blocks::{related, target_types};
use super::build::{ERRORS, errors_of, selector};
use super::dice::Dice;

/// Every JSON pointer in `doc` whose value satisfies `wanted`, in document order.
fn sites(doc: &Value, wanted: &dyn Fn(&str, &Value) -> bool) -> Vec<String> {
    fn walk(
        at: &mut String,
        key: &str,
        v: &Value,
        wanted: &dyn Fn(&str, &Value) -> bool,
        out: &mut Vec<String>,
    ) {
        if wanted(key, v) {
            out.push(at.clone());
        }
        let len = at.len();
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    at.push('/');
                    at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(at, k, child, wanted, out);
                    at.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    at.push_str(&format!("/{i}"));
                    walk(at, key, child, wanted, out);
                    at.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&mut String::new(), "", doc, wanted, &mut out);
    out
}

fn is_node(v: &Value) -> bool {
    v.get("name").is_some_and(Value::is_string)
        && v.get("kind").is_some_and(Value::is_string)
        && v.get("labels").is_none()
}

fn is_group(v: &Value) -> bool {
    is_node(v) && v.get("promotedStatePaths").is_some()
}

fn is_payload_type(key: &str, v: &Value) -> bool {
    matches!(
        key,
        "type" | "input" | "output" | "state" | "diagnostic" | "items" | "initialInput"
    ) && v.get("kind").is_some_and(Value::is_string)
        && v.get("name").is_none()
}

/// Names of every node in the document.
fn node_names(doc: &Value) -> Vec<String> {
    sites(doc, &|_, v| is_node(v))
        .iter()
        .filter_map(|p| doc.pointer(p)?.get("name")?.as_str().map(str::to_owned))
        .collect()
}

/// Applies one mutation (trying other kinds when a kind finds no site) and returns its name.
pub(crate) fn mutate(dice: &mut Dice, doc: &mut Value) -> &'static str {
    for _ in 0..8 {
        let kind = KINDS[dice.weighted(&WEIGHTS)];
        if apply(kind, dice, doc) {
            return kind;
        }
    }
    "none"
}

/// The optional integer input field a mutated loop takes its iteration count from.
pub const ITERATIONS_FIELD: &str = "iterations";

const KINDS: [&str; 24] = [
    "required",
    "retype",
    "unroute",
    "channel",
    "promote",
    "labels",
    "selector",
    "wrap-guard",
    "join",
    "bound",
    "otherwise",
    "duplicate",
    "until",
    "over",
    "swap",
    "drop",
    "item",
    "attempts",
    "instructions",
    "iterations",
    "rebind",
    "bind-twice",
    "k-of-map",
    "worker",
];

/// How often each kind is drawn: the admission fields a quarter as often as the verifier's
/// families, since the reference refuses at admission before verifying (and the allowlisted
/// differences would otherwise hide a tenth of the corpus's verifier answers).
const WEIGHTS: [u32; 24] = [
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1, 1, 2, 2, 2, 2, 1,
];

/// Worker references a `worker` mutation may give an executable besides another node's: the
/// built-in agent and delivery workers, the reserved single-worker reference, and malformed
/// references (no version, version 0, a leading zero, an invalid name).
const WORKERS: [&str; 10] = [
    "builtin.agent.reviewer@1",
    "builtin.git-delivery.push@1",
    "builtin.git-delivery.pr@2",
    "builtin.comment-delivery.post@1",
    "legacy.zeroshot.ship@1",
    "gen.other@2",
    "gen.noversion",
    "gen.zero@0",
    "gen.lead@01",
    "1gen@1",
];

fn is_bindings(key: &str) -> bool {
    matches!(key, "inputBindings" | "writeBindings" | "bindings")
}

fn pick_site(
    dice: &mut Dice,
    doc: &Value,
    wanted: &dyn Fn(&str, &Value) -> bool,
) -> Option<String> {
    let found = sites(doc, wanted);
    (!found.is_empty()).then(|| dice.pick(&found).clone())
}

fn apply(kind: &str, dice: &mut Dice, doc: &mut Value) -> bool {
    let names = node_names(doc);
    // The references a `worker` mutation may reuse, read before the document is borrowed.
    let workers: Vec<Value> = match kind {
        "worker" => sites(doc, &|k, v| k == "worker" && v.is_string())
            .iter()
            .filter_map(|p| doc.pointer(p).cloned())
            .collect(),
        _ => Vec::new(),
    };
    let Some(site) = (match kind {
        "required" => pick_site(dice, doc, &|k, v| k == "required" && v.is_boolean()),
        "retype" => pick_site(dice, doc, &is_payload_type),
        "unroute" => pick_site(dice, doc, &|_, v| {
            v["kind"] == "choice" && v["branches"].as_array().is_some_and(|b| !b.is_empty())
        }),
        "channel" => pick_site(dice, doc, &|k, v| {
            k == "writeBindings" && v.get("value").is_some()
        }),
        "promote" => pick_site(dice, doc, &|_, v| is_group(v)),
        "labels" => pick_site(dice, doc, &|_, v| {
            v.get("labels").is_some_and(Value::is_array)
        }),
        "selector" => pick_site(dice, doc, &|_, v| {
            v.get("source")
                .is_some_and(|s| s == "error" || s == "signal" || s == "group")
                && v.get("name").is_some()
        }),
        "wrap-guard" => pick_site(dice, doc, &|k, v| {
            (k == "when" || k == "until") && v.is_object()
        }),
        "join" => pick_site(dice, doc, &|k, v| k == "join" && v.is_object()),
        "bound" => pick_site(dice, doc, &|k, v| {
            matches!(k, "maxIterations" | "maxItems" | "count") && v.is_u64()
        }),
        "otherwise" => pick_site(dice, doc, &|_, v| v["kind"] == "choice" && is_node(v)),
        "duplicate" => pick_site(dice, doc, &|_, v| is_node(v)),
        "until" => pick_site(dice, doc, &|_, v| v["kind"] == "loop" && is_node(v)),
        "over" => pick_site(dice, doc, &|k, v| k == "over" && v.is_object()),
        "swap" | "drop" => pick_site(dice, doc, &|k, v| {
            k == "children" && v.as_array().is_some_and(|c| c.len() > 1)
        }),
        "item" => pick_site(dice, doc, &|_, v| {
            v.get("source").is_some_and(|s| s == "item" || s == "state") && v.get("path").is_some()
        }),
        "rebind" => pick_site(dice, doc, &|k, v| {
            is_bindings(k) && v.get("target").is_some()
        }),
        "bind-twice" => pick_site(dice, doc, &|k, v| {
            is_bindings(k) && v.as_array().is_some_and(|b| !b.is_empty())
        }),
        "k-of-map" => pick_site(dice, doc, &|_, v| {
            v["kind"] == "in" && v.get("labels").is_some()
        }),
        "iterations" if doc["initialInput"]["kind"] == "record" => {
            pick_site(dice, doc, &|_, v| v["kind"] == "loop" && is_node(v))
        }
        "attempts" | "instructions" | "worker" => pick_site(dice, doc, &|_, v| {
            is_node(v) && (v["kind"] == "step" || v["kind"] == "verifier")
        }),
        _ => None,
    }) else {
        return false;
    };
    let Some(value) = doc.pointer_mut(&site) else {
        return false;
    };
    match kind {
        "required" => *value = json!(!value.as_bool().unwrap_or(false)),
        "retype" => {
            *value = if dice.chance(0.5) {
                related(dice, value)
            } else {
                dice.pick(&target_types()).clone()
            }
        }
        "unroute" => {
            // The choice becomes its otherwise (or its first branch's node).
            let replacement = match value.get("otherwise") {
                Some(o) if !o.is_null() => o.clone(),
                _ => value["branches"][0]["node"].clone(),
            };
            *value = replacement;
        }
        "channel" => {
            let channel = *dice.pick(&["out", "signal", "diagnostic"]);
            let path = *dice.pick(&["result", "verdict", "message", "code", "extra"]);
            value["value"]["channel"] = json!(channel);
            value["value"]["path"] = json!([path]);
        }
        "promote" => {
            let promoted = value["promotedStatePaths"].as_array_mut();
            if let Some(promoted) = promoted {
                if !promoted.is_empty() && dice.chance(0.5) {
                    promoted.remove(dice.below(promoted.len()));
                } else {
                    let path = *dice.pick(&[
                        "t0", "t1", "t2", "verdict", "note", "results", "n", "missing",
                    ]);
                    promoted.push(json!([path]));
                }
            }
        }
        "labels" => {
            let options: [&[&str]; 11] = [
                &["accepted"],
                &["rejected"],
                &["accepted", "rejected"],
                &ERRORS,
                &["timeout"],
                &["bogus"],
                &["reached"],
                &["quorum_unreachable"],
                &["satisfied", "no_satisfier"],
                &["ok", "overflow"],
                &["converged"],
            ];
            let labels = *dice.pick(&options);
            value["labels"] = json!(labels);
        }
        "selector" => match dice.below(3) {
            0 => value["source"] = json!(*dice.pick(&["error", "signal", "group"])),
            1 => {
                value["field"] =
                    json!(*dice.pick(&["verdict", "joined", "raced", "overflow", "terminated"]))
            }
            _ => {
                let name = if dice.chance(0.2) {
                    "unknown".to_owned()
                } else {
                    dice.pick(&names).clone()
                };
                value["name"] = json!(name);
            }
        },
        "wrap-guard" => {
            let inner = value.clone();
            let other = match names.first() {
                Some(n) if dice.chance(0.5) => errors_of(n),
                _ => inner.clone(),
            };
            *value = match dice.below(3) {
                0 => json!({"kind": "not", "guard": inner}),
                1 => json!({"kind": "all", "guards": [other, inner]}),
                _ => json!({"kind": "any", "guards": [inner, other]}),
            };
        }
        "join" => {
            *value = match dice.below(4) {
                0 => json!({"kind": "all"}),
                1 => json!({"kind": "any"}),
                2 => json!({"kind": "quorum", "count": 1 + dice.below(4)}),
                _ => {
                    let n = dice.pick(&names).clone();
                    json!({"kind": "first", "when": {"kind": "in",
                           "value": selector(&n, "signal", Some("verdict")), "labels": ["accepted"]}})
                }
            }
        }
        "bound" => {
            *value = json!(*dice.pick(&[
                1u64,
                2,
                3,
                64,
                100,
                101,
                1024,
                1025,
                65_536,
                65_537,
                9_007_199_254_740_991
            ]))
        }
        "otherwise" => {
            value["otherwise"] = if value["otherwise"].is_null() {
                json!({"kind": "fail", "name": format!("{}Otherwise", value["name"].as_str().unwrap_or("c")), "reason": "failed"})
            } else {
                Value::Null
            }
        }
        "duplicate" => value["name"] = json!(dice.pick(&names).clone()),
        "until" => {
            if value.get("until").is_some() && dice.chance(0.5) {
                if let Some(node) = value.as_object_mut() {
                    node.remove("until");
                }
            } else {
                let n = dice.pick(&names).clone();
                value["until"] = if dice.chance(0.5) {
                    errors_of(&n)
                } else {
                    json!({"kind": "in", "value": selector(&n, "signal", Some("verdict")), "labels": ["accepted"]})
                };
            }
        }
        "over" => {
            value["path"] = json!([*dice.pick(&["items", "s", "n", "results", "t0", "missing"])])
        }
        "swap" => {
            if let Some(children) = value.as_array_mut() {
                let i = dice.below(children.len() - 1);
                children.swap(i, i + 1);
            }
        }
        "drop" => {
            if let Some(children) = value.as_array_mut() {
                let i = dice.below(children.len());
                children.remove(i);
            }
        }
        "item" => {
            value["source"] = json!(if value["source"] == "item" {
                "state"
            } else {
                "item"
            });
            if dice.chance(0.5) {
                value["path"] = json!([*dice.pick(&["v", "w", "n", "items", "zz"])]);
            }
        }
        "iterations" => {
            value["maxIterationsInput"] = json!([ITERATIONS_FIELD]);
            doc["initialInput"]["fields"][ITERATIONS_FIELD] =
                json!({"type": {"kind": "integer"}, "required": false});
        }
        "rebind" => {
            // A target the payload lacks, another field, or a path below a scalar.
            let mut target = value["target"].clone();
            match (dice.below(3), target.as_array_mut()) {
                (0, Some(path)) => path.push(json!("deeper")),
                _ => target = json!([*dice.pick(&["zz", "result", "verdict", "t0", "message"])]),
            }
            value["target"] = target;
        }
        "bind-twice" => {
            // The same target bound twice, or a prefix of it: overlapping targets.
            if let Some(bindings) = value.as_array_mut() {
                let mut copy = dice.pick(bindings).clone();
                if dice.chance(0.3)
                    && let Some(path) = copy["target"].as_array_mut()
                    && path.len() > 1
                {
                    path.pop();
                }
                bindings.push(copy);
            }
        }
        "k-of-map" => {
            // Read as per-item counts: legal only with a map scope around the node.
            let count = 1 + dice.below(3) as u64;
            let (selector, labels) = (value["value"].clone(), value["labels"].clone());
            *value = json!({"kind": "k_of_map", "count": count, "value": selector,
                            "labels": labels});
        }
        "attempts" => value["attempts"] = json!(*dice.pick(&[1u64, 2, 3, 100, 101])),
        "worker" => {
            // Another executable's reference (a reuse, consistent or not) half the time.
            value["worker"] = if workers.is_empty() || dice.chance(0.5) {
                json!(*dice.pick(&WORKERS))
            } else {
                dice.pick(&workers).clone()
            };
        }
        "instructions" => match value.as_object_mut() {
            Some(node) if node.contains_key("instructions") => {
                node.remove("instructions");
            }
            Some(node) => {
                node.insert("instructions".into(), json!("Do the work."));
            }
            None => return false,
        },
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::{Settings, WorkerStyle, corpus};
    use super::KINDS;

    #[test]
    fn every_mutation_kind_occurs_in_the_ci_corpus() {
        let settings = Settings {
            seed: 13,
            count: 2000,
            workers: WorkerStyle::Mixed,
            heavy: false,
            seeds: Vec::new(),
        };
        let cases = corpus(&settings);
        for kind in KINDS {
            let family = format!("mutate:{kind}");
            let n = cases
                .iter()
                .filter(|c| c.families.contains(&family))
                .count();
            assert!(n > 0, "no generated graph was mutated by {kind}");
        }
    }
}
