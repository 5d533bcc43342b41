//! A deterministic generator of large, valid graphs that mix every node kind (shared by the
//! benchmarks and the scaling tests).

use serde_json::{Value, json};
use trellis_graph::json::JsonPath;
use trellis_graph::{GraphSpec, StaticRegistry, WorkerDescriptor, WorkerRef};

fn field(ty: Value, required: bool) -> Value {
    json!({"type": ty, "required": required})
}

/// The state every generated group declares.
fn state() -> Value {
    json!({"kind": "record", "fields": {
        "value": field(json!({"kind": "integer"}), true),
        "items": field(json!({"kind": "array", "items": {"kind": "record", "fields": {
            "value": field(json!({"kind": "integer"}), true)}}}), true),
        "result": field(json!({"kind": "integer"}), false),
    }})
}

fn errors(node: &str) -> Value {
    json!({"kind": "in", "value": {"name": node, "source": "error", "field": null},
           "labels": ["crash", "malformed", "refusal", "timeout"]})
}

fn verdict(node: &str, labels: &[&str]) -> Value {
    json!({"kind": "in", "value": {"name": node, "source": "signal", "field": "verdict"},
           "labels": labels})
}

fn input_type(shape: &str) -> Value {
    match shape {
        "null" => json!({"kind": "null"}),
        _ => {
            json!({"kind": "record", "fields": {"value": field(json!({"kind": "integer"}), true)}})
        }
    }
}

fn output_type() -> Value {
    json!({"kind": "record", "fields": {"result": field(json!({"kind": "integer"}), true)}})
}

/// A registry resolving every worker the generated graphs use.
pub fn bench_registry() -> StaticRegistry {
    let mut registry = StaticRegistry::new();
    for kind in ["step", "verifier"] {
        for shape in ["null", "value"] {
            let worker = format!("bench.{kind}-{shape}@1");
            let verifier = if kind == "verifier" {
                json!({"signals": {"verdict": ["accepted", "rejected"]}, "diagnostic": {"kind": "null"}})
            } else {
                Value::Null
            };
            let descriptor = json!({
                "worker": worker,
                "graphProfiles": ["openengine.graph.full/v1"],
                "binding": {"protocol": "acp", "version": "1", "profile": "openengine.worker.acp/v1"},
                "contract": {"input": input_type(shape), "output": output_type(),
                             "verifier": verifier,
                             "errors": ["timeout", "crash", "malformed", "refusal"]},
                "capabilityPolicy": {"autonomy": "strict", "permissionPolicy": "policy.strict@1"},
                "artifactProfile": {"allowedTypeIds": ["openengine.result@1"],
                                    "allowedMediaTypes": ["application/json"],
                                    "minimumRedaction": "internal"},
                "credentialRequirements": [],
            });
            let descriptor = WorkerDescriptor::parse(&descriptor, &JsonPath::root())
                .unwrap_or_else(|e| panic!("bench descriptor: {e}"));
            registry.insert(
                WorkerRef::new(&worker).unwrap_or_else(|e| panic!("{e}")),
                descriptor,
            );
        }
    }
    registry
}

fn executable(kind: &str, name: &str, inputs: Vec<Value>, writes: Vec<Value>) -> Value {
    let shape = if inputs.is_empty() { "null" } else { "value" };
    let mut node = json!({
        "kind": kind, "name": name, "worker": format!("bench.{kind}-{shape}@1"),
        "input": input_type(shape),
        "output": output_type(),
        "inputBindings": inputs, "writeBindings": writes, "attempts": 1,
    });
    if kind == "verifier" {
        node["signals"] = json!({"verdict": ["accepted", "rejected"]});
        node["diagnostic"] = json!({"kind": "null"});
    }
    node
}

fn group(kind: &str, name: &str, extra: Value) -> Value {
    let mut node = json!({"kind": kind, "name": name, "state": state(), "promotedStatePaths": []});
    if let (Value::Object(node), Value::Object(extra)) = (&mut node, extra) {
        node.extend(extra);
    }
    node
}

/// One map block (14 nodes) with a step, a routing choice, a par(all) of two verifiers,
/// a review choice and a bounded loop; the step's write becomes readable once routed.
fn review_block(i: usize) -> Value {
    let n = |s: &str| format!("{s}{i}");
    let work = executable(
        "step",
        &n("work"),
        vec![json!({"target": ["value"], "value": {"source": "item", "path": ["value"]}})],
        vec![
            json!({"value": {"node": n("work"), "channel": "out", "path": ["result"]},
                    "target": ["result"]}),
        ],
    );
    let reads_result =
        || vec![json!({"target": ["value"], "value": {"source": "state", "path": ["result"]}})];
    let review = group(
        "par",
        &n("reviews"),
        json!({
            "join": {"kind": "all"},
            "branches": [
                executable("verifier", &n("accept"), reads_result(), vec![]),
                executable("verifier", &n("check"), reads_result(), vec![]),
            ],
        }),
    );
    let retry = group(
        "loop",
        &n("retry"),
        json!({
            "maxIterations": 2,
            "until": verdict(&n("again"), &["accepted"]),
            "body": executable("verifier", &n("again"), vec![], vec![]),
        }),
    );
    let decide = group(
        "choice",
        &n("decide"),
        json!({
            "branches": [
                {"when": {"kind": "any", "guards": [errors(&n("accept")), errors(&n("check"))]},
                 "node": {"kind": "fail", "name": n("reviewFailed"), "reason": "review_failed"}},
                {"when": {"kind": "all", "guards": [verdict(&n("accept"), &["accepted"]),
                                                    verdict(&n("check"), &["accepted"])]},
                 "node": {"kind": "succeed", "name": n("accepted"), "output": {"kind": "null"},
                          "bindings": []}},
            ],
            "otherwise": retry,
        }),
    );
    let routed = group("seq", &n("routed"), json!({"children": [review, decide]}));
    let route = group(
        "choice",
        &n("route"),
        json!({
            "branches": [{"when": errors(&n("work")),
                          "node": {"kind": "fail", "name": n("workFailed"), "reason": "work_failed"}}],
            "otherwise": routed,
        }),
    );
    let body = group("seq", &n("item"), json!({"children": [work, route]}));
    group(
        "map",
        &n("block"),
        json!({
            "maxItems": 1, "over": {"source": "state", "path": ["items"]}, "body": body,
        }),
    )
}

/// One map block (8 nodes) racing two executables under a first-join.
fn race_block(i: usize) -> Value {
    let n = |s: &str| format!("{s}{i}");
    let race = group(
        "par",
        &n("race"),
        json!({
            "join": {"kind": "first", "when": verdict(&n("fast"), &["accepted"])},
            "branches": [
                executable("verifier", &n("fast"), vec![], vec![]),
                executable("step", &n("slow"), vec![], vec![]),
            ],
        }),
    );
    let settle = group(
        "choice",
        &n("settle"),
        json!({
            "branches": [{"when": {"kind": "in",
                                   "value": {"name": n("race"), "source": "group", "field": "raced"},
                                   "labels": ["satisfied"]},
                          "node": {"kind": "succeed", "name": n("won"), "output": {"kind": "null"},
                                   "bindings": []}}],
            "otherwise": {"kind": "fail", "name": n("lost"), "reason": "no_winner"},
        }),
    );
    let body = group("seq", &n("racing"), json!({"children": [race, settle]}));
    group(
        "map",
        &n("raceBlock"),
        json!({
            "maxItems": 2, "over": {"source": "state", "path": ["items"]}, "body": body,
        }),
    )
}

/// A valid graph of at most `target_nodes` nodes (at least one block).
pub fn mixed_graph(target_nodes: usize) -> GraphSpec {
    blocks_graph(target_nodes, false)
}

/// A valid graph of race blocks only: no loops, so its termination witness is the acyclic
/// order of its nodes.
pub fn acyclic_graph(target_nodes: usize) -> GraphSpec {
    blocks_graph(target_nodes, true)
}

fn blocks_graph(target_nodes: usize, races_only: bool) -> GraphSpec {
    let mut children = Vec::new();
    let mut nodes = 2; // the root seq and the final succeed
    let mut i = 0;
    loop {
        let (block, size) = if races_only || i % 4 == 3 {
            (race_block(i), 8)
        } else {
            (review_block(i), 14)
        };
        if nodes + size > target_nodes && !children.is_empty() {
            break;
        }
        children.push(block);
        nodes += size;
        i += 1;
    }
    children.push(
        json!({"kind": "succeed", "name": "done", "output": {"kind": "null"},
                         "bindings": []}),
    );
    let graph = json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": state(),
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": group("seq", "root", json!({"children": children})),
    });
    GraphSpec::parse(&graph, &JsonPath::root())
        .unwrap_or_else(|e| panic!("generated graph does not parse: {e}"))
}

/// Counts every node of a graph.
pub fn node_count(spec: &GraphSpec) -> usize {
    let mut count = 0;
    spec.root.walk(&mut |_| count += 1);
    count
}
