//! The JSON shapes of the reducer's public types (camelCase, tagged) and their round trips.

use serde_json::{Value, json};
use trellis_engine::{ExecutionRecord, History, Reducer, Reduction, TerminalResult};

fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
    value: Value,
) -> T {
    let parsed: T = serde_json::from_value(value.clone()).expect("parses");
    assert_eq!(serde_json::to_value(&parsed).expect("serializes"), value);
    parsed
}

#[test]
fn history_records_use_camel_case_and_tagged_states() {
    let history: History = round_trip(json!({"executions": [
        {"execution": 1, "nodeInstance": 1, "occurrence": {"node": "work", "mapIndices": [0, 2]},
         "attempt": 1, "input": {"task": "t"}, "dispatchedAt": 3, "state": {"status": "active"}},
        {"execution": 2, "nodeInstance": 2, "occurrence": {"node": "check", "mapIndices": []},
         "attempt": 2, "input": null, "dispatchedAt": 5,
         "state": {"status": "completed", "at": "c1:6", "atMs": 0, "outcome":
            {"status": "error", "code": "crash", "reason": "declared_failure"}}},
        {"execution": 3, "nodeInstance": 3, "occurrence": {"node": "slow", "mapIndices": []},
         "attempt": 1, "input": null, "dispatchedAt": 7,
         "state": {"status": "voided", "at": "c1:9", "atMs": 0, "reason": "parallel_join"}}
    ]}));
    assert_eq!(history.latest_position(), 9);
    let unknown = json!({"execution": 1, "nodeInstance": 1,
        "occurrence": {"node": "w", "mapIndices": []}, "attempt": 1, "input": null,
        "dispatchedAt": 1, "state": {"status": "active"}, "extra": true});
    assert!(serde_json::from_value::<ExecutionRecord>(unknown).is_err());
}

#[test]
fn reductions_serialize_dispatches_voids_terminals_and_trace() {
    let reduction: Reduction = round_trip(json!({
    "dispatches": [{"execution": 4, "nodeInstance": 2, "occurrence": {"node": "w", "mapIndices": [1]},
                    "attempt": 1, "worker": "builtin.agent.worker@1", "input": {"x": 1}}],
    "voids": [{"execution": 3, "reason": "map_terminal"}],
    "terminal": null,
    "trace": [
        {"kind": "promote", "node": "w", "mapIndices": [1], "values": [{"path": ["x"], "value": 2}]},
        {"kind": "continue", "node": "w", "mapIndices": [1]}
    ]}));
    assert_eq!(
        reduction.dispatches[0].worker.as_str(),
        "builtin.agent.worker@1"
    );
    let succeeded: TerminalResult = round_trip(json!({"status": "succeeded", "output": {"a": 1}}));
    assert_eq!(
        succeeded,
        TerminalResult::Succeeded {
            output: json!({"a": 1})
        }
    );
    let failed: TerminalResult = round_trip(json!({"status": "failed", "reason": "worker_failed"}));
    assert_eq!(
        failed,
        TerminalResult::Failed {
            reason: "worker_failed".into()
        }
    );
}

#[test]
fn the_reducer_can_move_between_threads() {
    fn sendable<T: Send + Sync>() {}
    sendable::<Reducer>();
    sendable::<Reduction>();
}
