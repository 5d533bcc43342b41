//! Subgraph checkpoints: postconditions in `<workflow_dir>/checkpoints/<subgraph>.py`, judged
//! against the connector's world snapshot after a subgraph exits on a success path.

use serde::Serialize;
use serde_json::Value;

/// How checkpoint failures are treated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Sidecars are ignored.
    #[default]
    Off,
    /// Failures are logged and recorded; the run goes on.
    Warn,
    /// A failing checkpoint fails the run (never routed through `on_error`).
    Strict,
}

impl CheckpointMode {
    /// `off`, `warn`, or `strict` (the reference's `raise` is accepted as `strict`).
    pub fn parse(text: &str) -> Option<CheckpointMode> {
        Some(match text {
            "off" => CheckpointMode::Off,
            "warn" => CheckpointMode::Warn,
            "strict" | "raise" => CheckpointMode::Strict,
            _ => return None,
        })
    }
}

/// One evaluated checkpoint of one subgraph visit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointResult {
    pub name: String,
    pub subgraph: String,
    /// 0-based visit of the subgraph this result belongs to.
    pub visit: u32,
    pub passed: bool,
    pub validate: bool,
    /// `"<Type>: <message>"` when the predicate raised (then `passed` is false).
    pub eval_error: Option<String>,
    pub diagnostics: Option<Value>,
    pub eval_time_s: f64,
}

impl CheckpointResult {
    /// Reads one entry of the bridge's `checkpoint_results` reply.
    pub(crate) fn from_reply(entry: &Value, subgraph: &str, visit: u32) -> CheckpointResult {
        let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
        CheckpointResult {
            name: text("name").unwrap_or_default(),
            subgraph: subgraph.to_string(),
            visit,
            passed: entry
                .get("passed")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            validate: entry
                .get("validate")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            eval_error: text("eval_error"),
            diagnostics: entry.get("diagnostics").filter(|d| d.is_object()).cloned(),
            eval_time_s: entry
                .get("eval_time_s")
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        }
    }

    /// `name` or `name (error)` for failure messages.
    pub(crate) fn label(&self) -> String {
        match &self.eval_error {
            Some(error) => format!("{} ({error})", self.name),
            None => self.name.clone(),
        }
    }
}
