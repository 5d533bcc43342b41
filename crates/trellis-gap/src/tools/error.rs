//! Why a tool call (or registration) failed, and how a bridge's `run_result` / `run_error`
//! frame becomes a tool's result.

use serde_json::Value;
use std::path::PathBuf;

/// Why a tool call (or registration) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    #[error("KeyError: Tool '{name}' not found (available: {available})")]
    NotFound { name: String, available: String },
    #[error("ToolArgumentError: {message}")]
    Argument { tool: String, message: String },
    #[error("{}", failed_text(error_type, message))]
    Failed {
        tool: String,
        error_type: String,
        message: String,
        traceback: Option<String>,
        /// The raised class declared `terminal = True`: bypass `on_error`.
        terminal: bool,
    },
    #[error("GuardLimitExceeded: {message}")]
    GuardLimit { message: String },
    #[error("TaskCancelled: {message}")]
    Cancelled { message: String },
    #[error("BridgeError: {message}")]
    Bridge { message: String },
    #[error("tool name collision: '{name}' is already registered")]
    Collision { name: String },
    #[error("invalid tool manifest {path}: {message}")]
    Manifest { path: PathBuf, message: String },
}

fn failed_text(error_type: &str, message: &str) -> String {
    if message.is_empty() {
        error_type.to_string()
    } else {
        format!("{error_type}: {message}")
    }
}

impl ToolError {
    /// A plain failure raised by a tool body.
    pub fn failed(tool: &str, error_type: &str, message: impl Into<String>) -> Self {
        ToolError::Failed {
            tool: tool.to_string(),
            error_type: error_type.to_string(),
            message: message.into(),
            traceback: None,
            terminal: false,
        }
    }

    /// The Python traceback, when the failure came from Python.
    pub fn traceback(&self) -> Option<&str> {
        match self {
            ToolError::Failed { traceback, .. } => traceback.as_deref(),
            _ => None,
        }
    }
}

/// Turns a `run_result` / `run_error` frame into the tool's result.
pub(crate) fn reply_to_result(tool: &str, reply: &Value) -> Result<Value, ToolError> {
    if reply.get("kind").and_then(Value::as_str) == Some("run_result") {
        return Ok(reply.get("value").cloned().unwrap_or(Value::Null));
    }
    let error = reply.get("error").cloned().unwrap_or(Value::Null);
    let text = |key: &str| {
        error
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let error_type = text("type");
    let message = text("message");
    Err(match error_type.as_str() {
        "GuardLimitExceeded" => ToolError::GuardLimit { message },
        "TaskCancelled" => ToolError::Cancelled { message },
        "ToolArgumentError" => ToolError::Argument {
            tool: tool.to_string(),
            message,
        },
        _ => ToolError::Failed {
            tool: tool.to_string(),
            error_type: if error_type.is_empty() {
                "Exception".into()
            } else {
                error_type
            },
            message,
            traceback: error
                .get("traceback")
                .and_then(Value::as_str)
                .map(str::to_string),
            terminal: error
                .get("terminal")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
    })
}
