//! `$ref` resolution against a scope's local outputs, exactly as the reference walks paths.

use crate::model::{InputValue, Ref};
use crate::pyfmt::py_type_name;
use crate::stream::StreamSlot;
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A value held by a scope: a finished node's output, or a running streaming node's slot.
#[derive(Debug, Clone)]
pub enum ScopeValue {
    Value(Value),
    Stream(Arc<StreamSlot>),
}

/// Node name (plus `in`) to output, in insertion order.
pub type LocalOutputs = IndexMap<String, ScopeValue>;

/// A reference that could not be resolved (a `WorkflowValidationError` in the reference).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// Resolves one reference; a streaming head blocks for its first publish up to `stream_timeout`.
pub fn resolve_ref(
    reference: &Ref,
    scope: &LocalOutputs,
    stream_timeout: Duration,
) -> Result<Value, ResolveError> {
    let path = &reference.path;
    let parts: Vec<&str> = path.split('.').collect();
    let head = parts.first().copied().unwrap_or("");
    if path.is_empty() || head.is_empty() {
        return Err(ResolveError("empty $ref path".to_string()));
    }
    let head_value = scope.get(head).ok_or_else(|| {
        let known: Vec<&str> = scope.keys().map(String::as_str).collect();
        ResolveError(format!(
            "$ref '{path}' names unknown node '{head}' in current scope (known: {})",
            known.join(", ")
        ))
    })?;
    let mut current = match head_value {
        ScopeValue::Value(v) => v.clone(),
        ScopeValue::Stream(slot) => slot
            .latest(stream_timeout)
            .map_err(|e| ResolveError(e.to_string()))?,
    };
    let mut walked = head.to_string();
    for part in &parts[1..] {
        let next = step(&current, part, path, &walked)?;
        current = next;
        walked.push('.');
        walked.push_str(part);
    }
    Ok(current)
}

fn step(current: &Value, part: &str, path: &str, walked: &str) -> Result<Value, ResolveError> {
    let digits = part.trim_start_matches('-');
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let index: i64 = part
            .parse()
            .map_err(|_| ResolveError(format!("$ref '{path}': invalid index '{part}'")))?;
        return match current {
            Value::Array(items) => {
                let len = items.len() as i64;
                let effective = if index < 0 { index + len } else { index };
                if effective < 0 || effective >= len {
                    Err(ResolveError(format!(
                        "$ref '{path}': index {index} out of range at '{walked}' (length {len})"
                    )))
                } else {
                    Ok(items[effective as usize].clone())
                }
            }
            other => Err(ResolveError(format!(
                "$ref '{path}': cannot index non-sequence {} at '{walked}' with {index}",
                py_type_name(other)
            ))),
        };
    }
    match current {
        Value::Object(map) if map.contains_key(part) => Ok(map[part].clone()),
        other => Err(ResolveError(format!(
            "$ref '{path}': field '{part}' not found on '{walked}' (type {})",
            py_type_name(other)
        ))),
    }
}

/// Resolves one input value: refs resolved, lists element-wise, literals unchanged.
pub fn resolve_input(
    value: &InputValue,
    scope: &LocalOutputs,
    stream_timeout: Duration,
) -> Result<Value, ResolveError> {
    match value {
        InputValue::Ref(r) => resolve_ref(r, scope, stream_timeout),
        InputValue::List(items) => items
            .iter()
            .map(|item| resolve_input(item, scope, stream_timeout))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        InputValue::Literal(v) => Ok(v.clone()),
    }
}

/// Resolves every input of a node, in declaration order.
pub fn resolve_inputs(
    inputs: &IndexMap<String, InputValue>,
    scope: &LocalOutputs,
    stream_timeout: Duration,
) -> Result<Map<String, Value>, ResolveError> {
    let mut out = Map::new();
    for (name, value) in inputs {
        out.insert(name.clone(), resolve_input(value, scope, stream_timeout)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope(entries: &[(&str, Value)]) -> LocalOutputs {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), ScopeValue::Value(v.clone())))
            .collect()
    }

    fn r(path: &str) -> Ref {
        Ref {
            path: path.to_string(),
        }
    }

    const T: Duration = Duration::from_millis(10);

    #[test]
    fn walks_dicts_lists_and_negative_indices() {
        let s = scope(&[(
            "traj",
            json!({"waypoints": [{"positions": [0.1, 0.2]}, {"positions": [0.0, 0.3]}]}),
        )]);
        assert_eq!(
            resolve_ref(&r("traj.waypoints.-1.positions.1"), &s, T),
            Ok(json!(0.3))
        );
        assert_eq!(
            resolve_ref(&r("traj.waypoints.0.positions.0"), &s, T),
            Ok(json!(0.1))
        );
    }

    #[test]
    fn dict_keys_named_like_methods_resolve_as_keys() {
        let s = scope(&[("d", json!({"items": 1, "keys": 2}))]);
        assert_eq!(resolve_ref(&r("d.items"), &s, T), Ok(json!(1)));
        assert_eq!(resolve_ref(&r("d.keys"), &s, T), Ok(json!(2)));
    }

    #[test]
    fn errors_name_the_failure_kind() {
        let s = scope(&[("a", json!({"l": [1], "0": 5}))]);
        let err = |p: &str| resolve_ref(&r(p), &s, T).unwrap_err().0;
        assert!(err("zz.x").contains("unknown node"));
        assert!(err("zz.x").contains("in current scope"));
        assert!(err("a.l.3").contains("out of range"));
        assert!(err("a.0").contains("non-sequence"));
        assert!(err("a.missing").contains("not found"));
        assert!(err("").contains("empty $ref path"));
        assert!(err("--1").contains("unknown node"));
        assert!(err("a.--1").contains("invalid index"));
    }
}
