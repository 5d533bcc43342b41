//! How a finished GaP run ended, read from the `run_finished` progress event its controller
//! records just before the terminal: the end node it reached, or the node whose failure ended
//! it. Runs recorded before that event existed have none, and read as `None`.

use serde::{Deserialize, Serialize};
use trellis_ledger::{Cursor, EventFilter, RunEvent, RunId, RunStore};

use crate::shared::error::RuntimeError;

/// How many of the run's last events are searched: the event sits right before the terminal,
/// behind at most a few closing log lines.
const TAIL_EVENTS: u64 = 32;

/// The status of the end node a GaP run reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GapExitStatus {
    Success,
    Failure,
}

/// Where a GaP run ended (`RunStatus.gapEnd`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase", deserialize = "snake_case"))]
pub struct GapEnd {
    /// The status of the end node reached; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<GapExitStatus>,
    /// The top-level end node the run reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_node: Option<String>,
    /// The full id (`subgraph.node`) of the node whose failure ended the run before any end
    /// node was reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_node: Option<String>,
}

/// The recorded end of `run_id`, or `None` when its ledger holds none.
pub(crate) fn gap_end(
    store: &dyn RunStore,
    run_id: &RunId,
) -> Result<Option<GapEnd>, RuntimeError> {
    let latest = store.latest_cursor(run_id)?;
    let from = Cursor::at(latest.sequence().saturating_sub(TAIL_EVENTS)).unwrap_or(Cursor::START);
    let tail = store.events_after(run_id, from, TAIL_EVENTS as usize, EventFilter::ExceptLogs)?;
    Ok(tail
        .into_iter()
        .rev()
        .find_map(|stored| match stored.event {
            RunEvent::GapEvent { payload }
                if payload.get("event").and_then(|kind| kind.as_str()) == Some("run_finished") =>
            {
                payload
                    .get("result")
                    .and_then(|result| serde_json::from_value(result.clone()).ok())
            }
            _ => None,
        }))
}
