//! The validator's Python side: a short-lived bridge that imports a script and reports its
//! typed schema and `run()` signature.

use crate::bridge::{BridgeHooks, BridgeSlot, PythonConfig};
use crate::validate::{RunSignature, ScriptIntrospector, ScriptReport};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Imports scripts through a short-lived bridge for the validator's introspection warnings.
pub struct PythonIntrospector {
    slot: BridgeSlot,
}

impl PythonIntrospector {
    /// A lazily started introspection bridge.
    pub fn new(config: PythonConfig) -> Self {
        PythonIntrospector {
            slot: BridgeSlot::new(config, Arc::new(|_: &str, _: &str| {})),
        }
    }
}

impl Drop for PythonIntrospector {
    fn drop(&mut self) {
        self.slot.shutdown(Duration::from_millis(200));
    }
}

/// Introspection has no callbacks; a script whose import never finishes is abandoned at the deadline.
struct IntrospectHooks {
    deadline: Instant,
}

const INTROSPECT_TIMEOUT: Duration = Duration::from_secs(30);

impl BridgeHooks for IntrospectHooks {
    fn tool_call(&self, tool: &str, _: Map<String, Value>) -> Result<Value, (String, String)> {
        Err((
            "RuntimeError".to_string(),
            format!("tool '{tool}' unavailable during introspection"),
        ))
    }
    fn publish(&self, _: Value) {}
    fn log(&self, _: &str, _: &str) {}
    fn is_cancelled(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

impl ScriptIntrospector for PythonIntrospector {
    fn introspect(&self, path: &Path) -> ScriptReport {
        let failed = |reason: String| ScriptReport {
            schema_error: Some(reason),
            ..ScriptReport::default()
        };
        if !path.is_file() {
            return failed(format!("script file not found: {}", path.display()));
        }
        let bridge = match self.slot.get() {
            Ok(bridge) => bridge,
            Err(e) => return failed(e.to_string()),
        };
        let mut payload = Map::new();
        payload.insert("script_path".to_string(), json!(path.to_string_lossy()));
        let reply = match bridge.request(
            "introspect",
            payload,
            &IntrospectHooks {
                deadline: Instant::now() + INTROSPECT_TIMEOUT,
            },
            Duration::from_secs(1),
            None,
        ) {
            Ok(reply) => reply,
            Err(e) => return failed(e.to_string()),
        };
        let names = |value: Option<&Value>| -> Option<Vec<String>> {
            value?.as_array().map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
        };
        let signature = reply
            .get("signature")
            .filter(|s| s.is_object())
            .map(|s| RunSignature {
                required: names(s.get("required")).unwrap_or_default(),
                accepted: names(s.get("accepted")).unwrap_or_default(),
                var_kw: s.get("var_kw").and_then(Value::as_bool).unwrap_or(false),
            });
        ScriptReport {
            schema_error: reply
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_string),
            signature,
            returned: names(reply.get("returned")),
        }
    }
}
