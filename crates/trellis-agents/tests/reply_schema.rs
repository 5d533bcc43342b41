//! The generated reply schemas checked by an independent JSON Schema validator: both dialects
//! accept exactly the envelopes the contract check accepts, the strict dialect obeys OpenAI's
//! structural rules, and strict replies normalize back to the contract's shape.

use serde_json::{Value, json};
use trellis_agents::NodeContract;
use trellis_agents::reply::{RawReply, ReplyVerdict, judge_reply};
use trellis_agents::schema::{OMITTED_SENTINEL, SchemaDialect, reply_schema};
use trellis_graph::{GraphNode, JsonPath, PayloadType};

fn ty(value: Value) -> PayloadType {
    PayloadType::parse(&value, &JsonPath::root()).unwrap()
}

fn worker(output: Value) -> NodeContract {
    NodeContract {
        output: ty(output),
        verifier: None,
    }
}

fn verifier() -> NodeContract {
    let node = GraphNode::parse(
        &json!({"kind":"verifier","name":"v","worker":"w@1","input":{"kind":"null"},
            "output":{"kind":"array","items":{"kind":"integer"}},"inputBindings":[],"writeBindings":[],
            "attempts":1,"signals":{"verdict":["accepted","rejected"],"risk":["low","high"]},
            "diagnostic":{"kind":"record","fields":{
                "message":{"type":{"kind":"string"},"required":true},
                "files":{"type":{"kind":"array","items":{"kind":"string"}},"required":false}}}}),
        &JsonPath::root(),
    )
    .unwrap();
    NodeContract::of(&node).unwrap()
}

fn nested_record() -> Value {
    json!({"kind": "record", "fields": {
        "title": {"type": {"kind": "string"}, "required": true},
        "score": {"type": {"kind": "number"}, "required": false},
        "marker": {"type": {"kind": "null"}, "required": false},
        "level": {"type": {"kind": "enum", "values": ["low", "high"]}, "required": true},
        "items": {"type": {"kind": "array", "items": {"kind": "record", "fields": {
            "id": {"type": {"kind": "integer"}, "required": true},
            "done": {"type": {"kind": "boolean"}, "required": false}
        }}}, "required": true}
    }})
}

/// (contract, reply bodies it accepts, reply bodies it rejects)
fn cases() -> Vec<(NodeContract, Vec<Value>, Vec<Value>)> {
    vec![
        (
            worker(nested_record()),
            vec![
                json!({"title": "t", "level": "low", "items": []}),
                json!({"title": "t", "score": 1.5, "marker": null, "level": "high",
                       "items": [{"id": 1}, {"id": 2, "done": true}]}),
            ],
            vec![
                json!({"title": "t", "level": "medium", "items": []}),
                json!({"title": "t", "level": "low", "items": [], "extra": 1}),
                json!({"level": "low", "items": []}),
                json!({"title": "t", "level": "low", "items": [{"id": "x"}]}),
            ],
        ),
        (
            worker(json!({"kind": "null"})),
            vec![json!(null)],
            vec![json!(0), json!({})],
        ),
        (
            worker(json!({"kind": "array", "items": {"kind": "enum", "values": ["a"]}})),
            vec![json!([]), json!(["a", "a"])],
            vec![json!(["b"]), json!("a")],
        ),
        (
            verifier(),
            vec![
                json!({"output": [1], "signals": {"verdict": "accepted", "risk": "low"},
                       "diagnostic": {"message": "ok"}}),
                json!({"output": [], "signals": {"verdict": "rejected", "risk": "high"},
                       "diagnostic": {"message": "no", "files": ["a.rs"]}}),
            ],
            vec![
                json!({"output": [1], "signals": {"verdict": "accepted"}, "diagnostic": {"message": "ok"}}),
                json!({"output": [1], "signals": {"verdict": "maybe", "risk": "low"},
                       "diagnostic": {"message": "ok"}}),
                json!({"output": [1], "signals": {"verdict": "accepted", "risk": "low", "x": "y"},
                       "diagnostic": {"message": "ok"}}),
                json!({"output": [1], "signals": {"verdict": "accepted", "risk": "low"},
                       "diagnostic": {"message": "ok"}, "artifacts": []}),
            ],
        ),
    ]
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::new(schema).expect("the generated schema compiles")
}

/// Encodes a contract value the way a strict-dialect model must send it: every optional field
/// present, `null` (or the sentinel for a field of type null) when absent.
fn strictify(ty: &PayloadType, value: &Value) -> Value {
    match (ty, value) {
        (PayloadType::Array { items }, Value::Array(elements)) => {
            Value::Array(elements.iter().map(|e| strictify(items, e)).collect())
        }
        (PayloadType::Record { fields }, Value::Object(object)) => {
            let mut out = serde_json::Map::new();
            for (name, field) in fields {
                let encoded = match object.get(name.as_str()) {
                    Some(inner) => strictify(&field.ty, inner),
                    None if field.ty == PayloadType::Null => json!(OMITTED_SENTINEL),
                    None => Value::Null,
                };
                out.insert(name.to_string(), encoded);
            }
            // Undeclared fields stay, so a bad value stays bad.
            for (key, inner) in object {
                out.entry(key.clone()).or_insert_with(|| inner.clone());
            }
            Value::Object(out)
        }
        (_, other) => other.clone(),
    }
}

fn strictify_body(contract: &NodeContract, body: &Value) -> Value {
    match &contract.verifier {
        None => strictify(&contract.output, body),
        Some(v) => {
            let mut out = body.clone();
            out["output"] = strictify(&contract.output, &body["output"]);
            out["diagnostic"] = strictify(&v.diagnostic, &body["diagnostic"]);
            out
        }
    }
}

#[test]
fn the_standard_dialect_accepts_what_the_contract_accepts() {
    for (contract, good, bad) in cases() {
        let schema = validator(&reply_schema(&contract, SchemaDialect::Standard));
        for body in &good {
            assert!(contract.accept(body).is_ok(), "{body}");
            let envelope = json!({"response": body});
            assert!(schema.is_valid(&envelope), "{envelope}");
            assert!(!schema.is_valid(&json!({"response": body, "note": 1})));
            assert!(!schema.is_valid(&json!({"response": body, "refusal": "no"})));
        }
        for body in &bad {
            assert!(contract.accept(body).is_err(), "{body}");
            assert!(!schema.is_valid(&json!({"response": body})), "{body}");
        }
        assert!(schema.is_valid(&json!({"refusal": "cannot reach the repository"})));
        assert!(!schema.is_valid(&json!({})));
        assert!(!schema.is_valid(&json!({"refusal": ""})));
    }
}

#[test]
fn strict_replies_validate_and_normalize_back_to_the_contract_value() {
    for (contract, good, bad) in cases() {
        let schema = validator(&reply_schema(&contract, SchemaDialect::OpenAiStrict));
        for body in &good {
            let envelope = json!({"response": strictify_body(&contract, body), "refusal": null});
            assert!(schema.is_valid(&envelope), "{envelope}");
            // An envelope missing a strict-required field is invalid.
            assert!(!schema.is_valid(&json!({"response": strictify_body(&contract, body)})));
            let verdict = judge_reply(
                &contract,
                SchemaDialect::OpenAiStrict,
                RawReply::Json(envelope),
            );
            let ReplyVerdict::Accepted(outcome) = verdict else {
                panic!("{body}: {verdict:?}");
            };
            let output = match outcome {
                trellis_graph::WorkerOutcome::Verified { output, .. } => output,
                trellis_graph::WorkerOutcome::Verifier {
                    output, diagnostic, ..
                } => {
                    assert_eq!(diagnostic, body["diagnostic"]);
                    output
                }
                other => panic!("{other:?}"),
            };
            let expected = if contract.verifier.is_some() {
                &body["output"]
            } else {
                body
            };
            assert_eq!(&output, expected);
        }
        for body in &bad {
            let envelope = json!({"response": strictify_body(&contract, body), "refusal": null});
            assert!(!schema.is_valid(&envelope), "{envelope}");
        }
        assert!(schema.is_valid(&json!({"response": null, "refusal": "no access"})));
    }
}

/// OpenAI strict mode: every object lists all its properties as required and is closed.
fn assert_strict_shape(schema: &Value, at: &str) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                let mut keys: Vec<&String> = properties.keys().collect();
                keys.sort();
                let mut required: Vec<&String> = map["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s,
                        other => panic!("{other}"),
                    })
                    .collect();
                required.sort();
                assert_eq!(keys, required, "{at}");
                assert_eq!(map.get("additionalProperties"), Some(&json!(false)), "{at}");
            }
            for (key, inner) in map {
                assert_strict_shape(inner, &format!("{at}/{key}"));
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                assert_strict_shape(inner, &format!("{at}/{i}"));
            }
        }
        _ => {}
    }
}

#[test]
fn the_strict_dialect_follows_openai_structural_rules() {
    for (contract, _, _) in cases() {
        let schema = reply_schema(&contract, SchemaDialect::OpenAiStrict);
        assert_strict_shape(&schema, "#");
        assert_eq!(schema["type"], "object");
        let text = schema.to_string();
        for unsupported in ["minProperties", "maxProperties", "oneOf", "minLength"] {
            assert!(!text.contains(unsupported), "{unsupported} in {text}");
        }
    }
}
