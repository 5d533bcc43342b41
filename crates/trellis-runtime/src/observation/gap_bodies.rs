//! A GaP run's node bodies as its ledger recorded them (started, then settled), for drawing
//! the run: what each tool, script and router body did, visit by visit.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use trellis_ledger::{Cursor, EventFilter, GapNodeOutcome, RunEvent, RunId, RunStore};

use crate::shared::error::RuntimeError;

/// Events read per page.
const PAGE: usize = 5000;

/// Where a body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapBodyPhase {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// One visit of one GaP body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GapBody {
    /// The full node id (`node` at the top level, `subgraph.node` inside one).
    pub node: String,
    /// 0-based visit of that node id within the run.
    pub visit: u32,
    pub node_type: String,
    pub phase: GapBodyPhase,
    pub started_at_ms: u64,
    /// The event that started it, so a replay knows when it began.
    pub started_cursor: Cursor,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_cursor: Option<Cursor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The size of an output too large to record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run whose settled output this visit reused instead of running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<RunId>,
}

/// Every body of `run_id`, in the order they started.
pub(crate) fn gap_bodies(
    store: &dyn RunStore,
    run_id: &RunId,
) -> Result<Vec<GapBody>, RuntimeError> {
    let mut bodies: Vec<GapBody> = Vec::new();
    let mut index: HashMap<(String, u32), usize> = HashMap::new();
    let mut after = Cursor::START;
    loop {
        let page = store.events_after(run_id, after, PAGE, EventFilter::ExceptLogs)?;
        let Some(last) = page.last() else { break };
        after = last.cursor;
        for stored in page {
            match stored.event {
                RunEvent::GapNodeStarted {
                    node,
                    visit,
                    node_type,
                } => {
                    index.insert((node.clone(), visit), bodies.len());
                    bodies.push(GapBody {
                        node,
                        visit,
                        node_type,
                        phase: GapBodyPhase::Running,
                        started_at_ms: stored.recorded_at_ms,
                        started_cursor: stored.cursor,
                        ended_at_ms: None,
                        settled_cursor: None,
                        output: None,
                        omitted_bytes: None,
                        error: None,
                        reused_from: None,
                    });
                }
                RunEvent::GapNodeSettled {
                    node,
                    visit,
                    outcome,
                } => {
                    // A reused body settles without having started in this run.
                    let at = match index.get(&(node.clone(), visit)) {
                        Some(&at) => at,
                        None => {
                            index.insert((node.clone(), visit), bodies.len());
                            bodies.push(GapBody {
                                node,
                                visit,
                                node_type: String::new(),
                                phase: GapBodyPhase::Running,
                                started_at_ms: stored.recorded_at_ms,
                                started_cursor: stored.cursor,
                                ended_at_ms: None,
                                settled_cursor: None,
                                output: None,
                                omitted_bytes: None,
                                error: None,
                                reused_from: None,
                            });
                            bodies.len() - 1
                        }
                    };
                    let body = &mut bodies[at];
                    body.ended_at_ms = Some(stored.recorded_at_ms);
                    body.settled_cursor = Some(stored.cursor);
                    match outcome {
                        GapNodeOutcome::Succeeded {
                            output,
                            omitted_bytes,
                            reused_from,
                        } => {
                            body.phase = GapBodyPhase::Succeeded;
                            body.output = output;
                            body.omitted_bytes = omitted_bytes;
                            body.reused_from = reused_from;
                        }
                        GapNodeOutcome::Failed { error } => {
                            body.phase = GapBodyPhase::Failed;
                            body.error = Some(error);
                        }
                        GapNodeOutcome::Cancelled {} => body.phase = GapBodyPhase::Cancelled,
                    }
                }
                _ => {}
            }
        }
    }
    Ok(bodies)
}
