//! Histories that do not replay: both reducers must refuse them with an error, never panic
//! and never decide.

mod support;

use serde_json::{Value, json};
use support::*;
use trellis_engine::{
    ExecutionId, ExecutionRecord, ExecutionState, History, NodeInstanceId, Occurrence, Reducer,
    ReplayError, VoidReason, reduce,
};
use trellis_graph::{GraphSpec, NodeName, WorkerErrorCode, WorkerOutcome};
use trellis_run_model::Cursor;

fn linear() -> GraphSpec {
    graph(seq(
        "run",
        vec![
            writes(inputs(step("a"), &[("x", "state:x")]), &[("y", "a.out.y")]),
            attempts(inputs(step("b"), &[("y", "state:y")]), 2),
            succeed("done", &[]),
        ],
    ))
}

fn input() -> Value {
    json!({"x": 1})
}

struct R {
    id: u64,
    node: &'static str,
    indices: Vec<u32>,
    instance: u64,
    attempt: u32,
    input: Value,
    at: u64,
    state: ExecutionState,
}

impl R {
    fn new(id: u64, node: &'static str, input: Value, at: u64) -> Self {
        Self {
            id,
            node,
            indices: Vec::new(),
            instance: id,
            attempt: 1,
            input,
            at,
            state: ExecutionState::Active {},
        }
    }
    fn settled(mut self, at: u64, outcome: WorkerOutcome) -> Self {
        self.state = ExecutionState::completed(Cursor::at(at).expect("position"), 0, outcome);
        self
    }
    fn build(self) -> ExecutionRecord {
        ExecutionRecord {
            execution: ExecutionId(self.id),
            node_instance: NodeInstanceId(self.instance),
            occurrence: Occurrence {
                node: NodeName::new(self.node).unwrap(),
                map_indices: self.indices,
            },
            attempt: self.attempt,
            input: self.input,
            dispatched_at: self.at,
            state: self.state,
        }
    }
}

fn history(records: Vec<R>) -> History {
    History {
        executions: records.into_iter().map(R::build).collect(),
    }
}

/// The full replay's error, after checking the rebuilt incremental reducer also refuses.
fn refused(graph: &GraphSpec, input: &Value, history: &History) -> ReplayError {
    let rebuilt = Reducer::from_history(&runnable(graph), input, history).decide();
    assert!(rebuilt.is_err(), "incremental reducer accepted {history:?}");
    reduce(&runnable(graph), input, history).expect_err("full replay refuses")
}

#[test]
fn a_consistent_history_replays() {
    let h = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(2, ok(json!({"y": 5}))),
        R::new(2, "b", json!({"y": 5}), 3),
    ]);
    assert!(reduce(&runnable(&linear()), &input(), &h).is_ok());
    assert!(
        Reducer::from_history(&runnable(&linear()), &input(), &h)
            .decide()
            .is_ok()
    );
}

#[test]
fn an_execution_of_an_unknown_node_is_refused() {
    let h = history(vec![R::new(1, "ghost", json!(null), 1)]);
    assert_eq!(
        refused(&linear(), &input(), &h),
        ReplayError::UnknownNode(ExecutionId(1))
    );
}

#[test]
fn an_execution_the_graph_never_reaches_is_refused() {
    // b was dispatched while a is still running.
    let h = history(vec![
        R::new(1, "a", json!({"x": 1}), 1),
        R::new(2, "b", json!({"y": 5}), 2),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &h),
        ReplayError::UnconsumedExecution(ExecutionId(2))
    );
    assert_eq!(
        Reducer::from_history(&runnable(&linear()), &input(), &h).decide(),
        Err(ReplayError::UnexpectedDispatch(ExecutionId(2)))
    );
}

#[test]
fn an_execution_dispatched_before_its_node_was_reached_is_refused() {
    let h = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(3, ok(json!({"y": 5}))),
        R::new(2, "b", json!({"y": 5}), 2),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &h),
        ReplayError::DispatchedTooEarly(ExecutionId(2))
    );
}

#[test]
fn an_input_the_graph_does_not_bind_is_refused() {
    let h = history(vec![R::new(1, "a", json!({"x": 2}), 1)]);
    assert_eq!(
        refused(&linear(), &input(), &h),
        ReplayError::InputMismatch(ExecutionId(1))
    );
}

#[test]
fn wrong_occurrences_are_refused() {
    let mut deep = R::new(1, "a", json!({"x": 1}), 1);
    deep.indices = vec![0];
    assert_eq!(
        refused(&linear(), &input(), &history(vec![deep])),
        ReplayError::WrongOccurrenceDepth(ExecutionId(1))
    );

    let mapped = graph(seq(
        "run",
        vec![
            map("each", "state:items", 4, step("work")),
            succeed("done", &[]),
        ],
    ));
    let items = json!({"items": [1, 2]});
    let mut beyond = R::new(1, "work", json!(null), 1);
    beyond.indices = vec![5];
    assert_eq!(
        refused(&mapped, &items, &history(vec![beyond])),
        ReplayError::UnconsumedExecution(ExecutionId(1))
    );
}

#[test]
fn ids_positions_and_instances_must_be_consistent() {
    let duplicate = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(2, ok(json!({"y": 5}))),
        R::new(1, "b", json!({"y": 5}), 3),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &duplicate),
        ReplayError::DuplicateExecution(ExecutionId(1))
    );

    let backwards = history(vec![
        R::new(1, "a", json!({"x": 1}), 4).settled(3, ok(json!({"y": 5}))),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &backwards),
        ReplayError::InvalidPosition(ExecutionId(1))
    );

    let out_of_order = history(vec![
        R::new(1, "a", json!({"x": 1}), 5).settled(6, ok(json!({"y": 5}))),
        R::new(2, "b", json!({"y": 5}), 3),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &out_of_order),
        ReplayError::NotInDispatchOrder(ExecutionId(2))
    );

    let mut shared = R::new(2, "b", json!({"y": 5}), 3);
    shared.instance = 1;
    let shared_instance = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(2, ok(json!({"y": 5}))),
        shared,
    ]);
    assert_eq!(
        refused(&linear(), &input(), &shared_instance),
        ReplayError::NodeInstanceMismatch(ExecutionId(2))
    );
}

#[test]
fn retries_must_follow_crashes_with_the_next_attempt() {
    let first = || R::new(2, "b", json!({"y": 5}), 3).settled(4, error(WorkerErrorCode::Crash));
    let a = || R::new(1, "a", json!({"x": 1}), 1).settled(2, ok(json!({"y": 5})));

    let mut restarted = R::new(3, "b", json!({"y": 5}), 5);
    restarted.instance = 2;
    assert_eq!(
        refused(&linear(), &input(), &history(vec![a(), first(), restarted])),
        ReplayError::AttemptMismatch {
            execution: ExecutionId(3),
            expected: 2,
            actual: 1
        }
    );

    let mut after_timeout = R::new(3, "b", json!({"y": 5}), 5);
    after_timeout.instance = 2;
    after_timeout.attempt = 2;
    let timed_out = R::new(2, "b", json!({"y": 5}), 3).settled(4, error(WorkerErrorCode::Timeout));
    assert_eq!(
        refused(
            &linear(),
            &input(),
            &history(vec![a(), timed_out, after_timeout])
        ),
        ReplayError::UnconsumedExecution(ExecutionId(3))
    );
}

#[test]
fn voids_the_reducer_did_not_ask_for_are_refused() {
    let mut voided = R::new(1, "a", json!({"x": 1}), 1);
    voided.state = ExecutionState::Voided {
        at: Cursor::at(2).expect("position"),
        at_ms: 0,
        reason: VoidReason::ParallelJoin,
    };
    assert_eq!(
        refused(&linear(), &input(), &history(vec![voided])),
        ReplayError::UnexpectedVoid(ExecutionId(1))
    );

    // A legitimate loser voided with the wrong reason.
    let race = graph(seq(
        "run",
        vec![
            par(
                "race",
                json!({"kind": "any"}),
                vec![step("fast"), step("slow")],
            ),
            succeed("done", &[]),
        ],
    ));
    let mut slow = R::new(2, "slow", json!(null), 2);
    slow.state = ExecutionState::Voided {
        at: Cursor::at(4).expect("position"),
        at_ms: 0,
        reason: VoidReason::MapTerminal,
    };
    let h = history(vec![
        R::new(1, "fast", json!(null), 1).settled(3, ok(json!(null))),
        slow,
    ]);
    assert_eq!(
        refused(&race, &json!({}), &h),
        ReplayError::UnexpectedVoid(ExecutionId(2))
    );
}

#[test]
fn outcomes_must_fit_their_node_and_bindings() {
    let wrong_kind = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(2, verdict(&[], json!({"y": 1}), json!(null))),
    ]);
    assert_eq!(
        refused(&linear(), &input(), &wrong_kind),
        ReplayError::OutcomeKindMismatch(ExecutionId(1))
    );

    let missing = history(vec![
        R::new(1, "a", json!({"x": 1}), 1).settled(2, ok(json!({"z": 1}))),
    ]);
    assert!(matches!(
        refused(&linear(), &input(), &missing),
        ReplayError::MissingOutputPath { execution: ExecutionId(1), ref path, .. } if path == "a.out.y"
    ));
}

#[test]
fn missing_state_and_non_array_maps_are_errors_not_panics() {
    let unbound = graph(seq(
        "run",
        vec![inputs(step("a"), &[("x", "state:nope")]), succeed("d", &[])],
    ));
    assert!(matches!(
        reduce(&runnable(&unbound), &json!({}), &History::default()),
        Err(ReplayError::MissingStatePath { .. })
    ));
    assert!(
        Reducer::new(&runnable(&unbound), &json!({}))
            .decide()
            .is_err()
    );

    let scalar = graph(seq(
        "run",
        vec![map("each", "state:items", 2, step("w")), succeed("d", &[])],
    ));
    assert!(matches!(
        reduce(
            &runnable(&scalar),
            &json!({"items": 3}),
            &History::default()
        ),
        Err(ReplayError::MapOverNotArray(_))
    ));
    assert!(
        Reducer::new(&runnable(&scalar), &json!({"items": 3}))
            .decide()
            .is_err()
    );
}

#[test]
fn the_incremental_reducer_refuses_bad_changes_and_stays_poisoned() {
    let mut reducer = Reducer::new(&runnable(&linear()), &input());
    let a = R::new(1, "a", json!({"x": 1}), 1).build();
    reducer.apply(&a).unwrap();
    let settled = R::new(1, "a", json!({"x": 1}), 1)
        .settled(2, ok(json!({"y": 5})))
        .build();
    reducer.apply(&settled).unwrap();
    reducer.apply(&settled).unwrap(); // re-applying an unchanged record is a no-op
    let resettled = R::new(1, "a", json!({"x": 1}), 1)
        .settled(3, ok(json!({"y": 6})))
        .build();
    assert_eq!(
        reducer.apply(&resettled),
        Err(ReplayError::InvalidTransition(ExecutionId(1)))
    );
    assert_eq!(
        reducer.decide(),
        Err(ReplayError::InvalidTransition(ExecutionId(1)))
    );

    let mut late = Reducer::new(&runnable(&linear()), &input());
    late.apply(&R::new(1, "a", json!({"x": 1}), 5).build())
        .unwrap();
    let earlier = R::new(1, "a", json!({"x": 1}), 5)
        .settled(4, ok(json!({"y": 5})))
        .build();
    assert_eq!(
        late.apply(&earlier),
        Err(ReplayError::InvalidPosition(ExecutionId(1)))
    );
}
