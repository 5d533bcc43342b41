//! The JSON Schema of one watch line ([`crate::WatchUpdate`]): what `trellis run --json` and
//! `trellis watch --json` print per event and the watch streams of `trellis ui` and
//! `trellis serve` send (`trellis schema watch-update`).

use serde_json::{Value, json};
use trellis_ledger::EventKind;

/// The schema's identifier.
const SCHEMA_ID: &str = "https://trellis.dev/schemas/watch-update/v1.json";

/// A closed object: `properties`, the names in `required`, nothing else.
fn closed(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}

/// A `status` object without a payload: `{"phase": <phase>}`.
fn bare_phase(phase: &str) -> Value {
    closed(json!({"phase": {"const": phase}}), &["phase"])
}

fn terminal_result() -> Value {
    json!({"oneOf": [
        closed(json!({"status": {"const": "succeeded"}, "output": {}}), &["status", "output"]),
        closed(json!({"status": {"const": "failed"}, "reason": {"type": "string"}}), &["status", "reason"]),
    ]})
}

fn token_usage() -> Value {
    closed(
        json!({
            "inputTokens": count(),
            "outputTokens": count(),
            "cacheReadTokens": count(),
            "cacheWriteTokens": count(),
            "costUsd": {"type": "number", "minimum": 0},
        }),
        &[
            "inputTokens",
            "outputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
        ],
    )
}

fn execution_summary() -> Value {
    closed(
        json!({
            "id": {"type": "integer", "minimum": 1},
            "reference": {"type": "string", "pattern": "^ex-[0-9a-f]{64}$"},
            "node": {"type": "string"},
            "mapIndices": {"type": "array", "items": count()},
            "attempt": {"type": "integer", "minimum": 1},
            "worker": {"type": "string"},
            "phase": {"enum": ["active", "completed", "voided"]},
            "outcome": closed(json!({
                "status": {"enum": ["verified", "verifier", "error"]},
                "code": {"enum": ["timeout", "crash", "malformed", "refusal"]},
                "signals": {"type": "object", "additionalProperties": {"type": "string"}},
            }), &["status"]),
            "startedAtMs": count(),
            "endedAtMs": count(),
            "tokenUsage": token_usage(),
            "reusedFrom": {"type": "string"},
            "settledBy": {"enum": ["runtime_lost", "force_stop", "budget_exhausted", "killed_from_outside", "worker_lost"]},
            "voidReason": {"enum": ["parallel_join", "map_terminal"]},
        }),
        &[
            "id",
            "reference",
            "node",
            "mapIndices",
            "attempt",
            "worker",
            "phase",
            "startedAtMs",
        ],
    )
}

/// The JSON Schema (draft 2020-12) of one watch line.
pub fn watch_update_json_schema() -> Value {
    let events: Vec<&str> = EventKind::ALL
        .iter()
        .filter(|kind| **kind != EventKind::Log)
        .map(|kind| kind.as_str())
        .collect();
    let mut schema = closed(
        json!({
            "runId": {"type": "string"},
            "title": {"type": "string"},
            "cursor": {"type": "string", "pattern": "^c1:[0-9]+$"},
            "event": {"enum": events},
            "atMs": count(),
            "status": {
                "description": "The run's phase right after the event; the result once finished. `trellis status` lists the active executions.",
                "oneOf": [
                    bare_phase("admitted"),
                    bare_phase("running"),
                    bare_phase("stopping"),
                    closed(
                        json!({"phase": {"const": "finished"}, "terminalResult": terminal_result()}),
                        &["phase", "terminalResult"],
                    ),
                ],
            },
            "counts": {
                "description": "Executions (GaP bodies for a GaP run) running and settled right after the event.",
                "allOf": [closed(json!({"active": count(), "settled": count()}), &["active", "settled"])],
            },
            "execution": {
                "description": "The execution the event concerns, as it stood right after it.",
                "allOf": [execution_summary()],
            },
        }),
        &[
            "runId", "title", "cursor", "event", "atMs", "status", "counts",
        ],
    );
    if let Some(object) = schema.as_object_mut() {
        let mut head = serde_json::Map::new();
        head.insert(
            "$schema".to_owned(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        head.insert("$id".to_owned(), json!(SCHEMA_ID));
        head.insert("title".to_owned(), json!("Trellis watch update"));
        head.insert(
            "description".to_owned(),
            json!("One line of `trellis run --json` / `trellis watch --json` after the `{\"runId\"}` receipt, and one event of the run API's watch stream: what one ledger event changed."),
        );
        head.append(object);
        *object = head;
    }
    schema
}
