//! Canonical bytes and graph identity (§8.3): order-insensitive normalization of the compiled
//! IR, compact JSON with byte-sorted keys, and its SHA-256.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use trellis_graph::CompiledGraphIr;

/// Why canonical bytes could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("the compiled IR contains a non-integer number")]
    NonIntegerNumber,
    #[error("the compiled IR could not be serialized: {0}")]
    Serialize(String),
}

/// A graph's identity: the lowercase hex SHA-256 of its canonical bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphIdentity(String);

impl GraphIdentity {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GraphIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for GraphIdentity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The canonical bytes of a compiled IR.
pub fn canonical_bytes(ir: &CompiledGraphIr) -> Result<Vec<u8>, CanonicalError> {
    let mut value =
        serde_json::to_value(ir).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
    if let Some(root) = value.get_mut("root") {
        normalize_node(root)?;
    }
    let mut out = Vec::new();
    write_canonical(&value, &mut out)?;
    Ok(out)
}

/// SHA-256 of the canonical bytes, as 64 lowercase hex digits.
pub fn graph_identity(ir: &CompiledGraphIr) -> Result<GraphIdentity, CanonicalError> {
    let bytes = canonical_bytes(ir)?;
    Ok(GraphIdentity(hex::encode(Sha256::digest(&bytes))))
}

fn bytes_of(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

/// Sorts an array by canonical bytes; `dedup` also drops identical elements.
fn sort_by_bytes(items: &mut Vec<Value>, dedup: bool) -> Result<(), CanonicalError> {
    let mut keyed: Vec<(Vec<u8>, Value)> = items
        .drain(..)
        .map(|v| bytes_of(&v).map(|b| (b, v)))
        .collect::<Result<_, _>>()?;
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    if dedup {
        keyed.dedup_by(|a, b| a.0 == b.0);
    }
    items.extend(keyed.into_iter().map(|(_, v)| v));
    Ok(())
}

fn sort_field(obj: &mut Map<String, Value>, key: &str, dedup: bool) -> Result<(), CanonicalError> {
    if let Some(Value::Array(items)) = obj.get_mut(key) {
        sort_by_bytes(items, dedup)?;
    }
    Ok(())
}

fn normalize_node(node: &mut Value) -> Result<(), CanonicalError> {
    let Value::Object(obj) = node else {
        return Ok(());
    };
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "step" | "verifier" => {
            sort_field(obj, "inputBindings", false)?;
            sort_field(obj, "writeBindings", false)?;
        }
        "succeed" => sort_field(obj, "bindings", false)?,
        "seq" => {
            if let Some(Value::Array(children)) = obj.get_mut("children") {
                for child in children {
                    normalize_node(child)?;
                }
            }
        }
        "choice" => {
            if let Some(Value::Array(branches)) = obj.get_mut("branches") {
                for branch in branches {
                    if let Some(when) = branch.get_mut("when") {
                        normalize_guard(when)?;
                    }
                    if let Some(node) = branch.get_mut("node") {
                        normalize_node(node)?;
                    }
                }
            }
            if let Some(otherwise) = obj.get_mut("otherwise") {
                normalize_node(otherwise)?;
            }
        }
        "par" => {
            if let Some(Value::Array(branches)) = obj.get_mut("branches") {
                for branch in branches.iter_mut() {
                    normalize_node(branch)?;
                }
                branches.sort_by(|a, b| {
                    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
                    name(a).cmp(&name(b))
                });
            }
            if let Some(when) = obj.get_mut("join").and_then(|j| j.get_mut("when")) {
                normalize_guard(when)?;
            }
        }
        "loop" => {
            if let Some(body) = obj.get_mut("body") {
                normalize_node(body)?;
            }
            if let Some(until) = obj.get_mut("until") {
                normalize_guard(until)?;
            }
        }
        "map" => {
            if let Some(body) = obj.get_mut("body") {
                normalize_node(body)?;
            }
        }
        _ => {}
    }
    if matches!(kind.as_str(), "seq" | "choice" | "par" | "loop" | "map") {
        sort_field(obj, "promotedStatePaths", true)?;
    }
    Ok(())
}

fn normalize_guard(guard: &mut Value) -> Result<(), CanonicalError> {
    let Value::Object(obj) = guard else {
        return Ok(());
    };
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    match kind.as_str() {
        "k_of_n" => sort_field(obj, "values", false)?,
        "not" => {
            if let Some(inner) = obj.get_mut("guard") {
                normalize_guard(inner)?;
            }
        }
        "all" | "any" => {
            if let Some(Value::Array(guards)) = obj.get_mut("guards") {
                for inner in guards.iter_mut() {
                    normalize_guard(inner)?;
                }
                let mut flat = Vec::with_capacity(guards.len());
                for inner in guards.drain(..) {
                    let same_kind = inner.get("kind").and_then(Value::as_str) == Some(&kind);
                    match (same_kind, inner) {
                        (true, Value::Object(mut nested)) => match nested.remove("guards") {
                            Some(Value::Array(items)) => flat.extend(items),
                            Some(other) => {
                                nested.insert("guards".to_owned(), other);
                                flat.push(Value::Object(nested));
                            }
                            None => flat.push(Value::Object(nested)),
                        },
                        (_, inner) => flat.push(inner),
                    }
                }
                sort_by_bytes(&mut flat, true)?;
                *guards = flat;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Compact JSON with object keys sorted by UTF-8 bytes; floats are refused.
fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.extend_from_slice(u.to_string().as_bytes());
            } else if let Some(i) = n.as_i64() {
                out.extend_from_slice(i.to_string().as_bytes());
            } else {
                return Err(CanonicalError::NonIntegerNumber);
            }
        }
        Value::String(s) => write_string(s, out)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out)?;
                out.push(b':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out)?;
                }
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// serde_json's string escaping: `\"`, `\\`, short escapes, `\u00xx` for other controls.
fn write_string(s: &str, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    let text = serde_json::to_string(s).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
    out.extend_from_slice(text.as_bytes());
    Ok(())
}
