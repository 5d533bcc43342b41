//! How a run ends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum TerminalResult {
    Succeeded {
        output: Value,
    },
    /// `reason` is a label such as `worker_failed`, `force_stopped` or `runtime_lost`.
    Failed {
        reason: String,
    },
}
