//! Proptest strategies for well-formed GraphSpec documents (as JSON values) and for payload
//! types. Structure is generated first; names are assigned and references resolved after.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use trellis_graph::json::JsonPath;
use trellis_graph::{GraphSpec, PayloadType};

const FIELDS: [&str; 4] = ["a", "b", "result", "items"];
const LABELS: [&str; 4] = ["accepted", "rejected", "x", "y"];
const ERRORS: [&str; 4] = ["crash", "malformed", "refusal", "timeout"];

fn label_set() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(LABELS.to_vec(), 1..=3)
}

/// Payload types up to a few levels deep.
pub fn payload() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"kind": "null"})),
        Just(json!({"kind": "boolean"})),
        Just(json!({"kind": "integer"})),
        Just(json!({"kind": "number"})),
        Just(json!({"kind": "string"})),
        label_set().prop_map(|l| json!({"kind": "enum", "values": l})),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            inner
                .clone()
                .prop_map(|t| json!({"kind": "array", "items": t})),
            proptest::collection::vec(
                (
                    proptest::sample::select(FIELDS.to_vec()),
                    inner,
                    any::<bool>()
                ),
                0..3
            )
            .prop_map(|fields| {
                let mut map = Map::new();
                for (name, ty, required) in fields {
                    map.insert(name.to_owned(), json!({"type": ty, "required": required}));
                }
                json!({"kind": "record", "fields": map})
            }),
        ]
    })
}

pub fn payload_type() -> impl Strategy<Value = PayloadType> {
    payload().prop_map(|v| PayloadType::parse(&v, &JsonPath::root()).unwrap_or(PayloadType::Null))
}

fn path() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::collection::vec(proptest::sample::select(FIELDS.to_vec()), 1..3)
}

fn reference() -> impl Strategy<Value = String> {
    (0usize..64).prop_map(|k| format!("@ref{k}"))
}

fn selector() -> impl Strategy<Value = Value> {
    (reference(), 0usize..6).prop_map(|(name, which)| {
        let (source, field): (&str, Value) = match which {
            0 => ("error", Value::Null),
            1 => ("signal", json!("verdict")),
            2 => ("group", json!("joined")),
            3 => ("group", json!("terminated")),
            4 => ("group", json!("overflow")),
            _ => ("group", json!("raced")),
        };
        json!({"name": name, "source": source, "field": field})
    })
}

pub fn guard() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (selector(), label_set()).prop_map(|(s, l)| json!({"kind": "in", "value": s, "labels": l})),
        (selector(), proptest::sample::subsequence(ERRORS.to_vec(), 1..=4))
            .prop_map(|(s, l)| json!({"kind": "in", "value": s, "labels": l})),
        (1u64..3, selector(), label_set())
            .prop_map(|(c, s, l)| json!({"kind": "k_of_map", "count": c, "value": s, "labels": l})),
        (proptest::collection::vec(selector(), 1..4), label_set()).prop_flat_map(|(values, l)| {
            let n = values.len() as u64;
            (1..=n).prop_map(move |c| json!({"kind": "k_of_n", "count": c, "values": values.clone(), "labels": l.clone()}))
        }),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..4)
                .prop_map(|g| json!({"kind": "all", "guards": g})),
            proptest::collection::vec(inner.clone(), 1..4)
                .prop_map(|g| json!({"kind": "any", "guards": g})),
            inner.prop_map(|g| json!({"kind": "not", "guard": g})),
        ]
    })
}

fn input_binding() -> impl Strategy<Value = Value> {
    (path(), path(), any::<bool>()).prop_map(|(target, from, item)| {
        json!({"target": target, "value": {"source": if item { "item" } else { "state" }, "path": from}})
    })
}

fn write_binding() -> impl Strategy<Value = Value> {
    (reference(), 0usize..3, path(), path()).prop_map(|(node, channel, from, target)| {
        let channel = ["out", "signal", "diagnostic"][channel];
        json!({"value": {"node": node, "channel": channel, "path": from}, "target": target})
    })
}

fn promoted() -> impl Strategy<Value = Vec<Vec<&'static str>>> {
    proptest::collection::vec(path(), 0..3)
}

fn executable() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        payload(),
        payload(),
        proptest::collection::vec(input_binding(), 0..3),
        proptest::collection::vec(write_binding(), 0..3),
        1u64..4,
        proptest::option::of(1u64..100_000),
        proptest::option::of("[a-z ]{1,20}"),
        payload(),
    )
        .prop_map(
            |(is_verifier, input, output, inputs, writes, attempts, timeout, prose, diagnostic)| {
                let mut node = json!({
                "@node": true, "kind": if is_verifier { "verifier" } else { "step" },
                "worker": "gen.worker@1", "input": input, "output": output,
                "inputBindings": inputs, "writeBindings": writes, "attempts": attempts});
                if let Some(t) = timeout {
                    node["timeoutMs"] = json!(t);
                }
                if let Some(p) = prose.filter(|p| !p.trim().is_empty()) {
                    node["instructions"] = json!(p);
                }
                if is_verifier {
                    node["signals"] = json!({"verdict": ["accepted", "rejected"]});
                    node["diagnostic"] = diagnostic;
                }
                node
            },
        )
}

fn terminal() -> impl Strategy<Value = Value> {
    prop_oneof![
        (payload(), proptest::collection::vec(input_binding(), 0..2)).prop_map(
            |(o, b)| json!({"@node": true, "kind": "succeed", "output": o, "bindings": b})
        ),
        Just(json!({"@node": true, "kind": "fail", "reason": "failed"})),
    ]
}

fn group(kind: &str, state: Value, promoted: Vec<Vec<&'static str>>, extra: Value) -> Value {
    let mut node =
        json!({"@node": true, "kind": kind, "state": state, "promotedStatePaths": promoted});
    if let (Value::Object(node), Value::Object(extra)) = (&mut node, extra) {
        node.extend(extra);
    }
    node
}

fn node() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![3 => executable(), 1 => terminal()];
    leaf.prop_recursive(4, 32, 4, |inner| {
        let kids = proptest::collection::vec(inner.clone(), 1..4);
        prop_oneof![
            (payload(), promoted(), kids.clone()).prop_map(|(s, p, c)| group(
                "seq",
                s,
                p,
                json!({"children": c})
            )),
            (
                payload(),
                promoted(),
                proptest::collection::vec((guard(), inner.clone()), 1..3),
                proptest::option::of(inner.clone())
            )
                .prop_map(|(s, p, b, o)| {
                    let branches: Vec<Value> = b
                        .into_iter()
                        .map(|(w, n)| json!({"when": w, "node": n}))
                        .collect();
                    group(
                        "choice",
                        s,
                        p,
                        json!({"branches": branches, "otherwise": o}),
                    )
                }),
            (payload(), promoted(), kids, 0usize..4, guard(), 1u64..4).prop_map(
                |(s, p, c, j, when, q)| {
                    let n = c.len() as u64;
                    let join = match j {
                        0 => json!({"kind": "all"}),
                        1 => json!({"kind": "any"}),
                        2 => json!({"kind": "quorum", "count": q.min(n)}),
                        _ => json!({"kind": "first", "when": when}),
                    };
                    group("par", s, p, json!({"branches": c, "join": join}))
                }
            ),
            (
                payload(),
                promoted(),
                inner.clone(),
                1u64..5,
                proptest::option::of(guard()),
                proptest::option::of(path())
            )
                .prop_map(|(s, p, b, max, until, input)| {
                    let mut node = group("loop", s, p, json!({"body": b, "maxIterations": max}));
                    if let Some(u) = until {
                        node["until"] = u;
                    }
                    if let Some(i) = input {
                        node["maxIterationsInput"] = json!(i);
                    }
                    node
                }),
            (payload(), promoted(), inner, path(), 1u64..4).prop_map(|(s, p, b, over, max)| {
                group(
                    "map",
                    s,
                    p,
                    json!({"body": b, "maxItems": max,
                                          "over": {"source": "state", "path": over}}),
                )
            }),
        ]
    })
}

/// Assigns node names in pre-order and resolves `@refK` references to them.
fn name_nodes(value: &mut Value, names: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if map.remove("@node").is_some() {
                let name = format!("n{}", names.len());
                map.insert("name".to_owned(), json!(name));
                names.push(name);
            }
            for (_, v) in map.iter_mut() {
                name_nodes(v, names);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| name_nodes(v, names)),
        _ => {}
    }
}

fn resolve(value: &mut Value, names: &[String]) {
    match value {
        Value::String(s) => {
            if let Some(k) = s.strip_prefix("@ref").and_then(|k| k.parse::<usize>().ok()) {
                *s = names[k % names.len()].clone();
            }
        }
        Value::Object(map) => map.values_mut().for_each(|v| resolve(v, names)),
        Value::Array(items) => items.iter_mut().for_each(|v| resolve(v, names)),
        _ => {}
    }
}

/// A well-formed GraphSpec document.
pub fn graph_value() -> impl Strategy<Value = Value> {
    (node(), payload()).prop_map(|(mut root, input)| {
        let mut names = Vec::new();
        name_nodes(&mut root, &mut names);
        resolve(&mut root, &names);
        json!({"profile": "openengine.graph.full/v1", "initialInput": input,
               "policy": {"policy": "policy.strict@1", "default": "deny"}, "root": root})
    })
}

pub fn graph_spec() -> impl Strategy<Value = GraphSpec> {
    graph_value().prop_map(|v| {
        GraphSpec::parse(&v, &JsonPath::root())
            .unwrap_or_else(|e| panic!("generator produced {e}: {v}"))
    })
}
