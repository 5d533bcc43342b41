//! JSON builders for GraphSpec documents: payload types, executables, groups, terminals,
//! selectors and guards, spelled as the wire format spells them.

use serde_json::{Map, Value, json};

/// The four runtime error labels of an executable's `error` selector.
pub const ERRORS: [&str; 4] = ["crash", "malformed", "refusal", "timeout"];

pub fn null() -> Value {
    json!({"kind": "null"})
}

pub fn integer() -> Value {
    json!({"kind": "integer"})
}

pub fn number() -> Value {
    json!({"kind": "number"})
}

pub fn string() -> Value {
    json!({"kind": "string"})
}

pub fn boolean() -> Value {
    json!({"kind": "boolean"})
}

pub fn enumeration(labels: &[&str]) -> Value {
    json!({"kind": "enum", "values": labels})
}

pub fn array(items: Value) -> Value {
    json!({"kind": "array", "items": items})
}

/// A record from `(name, type, required)` triples.
pub fn record(fields: &[(&str, Value, bool)]) -> Value {
    let mut map = Map::new();
    for (name, ty, required) in fields {
        map.insert(
            (*name).to_owned(),
            json!({"type": ty, "required": required}),
        );
    }
    json!({"kind": "record", "fields": map})
}

/// A step: `input`/`output` types, input bindings and write bindings.
pub fn step(name: &str, worker: &str, input: Value, output: Value) -> Value {
    json!({"kind": "step", "name": name, "worker": worker,
           "instructions": format!("Do the work of {name}."),
           "input": input, "output": output, "inputBindings": [], "writeBindings": [],
           "timeoutMs": 60000, "attempts": 1})
}

/// A verifier with the given signals (`{field: labels}`) and diagnostic type.
pub fn verifier(
    name: &str,
    worker: &str,
    input: Value,
    output: Value,
    signals: Value,
    diagnostic: Value,
) -> Value {
    let mut node = step(name, worker, input, output);
    node["kind"] = json!("verifier");
    node["signals"] = signals;
    node["diagnostic"] = diagnostic;
    node
}

pub fn state_selector(path: &[&str]) -> Value {
    json!({"source": "state", "path": path})
}

pub fn item_selector(path: &[&str]) -> Value {
    json!({"source": "item", "path": path})
}

pub fn input_binding(target: &[&str], value: Value) -> Value {
    json!({"target": target, "value": value})
}

pub fn write_binding(node: &str, channel: &str, path: &[&str], target: &[&str]) -> Value {
    json!({"value": {"node": node, "channel": channel, "path": path}, "target": target})
}

fn group(kind: &str, name: &str, state: &Value, promoted: &[&[&str]], extra: Value) -> Value {
    let mut node = json!({"kind": kind, "name": name, "state": state,
                          "promotedStatePaths": promoted});
    if let (Value::Object(node), Value::Object(extra)) = (&mut node, extra) {
        node.extend(extra);
    }
    node
}

pub fn seq(name: &str, state: &Value, promoted: &[&[&str]], children: Vec<Value>) -> Value {
    group("seq", name, state, promoted, json!({"children": children}))
}

pub fn choice(
    name: &str,
    state: &Value,
    promoted: &[&[&str]],
    branches: Vec<(Value, Value)>,
    otherwise: Option<Value>,
) -> Value {
    let branches: Vec<Value> = branches
        .into_iter()
        .map(|(when, node)| json!({"when": when, "node": node}))
        .collect();
    group(
        "choice",
        name,
        state,
        promoted,
        json!({"branches": branches, "otherwise": otherwise}),
    )
}

pub fn par(
    name: &str,
    state: &Value,
    promoted: &[&[&str]],
    join: Value,
    branches: Vec<Value>,
) -> Value {
    group(
        "par",
        name,
        state,
        promoted,
        json!({"join": join, "branches": branches}),
    )
}

pub fn loop_(
    name: &str,
    state: &Value,
    promoted: &[&[&str]],
    max: u64,
    until: Option<Value>,
    body: Value,
) -> Value {
    let mut node = group(
        "loop",
        name,
        state,
        promoted,
        json!({"maxIterations": max, "body": body}),
    );
    if let Some(until) = until {
        node["until"] = until;
    }
    node
}

pub fn map(
    name: &str,
    state: &Value,
    promoted: &[&[&str]],
    over: &[&str],
    max: u64,
    body: Value,
) -> Value {
    group(
        "map",
        name,
        state,
        promoted,
        json!({"over": state_selector(over), "maxItems": max, "body": body}),
    )
}

pub fn succeed(name: &str, output: Value, bindings: Vec<Value>) -> Value {
    json!({"kind": "succeed", "name": name, "output": output, "bindings": bindings})
}

pub fn fail(name: &str, reason: &str) -> Value {
    json!({"kind": "fail", "name": name, "reason": reason})
}

pub fn selector(node: &str, source: &str, field: Option<&str>) -> Value {
    json!({"name": node, "source": source, "field": field})
}

pub fn is_in(selector: Value, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": selector, "labels": labels})
}

pub fn errors_of(node: &str) -> Value {
    is_in(selector(node, "error", None), &ERRORS)
}

pub fn signal_is(node: &str, field: &str, labels: &[&str]) -> Value {
    is_in(selector(node, "signal", Some(field)), labels)
}

pub fn all(guards: Vec<Value>) -> Value {
    json!({"kind": "all", "guards": guards})
}

pub fn any(guards: Vec<Value>) -> Value {
    json!({"kind": "any", "guards": guards})
}

pub fn not(guard: Value) -> Value {
    json!({"kind": "not", "guard": guard})
}

pub fn k_of_n(count: u64, selectors: Vec<Value>, labels: &[&str]) -> Value {
    json!({"kind": "k_of_n", "count": count, "values": selectors, "labels": labels})
}

pub fn k_of_map(count: u64, selector: Value, labels: &[&str]) -> Value {
    json!({"kind": "k_of_map", "count": count, "value": selector, "labels": labels})
}

/// A whole document around `root`.
pub fn document(initial_input: &Value, root: Value) -> Value {
    json!({"profile": "openengine.graph.full/v1", "initialInput": initial_input,
           "policy": {"policy": "policy.generated@1", "default": "deny"}, "root": root})
}

/// A value of `ty`: required record fields only (optional ones with `with_optional`), the
/// first enum label, empty arrays unless `items` is given.
pub fn sample(ty: &Value, with_optional: bool) -> Value {
    match ty["kind"].as_str() {
        Some("boolean") => json!(true),
        Some("integer") | Some("number") => json!(3),
        Some("string") => json!("text"),
        Some("enum") => ty["values"][0].clone(),
        Some("array") => json!([sample(&ty["items"], with_optional)]),
        Some("record") => {
            let mut out = Map::new();
            if let Some(fields) = ty["fields"].as_object() {
                for (name, field) in fields {
                    if field["required"] == json!(true) || with_optional {
                        out.insert(name.clone(), sample(&field["type"], with_optional));
                    }
                }
            }
            Value::Object(out)
        }
        _ => Value::Null,
    }
}
