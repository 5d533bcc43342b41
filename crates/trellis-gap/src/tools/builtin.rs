//! Built-in `stub.*` tools for tests and benchmarks (no I/O beyond sleeping).

use super::{ToolDescriptor, ToolError, ToolRegistry};
use crate::context::NodeContext;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn number(tool: &str, args: &Map<String, Value>, key: &str) -> Result<f64, ToolError> {
    args.get(key).and_then(Value::as_f64).ok_or_else(|| {
        ToolError::failed(
            tool,
            "TypeError",
            format!("{tool} needs a numeric '{key}' argument"),
        )
    })
}

fn add(registry: &mut ToolRegistry, descriptor: ToolDescriptor, body: impl super::Tool + 'static) {
    // Built-ins are registered into an empty registry, so a collision cannot happen.
    let _ = registry.register(descriptor, Arc::new(body));
}

impl ToolRegistry {
    /// A registry holding the built-in `stub.*` tools used by tests and benchmarks.
    pub fn with_builtin_stubs() -> Self {
        let mut registry = Self::new();
        register_stubs(&mut registry);
        registry
    }
}

/// Registers `stub.noop`, `stub.echo`, `stub.const`, `stub.double`, `stub.fail`, `stub.sleep`,
/// `stub.counter` and the streaming `stub.ticker`.
pub(super) fn register_stubs(registry: &mut ToolRegistry) {
    add(
        registry,
        ToolDescriptor::new("stub.noop").with_params(&[]),
        |_: &NodeContext<'_>, _| Ok(json!({})),
    );
    add(
        registry,
        ToolDescriptor::new("stub.echo"),
        |_: &NodeContext<'_>, args| Ok(Value::Object(args)),
    );
    add(
        registry,
        ToolDescriptor::new("stub.const").with_params(&["value"]),
        |_: &NodeContext<'_>, args: Map<String, Value>| {
            Ok(json!({"value": args.get("value").cloned().unwrap_or(Value::Null)}))
        },
    );
    add(
        registry,
        ToolDescriptor::new("stub.double").with_params(&["x"]),
        |_: &NodeContext<'_>, args: Map<String, Value>| {
            let x = args.get("x").cloned().unwrap_or(Value::Null);
            let doubled = match x.as_i64() {
                Some(i) => json!(i.saturating_mul(2)),
                None => json!(number("stub.double", &args, "x")? * 2.0),
            };
            Ok(json!({ "value": doubled }))
        },
    );
    add(
        registry,
        ToolDescriptor::new("stub.fail").with_params(&["message"]),
        |_: &NodeContext<'_>, args: Map<String, Value>| {
            let message = args
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("stub failure");
            Err(ToolError::failed("stub.fail", "RuntimeError", message))
        },
    );
    add(
        registry,
        ToolDescriptor::new("stub.sleep").with_params(&["seconds"]),
        |ctx: &NodeContext<'_>, args: Map<String, Value>| {
            let seconds = number("stub.sleep", &args, "seconds")?.clamp(0.0, 3600.0);
            if ctx.wait_cancelled(Duration::from_secs_f64(seconds)) {
                return Err(ToolError::Cancelled {
                    message: "stub.sleep cancelled".to_string(),
                });
            }
            Ok(json!({ "slept": seconds }))
        },
    );
    let counter = Arc::new(AtomicU64::new(0));
    add(
        registry,
        ToolDescriptor::new("stub.counter").with_params(&[]),
        move |_: &NodeContext<'_>, _| Ok(json!({"n": counter.fetch_add(1, Ordering::SeqCst) + 1})),
    );
    add(
        registry,
        ToolDescriptor::new("stub.ticker").with_params(&["interval_ms"]),
        |ctx: &NodeContext<'_>, args: Map<String, Value>| {
            let interval = args.get("interval_ms").and_then(Value::as_u64).unwrap_or(5);
            let mut tick = 0u64;
            loop {
                ctx.publish(json!({ "tick": tick }))?;
                tick += 1;
                if ctx.wait_cancelled(Duration::from_millis(interval)) {
                    return Ok(Value::Null);
                }
            }
        },
    );
}
