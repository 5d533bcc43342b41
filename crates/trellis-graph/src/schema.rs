//! A JSON Schema (draft 2020-12) of the GraphSpec document, for editor completion and
//! validation outside Trellis. The parser stays the authority; this schema mirrors it.

use serde_json::{Value, json};

use crate::limits::{
    MAX_COLLECTION_ITEMS, MAX_FIELD_PATH_SEGMENTS, MAX_IDENTIFIER_BYTES, MAX_SAFE_INTEGER,
    MAX_STABLE_REF_BYTES,
};

const IDENTIFIER_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_.-]*$";
const STABLE_REF_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_.-]*@[1-9][0-9]*$";

fn closed(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": properties, "required": required})
}

fn tagged(tag: &str, value: &str, mut properties: Value, required: &[&str]) -> Value {
    if let Some(map) = properties.as_object_mut() {
        map.insert(tag.to_owned(), json!({"const": value}));
    }
    let mut all = vec![tag];
    all.extend_from_slice(required);
    closed(properties, &all)
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

fn non_empty(items: Value) -> Value {
    json!({"type": "array", "items": items, "minItems": 1, "maxItems": MAX_COLLECTION_ITEMS})
}

fn executable_properties(verifier: bool) -> Value {
    let mut props = json!({
        "name": reference("NodeName"),
        "worker": reference("StableRef"),
        "instructions": {"type": ["string", "null"], "minLength": 1,
            "description": "Prompt for agent-backed nodes; required by the built-in agent workers."},
        "input": reference("PayloadType"),
        "output": reference("PayloadType"),
        "inputBindings": {"type": "array", "items": reference("InputBinding")},
        "writeBindings": {"type": "array", "items": reference("WriteBinding")},
        "timeoutMs": reference("PositiveInteger"),
        "attempts": reference("PositiveInteger"),
    });
    if let (true, Some(map)) = (verifier, props.as_object_mut()) {
        map.insert(
            "signals".into(),
            json!({"type": "object", "propertyNames": reference("Identifier"),
                       "additionalProperties": reference("EnumSet")}),
        );
        map.insert("diagnostic".into(), reference("PayloadType"));
    }
    props
}

fn group(kind: &str, extra: Value, required: &[&str]) -> Value {
    let mut props = json!({
        "name": reference("NodeName"),
        "state": reference("PayloadType"),
        "promotedStatePaths": {"type": "array", "items": reference("FieldPath")},
    });
    if let (Some(map), Some(extra)) = (props.as_object_mut(), extra.as_object()) {
        map.extend(extra.clone());
    }
    let mut all = vec!["name", "state", "promotedStatePaths"];
    all.extend_from_slice(required);
    tagged("kind", kind, props, &all)
}

fn selector(source: &str) -> Value {
    tagged(
        "source",
        source,
        json!({"path": reference("FieldPath")}),
        &["path"],
    )
}

/// The schema of a GraphSpec document.
pub fn graph_json_schema() -> Value {
    let exec_required = [
        "name",
        "worker",
        "input",
        "output",
        "inputBindings",
        "writeBindings",
        "attempts",
    ];
    let mut verifier_required = exec_required.to_vec();
    verifier_required.extend(["signals", "diagnostic"]);
    let labels = reference("EnumSet");
    let count = reference("PositiveInteger");
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://trellis.invalid/schemas/graph-spec.json",
        "title": "GraphSpec openengine.graph.full/v1",
        "description": "A typed agent-workflow graph. Every object is closed: unknown fields are errors.",
        "type": "object",
        "additionalProperties": false,
        "required": ["profile", "initialInput", "policy", "root"],
        "properties": {
            "profile": {"enum": ["openengine.graph.full/v1", "openengine.graph.single-worker/v1"]},
            "initialInput": reference("PayloadType"),
            "policy": closed(json!({"policy": reference("StableRef"), "default": {"const": "deny"}}), &["policy", "default"]),
            "root": reference("GraphNode"),
        },
        "$defs": {
            "Identifier": {"type": "string", "pattern": IDENTIFIER_PATTERN, "minLength": 1, "maxLength": MAX_IDENTIFIER_BYTES},
            "NodeName": reference("Identifier"),
            "StableRef": {"type": "string", "pattern": STABLE_REF_PATTERN, "maxLength": MAX_STABLE_REF_BYTES},
            "PositiveInteger": {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER},
            "FieldPath": {"type": "array", "items": reference("Identifier"), "minItems": 1, "maxItems": MAX_FIELD_PATH_SEGMENTS},
            "EnumSet": {"type": "array", "items": reference("Identifier"), "minItems": 1, "maxItems": MAX_COLLECTION_ITEMS, "uniqueItems": true},
            "PayloadType": {"oneOf": [
                tagged("kind", "null", json!({}), &[]),
                tagged("kind", "boolean", json!({}), &[]),
                tagged("kind", "integer", json!({}), &[]),
                tagged("kind", "number", json!({}), &[]),
                tagged("kind", "string", json!({}), &[]),
                tagged("kind", "record", json!({"fields": {"type": "object",
                    "propertyNames": reference("Identifier"),
                    "additionalProperties": closed(json!({"type": reference("PayloadType"), "required": {"type": "boolean"}}), &["type", "required"])}}), &["fields"]),
                tagged("kind", "array", json!({"items": reference("PayloadType")}), &["items"]),
                tagged("kind", "enum", json!({"values": reference("EnumSet")}), &["values"]),
            ]},
            "DataSelector": {"oneOf": [selector("state"), selector("item")]},
            "InputBinding": closed(json!({"target": reference("FieldPath"), "value": reference("DataSelector")}), &["target", "value"]),
            "WriteBinding": closed(json!({
                "value": closed(json!({"node": reference("NodeName"), "channel": {"enum": ["out", "signal", "diagnostic"]}, "path": reference("FieldPath")}), &["node", "channel", "path"]),
                "target": reference("FieldPath")}), &["value", "target"]),
            "ControlSelector": closed(json!({
                "name": reference("NodeName"),
                "source": {"enum": ["signal", "error", "group"]},
                "field": {"anyOf": [reference("Identifier"), {"type": "null"}]}}), &["name", "source"]),
            "Guard": {"oneOf": [
                tagged("kind", "in", json!({"value": reference("ControlSelector"), "labels": labels}), &["value", "labels"]),
                tagged("kind", "all", json!({"guards": non_empty(reference("Guard"))}), &["guards"]),
                tagged("kind", "any", json!({"guards": non_empty(reference("Guard"))}), &["guards"]),
                tagged("kind", "not", json!({"guard": reference("Guard")}), &["guard"]),
                tagged("kind", "k_of_n", json!({"count": count, "values": non_empty(reference("ControlSelector")), "labels": labels}), &["count", "values", "labels"]),
                tagged("kind", "k_of_map", json!({"count": count, "value": reference("ControlSelector"), "labels": labels}), &["count", "value", "labels"]),
            ]},
            "Join": {"oneOf": [
                tagged("kind", "all", json!({}), &[]),
                tagged("kind", "any", json!({}), &[]),
                tagged("kind", "quorum", json!({"count": count}), &["count"]),
                tagged("kind", "first", json!({"when": reference("Guard")}), &["when"]),
            ]},
            "GraphNode": {"oneOf": [
                tagged("kind", "step", executable_properties(false), &exec_required),
                tagged("kind", "verifier", executable_properties(true), &verifier_required),
                group("seq", json!({"children": non_empty(reference("GraphNode"))}), &["children"]),
                group("choice", json!({
                    "branches": non_empty(closed(json!({"when": reference("Guard"), "node": reference("GraphNode")}), &["when", "node"])),
                    "otherwise": {"anyOf": [reference("GraphNode"), {"type": "null"}]}}), &["branches"]),
                group("par", json!({"branches": non_empty(reference("GraphNode")), "join": reference("Join")}), &["branches", "join"]),
                group("loop", json!({"body": reference("GraphNode"), "maxIterations": count,
                    "maxIterationsInput": {"anyOf": [reference("FieldPath"), {"type": "null"}]},
                    "until": {"anyOf": [reference("Guard"), {"type": "null"}]}}), &["body", "maxIterations"]),
                group("map", json!({"body": reference("GraphNode"), "over": reference("DataSelector"), "maxItems": count}), &["body", "over", "maxItems"]),
                tagged("kind", "succeed", json!({"name": reference("NodeName"), "output": reference("PayloadType"),
                    "bindings": {"type": "array", "items": reference("InputBinding")}}), &["name", "output", "bindings"]),
                tagged("kind", "fail", json!({"name": reference("NodeName"),
                    "reason": {"allOf": [reference("Identifier"), {"not": {"const": "unhandled"}}]}}), &["name", "reason"]),
            ]},
        }
    })
}
