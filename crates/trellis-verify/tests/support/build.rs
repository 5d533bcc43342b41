//! Terse builders for hand-written test graphs (JSON values parsed into GraphSpec).

use serde_json::{Value, json};
use trellis_graph::json::JsonPath;
use trellis_graph::{GraphDiagnostic, GraphSpec};

pub const ERRORS: [&str; 4] = ["crash", "malformed", "refusal", "timeout"];

pub fn null() -> Value {
    json!({"kind": "null"})
}

pub fn field(ty: Value, required: bool) -> Value {
    json!({"type": ty, "required": required})
}

/// `{value!: integer, items!: [{value!: integer}], result?: integer}`.
pub fn data() -> Value {
    json!({"kind": "record", "fields": {
        "value": field(json!({"kind": "integer"}), true),
        "items": field(json!({"kind": "array", "items": {"kind": "record", "fields": {
            "value": field(json!({"kind": "integer"}), true)}}}), true),
        "result": field(json!({"kind": "integer"}), false),
        "results": field(json!({"kind": "array", "items": {"kind": "integer"}}), false),
    }})
}

pub fn result_output() -> Value {
    json!({"kind": "record", "fields": {"result": field(json!({"kind": "integer"}), true)}})
}

pub fn step(name: &str) -> Value {
    json!({"kind": "step", "name": name, "worker": "test.step@1", "input": (null()),
           "output": result_output(), "inputBindings": [], "writeBindings": [], "attempts": 1})
}

pub fn verifier(name: &str) -> Value {
    let mut node = step(name);
    node["kind"] = json!("verifier");
    node["worker"] = json!("test.verifier@1");
    node["signals"] = json!({"verdict": ["accepted", "rejected"]});
    node["diagnostic"] = null();
    node
}

/// A write of the node's own `out.result` into state `target`.
pub fn writes(mut node: Value, target: &str) -> Value {
    let name = node["name"].clone();
    node["writeBindings"] = json!([{"value": {"node": name, "channel": "out", "path": ["result"]},
                                   "target": [target]}]);
    node
}

pub fn group(kind: &str, name: &str, extra: Value) -> Value {
    let mut node = json!({"kind": kind, "name": name, "state": data(), "promotedStatePaths": []});
    if let (Value::Object(node), Value::Object(extra)) = (&mut node, extra) {
        node.extend(extra);
    }
    node
}

pub fn seq(name: &str, children: Vec<Value>) -> Value {
    group("seq", name, json!({"children": children}))
}

pub fn choice(name: &str, branches: Vec<(Value, Value)>, otherwise: Option<Value>) -> Value {
    let branches: Vec<Value> = branches
        .into_iter()
        .map(|(when, node)| json!({"when": when, "node": node}))
        .collect();
    group(
        "choice",
        name,
        json!({"branches": branches, "otherwise": otherwise}),
    )
}

pub fn par(name: &str, join: Value, branches: Vec<Value>) -> Value {
    group("par", name, json!({"join": join, "branches": branches}))
}

pub fn loop_(name: &str, max: u64, until: Option<Value>, body: Value) -> Value {
    let mut node = group("loop", name, json!({"maxIterations": max, "body": body}));
    if let Some(until) = until {
        node["until"] = until;
    }
    node
}

pub fn map(name: &str, max: u64, body: Value) -> Value {
    group(
        "map",
        name,
        json!({"maxItems": max, "body": body,
                              "over": {"source": "state", "path": ["items"]}}),
    )
}

pub fn succeed(name: &str) -> Value {
    json!({"kind": "succeed", "name": name, "output": (null()), "bindings": []})
}

pub fn fail(name: &str) -> Value {
    json!({"kind": "fail", "name": name, "reason": "failed"})
}

pub fn sel(node: &str, source: &str, field: Option<&str>) -> Value {
    json!({"name": node, "source": source, "field": field})
}

pub fn is_in(selector: Value, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": selector, "labels": labels})
}

pub fn errors_of(node: &str) -> Value {
    is_in(sel(node, "error", None), &ERRORS)
}

pub fn verdict(node: &str, labels: &[&str]) -> Value {
    is_in(sel(node, "signal", Some("verdict")), labels)
}

/// A step followed by a choice routing its errors to a fail terminal.
pub fn routed(name: &str) -> Vec<Value> {
    vec![
        step(name),
        choice(
            &format!("{name}Route"),
            vec![(errors_of(name), fail(&format!("{name}Failed")))],
            Some(step(&format!("{name}Next"))),
        ),
    ]
}

pub fn graph(root: Value) -> GraphSpec {
    try_graph(root).unwrap_or_else(|e| panic!("test graph does not parse: {e}"))
}

pub fn try_graph(root: Value) -> Result<GraphSpec, trellis_graph::ParseError> {
    GraphSpec::parse(
        &json!({"profile": "openengine.graph.full/v1", "initialInput": data(),
                "policy": {"policy": "policy.strict@1", "default": "deny"}, "root": root}),
        &JsonPath::root(),
    )
}

/// `(code, message)` of every diagnostic, in order.
pub fn summary(diagnostics: &[GraphDiagnostic]) -> Vec<(String, String)> {
    diagnostics
        .iter()
        .map(|d| (d.code.as_str().to_owned(), d.message.clone()))
        .collect()
}

/// The dotted rendering of a diagnostic path (names and indexes).
pub fn dotted(diagnostic: &GraphDiagnostic) -> String {
    diagnostic
        .path
        .iter()
        .map(|s| match s {
            trellis_graph::PathSegment::Field { name } => name.to_string(),
            trellis_graph::PathSegment::Index { index } => index.to_string(),
            trellis_graph::PathSegment::Node { name } => name.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

pub fn messages(diagnostics: &[GraphDiagnostic]) -> Vec<&str> {
    diagnostics.iter().map(|d| d.message.as_str()).collect()
}
