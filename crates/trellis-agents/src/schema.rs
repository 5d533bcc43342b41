//! JSON Schemas of the reply envelope, in the standard dialect and in OpenAI's strict dialect,
//! and the normalization that turns a strict-dialect reply back into the contract's shape.
//!
//! The envelope is an object with exactly one of `response` (the node's reply body) or
//! `refusal` (a non-empty reason). In the strict dialect every property must be listed as
//! required, so both are present and the unused one is `null`; optional record fields likewise
//! become required-but-nullable and a `null` there means "absent".

use serde_json::{Map, Value, json};
use trellis_graph::PayloadType;

use crate::contract::NodeContract;

/// Which JSON Schema flavour a CLI's structured-output feature accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaDialect {
    /// Plain JSON Schema: optional fields are simply not required (Claude Code).
    Standard,
    /// OpenAI structured outputs with `strict: true`: every property required, optional ones
    /// nullable (Codex, Copilot).
    OpenAiStrict,
}

/// Stands for "field absent" in the strict dialect where `null` is itself a legal value (an
/// optional field of type `null`).
pub const OMITTED_SENTINEL: &str = "__trellis_omitted_optional_null__";

/// The schema of the whole reply envelope for `contract`.
pub fn reply_schema(contract: &NodeContract, dialect: SchemaDialect) -> Value {
    let body = reply_body_schema(contract, dialect);
    match dialect {
        SchemaDialect::Standard => json!({
            "type": "object",
            "properties": {
                "response": body,
                "refusal": {"type": "string", "minLength": 1},
            },
            "additionalProperties": false,
            "minProperties": 1,
            "maxProperties": 1,
        }),
        SchemaDialect::OpenAiStrict => json!({
            "type": "object",
            "properties": {
                "response": nullable(body),
                "refusal": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["response", "refusal"],
            "additionalProperties": false,
        }),
    }
}

/// The schema of the `response` value: the output itself for a worker, or the closed
/// `{output, signals, diagnostic}` object for a verifier.
pub fn reply_body_schema(contract: &NodeContract, dialect: SchemaDialect) -> Value {
    let output = payload_schema(&contract.output, dialect);
    let Some(verifier) = &contract.verifier else {
        return output;
    };
    let mut signals = Map::new();
    for (name, labels) in &verifier.signals {
        let labels: Vec<&str> = labels.iter().map(|l| l.as_str()).collect();
        signals.insert(name.to_string(), json!({"type": "string", "enum": labels}));
    }
    let signal_names: Vec<&str> = verifier.signals.keys().map(|n| n.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "output": output,
            "signals": {
                "type": "object",
                "properties": signals,
                "required": signal_names,
                "additionalProperties": false,
            },
            "diagnostic": payload_schema(&verifier.diagnostic, dialect),
        },
        "required": ["output", "signals", "diagnostic"],
        "additionalProperties": false,
    })
}

/// The schema of one payload type.
pub fn payload_schema(ty: &PayloadType, dialect: SchemaDialect) -> Value {
    match ty {
        PayloadType::Null => json!({"type": "null"}),
        PayloadType::Boolean => json!({"type": "boolean"}),
        PayloadType::Integer => json!({"type": "integer"}),
        PayloadType::Number => json!({"type": "number"}),
        PayloadType::String => json!({"type": "string"}),
        PayloadType::Enum { values } => {
            let labels: Vec<&str> = values.iter().map(|l| l.as_str()).collect();
            json!({"type": "string", "enum": labels})
        }
        PayloadType::Array { items } => {
            json!({"type": "array", "items": payload_schema(items, dialect)})
        }
        PayloadType::Record { fields } => {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for (name, field) in fields {
                let schema = payload_schema(&field.ty, dialect);
                let schema = match dialect {
                    SchemaDialect::Standard => schema,
                    SchemaDialect::OpenAiStrict if field.required => schema,
                    SchemaDialect::OpenAiStrict if field.ty == PayloadType::Null => json!({
                        "anyOf": [schema, {"type": "string", "enum": [OMITTED_SENTINEL]}]
                    }),
                    SchemaDialect::OpenAiStrict => nullable(schema),
                };
                if field.required || dialect == SchemaDialect::OpenAiStrict {
                    required.push(Value::String(name.to_string()));
                }
                properties.insert(name.to_string(), schema);
            }
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        }
    }
}

/// `schema` or `null`; a schema that already is `null` stays as it is.
fn nullable(schema: Value) -> Value {
    if schema == json!({"type": "null"}) {
        schema
    } else {
        json!({"anyOf": [schema, {"type": "null"}]})
    }
}

/// Undoes the strict dialect's encoding of optional record fields in a reply body: a `null`
/// optional field (or the sentinel, for a field of type `null`) is removed. Values that do not
/// fit the contract are left alone for the contract check to reject.
pub fn normalize_strict_body(contract: &NodeContract, body: Value) -> Value {
    if contract.verifier.is_none() {
        return normalize_strict(&contract.output, body);
    }
    let Value::Object(mut fields) = body else {
        return body;
    };
    if let Some(output) = fields.remove("output") {
        fields.insert("output".into(), normalize_strict(&contract.output, output));
    }
    if let (Some(diagnostic), Some(verifier)) = (fields.remove("diagnostic"), &contract.verifier) {
        fields.insert(
            "diagnostic".into(),
            normalize_strict(&verifier.diagnostic, diagnostic),
        );
    }
    Value::Object(fields)
}

/// Normalizes one payload value (see [`normalize_strict_body`]).
pub fn normalize_strict(ty: &PayloadType, value: Value) -> Value {
    match (ty, value) {
        (PayloadType::Array { items }, Value::Array(elements)) => Value::Array(
            elements
                .into_iter()
                .map(|element| normalize_strict(items, element))
                .collect(),
        ),
        (PayloadType::Record { fields }, Value::Object(object)) => {
            let mut out = Map::new();
            for (key, inner) in object {
                let Some(field) = fields.get(key.as_str()) else {
                    out.insert(key, inner);
                    continue;
                };
                let omitted = !field.required
                    && match field.ty {
                        PayloadType::Null => inner.as_str() == Some(OMITTED_SENTINEL),
                        _ => inner.is_null(),
                    };
                if !omitted {
                    out.insert(key, normalize_strict(&field.ty, inner));
                }
            }
            Value::Object(out)
        }
        (_, value) => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_graph::{GraphNode, JsonPath};

    fn ty(value: Value) -> PayloadType {
        PayloadType::parse(&value, &JsonPath::root()).unwrap()
    }

    fn record() -> PayloadType {
        ty(json!({"kind": "record", "fields": {
            "summary": {"type": {"kind": "string"}, "required": true},
            "count": {"type": {"kind": "integer"}, "required": false},
            "nothing": {"type": {"kind": "null"}, "required": false},
            "tags": {"type": {"kind": "array", "items": {"kind": "enum", "values": ["a", "b"]}}, "required": true},
            "nested": {"type": {"kind": "record", "fields": {
                "score": {"type": {"kind": "number"}, "required": false}
            }}, "required": false}
        }}))
    }

    fn worker(output: PayloadType) -> NodeContract {
        NodeContract {
            output,
            verifier: None,
        }
    }

    fn verifier() -> NodeContract {
        let node = GraphNode::parse(
            &json!({"kind":"verifier","name":"v","worker":"w@1","input":{"kind":"null"},
                "output":{"kind":"boolean"},"inputBindings":[],"writeBindings":[],"attempts":1,
                "signals":{"verdict":["accepted","rejected"]},
                "diagnostic":{"kind":"record","fields":{
                    "message":{"type":{"kind":"string"},"required":true},
                    "hint":{"type":{"kind":"string"},"required":false}}}}),
            &JsonPath::root(),
        )
        .unwrap();
        NodeContract::of(&node).unwrap()
    }

    #[test]
    fn standard_records_are_closed_and_list_only_required_fields() {
        let schema = payload_schema(&record(), SchemaDialect::Standard);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "nested": {"type": "object", "properties": {"score": {"type": "number"}},
                               "required": [], "additionalProperties": false},
                    "nothing": {"type": "null"},
                    "summary": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                },
                "required": ["summary", "tags"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn strict_records_require_everything_and_make_optional_fields_nullable() {
        let schema = payload_schema(&record(), SchemaDialect::OpenAiStrict);
        assert_eq!(
            schema["required"],
            json!(["count", "nested", "nothing", "summary", "tags"])
        );
        assert_eq!(
            schema["properties"]["count"],
            json!({"anyOf": [{"type": "integer"}, {"type": "null"}]})
        );
        assert_eq!(
            schema["properties"]["nothing"],
            json!({"anyOf": [{"type": "null"}, {"type": "string", "enum": [OMITTED_SENTINEL]}]})
        );
        assert_eq!(
            schema["properties"]["nested"]["anyOf"][0]["required"],
            json!(["score"])
        );
        assert_eq!(schema["properties"]["summary"], json!({"type": "string"}));
    }

    #[test]
    fn envelopes_offer_a_response_or_a_refusal() {
        let contract = worker(PayloadType::Integer);
        assert_eq!(
            reply_schema(&contract, SchemaDialect::Standard),
            json!({
                "type": "object",
                "properties": {"response": {"type": "integer"},
                               "refusal": {"type": "string", "minLength": 1}},
                "additionalProperties": false, "minProperties": 1, "maxProperties": 1,
            })
        );
        assert_eq!(
            reply_schema(&contract, SchemaDialect::OpenAiStrict),
            json!({
                "type": "object",
                "properties": {
                    "response": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                    "refusal": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["response", "refusal"],
                "additionalProperties": false,
            })
        );
        let null_output = reply_schema(&worker(PayloadType::Null), SchemaDialect::OpenAiStrict);
        assert_eq!(
            null_output["properties"]["response"],
            json!({"type": "null"})
        );
    }

    #[test]
    fn verifier_bodies_close_signals_over_their_labels() {
        let body = reply_body_schema(&verifier(), SchemaDialect::OpenAiStrict);
        assert_eq!(body["required"], json!(["output", "signals", "diagnostic"]));
        assert_eq!(
            body["properties"]["signals"],
            json!({
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": ["accepted", "rejected"]}},
                "required": ["verdict"],
                "additionalProperties": false,
            })
        );
        assert_eq!(
            body["properties"]["diagnostic"]["properties"]["hint"],
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        );
    }

    #[test]
    fn strict_replies_normalize_back_to_the_contract_shape() {
        let contract = worker(record());
        let strict = json!({"summary": "s", "count": null, "nothing": OMITTED_SENTINEL,
                            "tags": ["a"], "nested": {"score": null}});
        let normalized = normalize_strict_body(&contract, strict);
        assert_eq!(
            normalized,
            json!({"summary": "s", "tags": ["a"], "nested": {}})
        );
        assert!(contract.accept(&normalized).is_ok());
        let present_null = normalize_strict_body(
            &contract,
            json!({"summary": "s", "count": 2, "nothing": null, "tags": [], "nested": null}),
        );
        assert_eq!(
            present_null,
            json!({"summary": "s", "count": 2, "nothing": null, "tags": []})
        );
        let verifier = verifier();
        let reply = normalize_strict_body(
            &verifier,
            json!({"output": true, "signals": {"verdict": "accepted"},
                   "diagnostic": {"message": "ok", "hint": null}}),
        );
        assert_eq!(reply["diagnostic"], json!({"message": "ok"}));
        assert!(verifier.accept(&reply).is_ok());
    }
}
