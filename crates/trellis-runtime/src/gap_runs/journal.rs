//! The ledger as a GaP run's node journal: every tool, script and router body is recorded
//! (`gap_node_started`) before it runs and (`gap_node_settled`) once it settled, and a resumed
//! run replays the settled outputs of its lineage instead of running those bodies again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use trellis_agents::Redactor;
use trellis_gap::{NodeJournal, SettledBody};
use trellis_ledger::{
    Cursor, EventFilter, GapNodeOutcome, LogLevel, LogStream, RunEvent, RunId, RunStore,
};

use crate::shared::error::RuntimeError;

/// Largest node output recorded whole; a larger one is recorded without it (and runs again
/// on resume). Leaves room for the event's envelope under the ledger's bound.
const MAX_OUTPUT_BYTES: usize = trellis_ledger::limits::MAX_EVENT_JSON_BYTES - 64 * 1024;

/// How many predecessors a resumed GaP run looks back through.
const MAX_LINEAGE: usize = 1024;

/// Events read per page while scanning a predecessor.
const PAGE: usize = 5000;

/// One body: full node id and 0-based visit.
type BodyKey = (String, u32);

/// What a run's lineage settled, and what it dispatched without settling.
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    /// Settled outputs, each with the run that actually ran the body.
    settled: HashMap<BodyKey, (Value, RunId)>,
    /// Dispatched by the nearest predecessor and never settled there (or cancelled): may have
    /// had effects.
    interrupted: HashSet<BodyKey>,
}

impl Lineage {
    /// Reads the settled bodies of `predecessor` and its own predecessors (the nearest run's
    /// settlement of a body wins).
    pub(crate) fn read(
        store: &dyn RunStore,
        predecessor: Option<RunId>,
    ) -> Result<Self, RuntimeError> {
        let mut lineage = Lineage::default();
        let mut next = predecessor;
        let mut nearest = true;
        let mut depth = 0;
        while let Some(run_id) = next.take() {
            if depth == MAX_LINEAGE {
                break;
            }
            depth += 1;
            let mut dispatched = HashSet::new();
            let mut settled_here = HashSet::new();
            let mut after = Cursor::START;
            loop {
                let page = store.events_after(&run_id, after, PAGE, EventFilter::ExceptLogs)?;
                let Some(last) = page.last() else { break };
                after = last.cursor;
                for stored in page {
                    match stored.event {
                        RunEvent::GapNodeStarted { node, visit, .. } => {
                            dispatched.insert((node, visit));
                        }
                        RunEvent::GapNodeSettled {
                            node,
                            visit,
                            outcome:
                                GapNodeOutcome::Succeeded {
                                    output: Some(output),
                                    reused_from,
                                    ..
                                },
                        } => {
                            let key = (node, visit);
                            settled_here.insert(key.clone());
                            let origin = reused_from.unwrap_or_else(|| run_id.clone());
                            lineage.settled.entry(key).or_insert((output, origin));
                        }
                        // A cancelled body may have had part of its effects: like one
                        // never settled, it counts as interrupted.
                        RunEvent::GapNodeSettled {
                            outcome: GapNodeOutcome::Cancelled {},
                            ..
                        } => {}
                        RunEvent::GapNodeSettled { node, visit, .. } => {
                            settled_here.insert((node, visit));
                        }
                        _ => {}
                    }
                }
            }
            if nearest {
                lineage.interrupted = dispatched.difference(&settled_here).cloned().collect();
                nearest = false;
            }
            next = store.record(&run_id)?.predecessor;
        }
        Ok(lineage)
    }

    /// How many settled bodies a successor may reuse.
    pub(crate) fn reusable(&self) -> usize {
        self.settled.len()
    }
}

/// The journal of one GaP run, writing to the ledger synchronously: a dispatch is durable
/// before its body starts.
pub(crate) struct LedgerJournal {
    store: Arc<dyn RunStore>,
    run_id: RunId,
    lineage: Lineage,
    /// Full ids of the scripts the workflow declares safe to run twice.
    idempotent: HashSet<String>,
    redactor: Redactor,
    /// The first ledger failure, reported when the run ends.
    failure: Mutex<Option<String>>,
}

impl LedgerJournal {
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        run_id: RunId,
        lineage: Lineage,
        meta: &Map<String, Value>,
        redactor: Redactor,
    ) -> Self {
        let idempotent = meta
            .get(IDEMPOTENT_SCRIPTS)
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Self {
            store,
            run_id,
            lineage,
            idempotent,
            redactor,
            failure: Mutex::new(None),
        }
    }

    /// The first event the ledger refused, if any.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn append(&self, events: &[RunEvent]) -> Result<(), String> {
        self.store
            .append(&self.run_id, events)
            .map(|_| ())
            .map_err(|error| {
                let text = error.to_string();
                let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                failure.get_or_insert_with(|| text.clone());
                text
            })
    }

    /// The settled outcome as recorded: secrets masked, a too large or secret-bearing output
    /// left out (it is then not reusable).
    fn recorded(&self, outcome: SettledBody<'_>, reused_from: Option<RunId>) -> GapNodeOutcome {
        match outcome {
            SettledBody::Succeeded(output) => {
                let size = serde_json::to_vec(output).map_or(usize::MAX, |bytes| bytes.len());
                let masked = redact_value(&self.redactor, output);
                let keep = size <= MAX_OUTPUT_BYTES && masked == *output;
                GapNodeOutcome::Succeeded {
                    output: keep.then(|| output.clone()),
                    omitted_bytes: (!keep).then_some(size as u64),
                    reused_from,
                }
            }
            SettledBody::Failed(error) => GapNodeOutcome::Failed {
                error: trellis_agents::forward::one_line(&self.redactor.apply(error)),
            },
            SettledBody::Cancelled => GapNodeOutcome::Cancelled {},
        }
    }
}

/// The workflow `meta` key listing the full ids of scripts that are safe to run twice.
pub(crate) const IDEMPOTENT_SCRIPTS: &str = "idempotent_scripts";

impl NodeJournal for LedgerJournal {
    fn recall(&self, node_id: &str, visit: u32) -> Option<Value> {
        self.lineage
            .settled
            .get(&(node_id.to_owned(), visit))
            .map(|(output, _)| output.clone())
    }

    fn dispatched(&self, node_id: &str, visit: u32, node_type: &str) -> Result<(), String> {
        let mut events = Vec::with_capacity(2);
        let key = (node_id.to_owned(), visit);
        let script = matches!(node_type, "script" | "router");
        if script && self.lineage.interrupted.contains(&key) && !self.idempotent.contains(node_id) {
            events.push(RunEvent::Log {
                execution: None,
                stream: LogStream::System,
                level: LogLevel::Warn,
                message: format!(
                    "[{node_id}] visit {} was started by the previous run but never settled; it \
                     runs again, and the script is not declared idempotent (meta.{IDEMPOTENT_SCRIPTS}), \
                     so its effects may happen twice",
                    visit + 1
                ),
                timestamp_ms: trellis_ledger::store::now_ms(),
            });
        }
        events.push(RunEvent::GapNodeStarted {
            node: node_id.to_owned(),
            visit,
            node_type: node_type.to_owned(),
        });
        self.append(&events)
    }

    fn settled(&self, node_id: &str, visit: u32, outcome: SettledBody<'_>, recalled: bool) {
        let reused_from = recalled
            .then(|| {
                self.lineage
                    .settled
                    .get(&(node_id.to_owned(), visit))
                    .map(|(_, origin)| origin.clone())
            })
            .flatten();
        let event = RunEvent::GapNodeSettled {
            node: node_id.to_owned(),
            visit,
            outcome: self.recorded(outcome, reused_from),
        };
        // A refusal is remembered and reported at the run's end; the body already ran.
        let _ = self.append(&[event]);
    }
}

/// `value` with every secret masked in every string (keys included).
pub(crate) fn redact_value(redactor: &Redactor, value: &Value) -> Value {
    if redactor.is_empty() {
        return value.clone();
    }
    match value {
        Value::String(text) => Value::String(redactor.apply(text)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact_value(redactor, v)).collect())
        }
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (redactor.apply(k), redact_value(redactor, v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The redactor for a GaP run's declared secret variables (their current values).
pub(crate) fn secret_redactor(names: &[String]) -> Redactor {
    Redactor::new(names.iter().filter_map(|name| std::env::var(name).ok()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_are_masked_in_keys_and_nested_strings() {
        let redactor = Redactor::new(["canary-7f3a9"]);
        let value = json!({"k canary-7f3a9": ["x canary-7f3a9 y", 3, {"z": "canary-7f3a9"}]});
        let masked = redact_value(&redactor, &value);
        assert!(!masked.to_string().contains("canary-7f3a9"));
        assert_eq!(masked["k [REDACTED]"][2]["z"], json!("[REDACTED]"));
        assert_eq!(masked["k [REDACTED]"][1], json!(3));
    }
}
