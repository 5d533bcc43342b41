//! The run-state transition table, pair by pair: for every phase and every kind of event, a
//! real store holding a run in that phase either refuses the event or moves the run to the
//! phase the table names — and `transition` says the same.

use serde_json::{Value, json};
use trellis_graph::{NodeName, WorkerOutcome};
use trellis_ledger::{
    EventKind, GapNodeOutcome, LedgerError, LogLevel, LogStream, NewRun, Phase, RunEvent, RunId,
    RunKind, RunStore, SqliteStore, TerminalResult, TokenUsage, transition,
};

/// The table, written out: per phase, the phase each kind leads to (`None`: refused), in the
/// order of `EventKind::ALL`.
const TABLE: [(Phase, [Option<Phase>; 14]); 4] = {
    use Phase::{Admitted as A, Finished as F, Running as R, Stopping as S};
    [
        //  run_started, controller_attached, node_started, node_completed, execution_voided,
        //  log, worker_process, token_usage, force_stop_requested, terminal, gap_event,
        //  checkpoint_taken, gap_node_started, gap_node_settled
        (
            A,
            [
                Some(R),
                Some(A),
                None,
                None,
                None,
                Some(A),
                None,
                None,
                Some(S),
                Some(F),
                Some(A),
                None,
                None,
                None,
            ],
        ),
        (
            R,
            [
                None,
                Some(R),
                Some(R),
                Some(R),
                Some(R),
                Some(R),
                Some(R),
                Some(R),
                Some(S),
                Some(F),
                Some(R),
                Some(R),
                Some(R),
                Some(R),
            ],
        ),
        (
            S,
            [
                None,
                Some(S),
                None,
                Some(S),
                Some(S),
                Some(S),
                Some(S),
                Some(S),
                None,
                Some(F),
                Some(S),
                None,
                None,
                Some(S),
            ],
        ),
        (F, [None; 14]),
    ]
};

/// Whether an event of `kind` names execution 1, which the setup then provides.
fn names_an_execution(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::NodeCompleted
            | EventKind::ExecutionVoided
            | EventKind::WorkerProcess
            | EventKind::TokenUsage
    )
}

fn started(execution: u64) -> RunEvent {
    RunEvent::NodeStarted {
        execution,
        node_instance: execution,
        node: NodeName::new("work").unwrap(),
        map_indices: vec![],
        attempt: 1,
        input: Value::Null,
        worker: "command.work@1".to_owned(),
    }
}

fn completed(execution: u64) -> RunEvent {
    RunEvent::NodeCompleted {
        execution,
        outcome: WorkerOutcome::Verified {
            output: Value::Null,
            artifacts: vec![],
        },
        reused_from: None,
        settled_by: None,
    }
}

/// A valid event of `kind` (execution 1 where one is named, 2 for a new start).
fn event_of(kind: EventKind) -> RunEvent {
    match kind {
        EventKind::RunStarted => RunEvent::RunStarted {},
        EventKind::ControllerAttached => RunEvent::ControllerAttached {
            pid: 42,
            started_at_ms: 1,
            host: "host".to_owned(),
            boot_id: None,
        },
        EventKind::NodeStarted => started(2),
        EventKind::NodeCompleted => completed(1),
        EventKind::ExecutionVoided => RunEvent::ExecutionVoided {
            execution: 1,
            reason: trellis_ledger::VoidReason::ParallelJoin,
        },
        EventKind::Log => RunEvent::Log {
            execution: None,
            stream: LogStream::System,
            level: LogLevel::Info,
            message: "note".to_owned(),
            timestamp_ms: 1,
        },
        EventKind::WorkerProcess => RunEvent::WorkerProcess {
            execution: 1,
            process_group: 7,
        },
        EventKind::TokenUsage => RunEvent::TokenUsage {
            execution: 1,
            usage: TokenUsage {
                input_tokens: 3,
                ..TokenUsage::default()
            },
        },
        EventKind::ForceStopRequested => RunEvent::ForceStopRequested {},
        EventKind::Terminal => RunEvent::Terminal {
            result: TerminalResult::Succeeded { output: json!(1) },
        },
        EventKind::GapEvent => RunEvent::GapEvent {
            payload: json!({"event": "node_started"}),
        },
        EventKind::CheckpointTaken => RunEvent::CheckpointTaken {
            number: 1,
            commit: "c".repeat(40),
            tree: "a".repeat(40),
            before: trellis_ledger::CheckpointBefore {
                kind: trellis_ledger::CheckpointBeforeKind::Node,
                name: NodeName::new("work").unwrap(),
            },
            next_execution: 2,
            files_changed: 1,
            bytes_changed: 5,
            timestamp_ms: 1,
        },
        EventKind::GapNodeStarted => RunEvent::GapNodeStarted {
            node: "pick.grasp".to_owned(),
            visit: 0,
            node_type: "script".to_owned(),
        },
        EventKind::GapNodeSettled => RunEvent::GapNodeSettled {
            node: "pick.grasp".to_owned(),
            visit: 0,
            outcome: GapNodeOutcome::Succeeded {
                output: Some(json!({"ok": true})),
                omitted_bytes: None,
                reused_from: None,
            },
        },
    }
}

/// The events that bring a fresh run to `phase`, with execution 1 active (or, once finished,
/// settled) when `with_execution`.
fn setup(phase: Phase, with_execution: bool) -> Vec<RunEvent> {
    let mut events = Vec::new();
    if phase == Phase::Admitted {
        return events;
    }
    events.push(RunEvent::RunStarted {});
    if with_execution {
        events.push(started(1));
    }
    match phase {
        Phase::Stopping => events.push(RunEvent::ForceStopRequested {}),
        Phase::Finished => {
            if with_execution {
                events.push(completed(1));
            }
            events.push(RunEvent::Terminal {
                result: TerminalResult::Failed {
                    reason: "worker_failed".to_owned(),
                },
            });
        }
        _ => {}
    }
    events
}

#[test]
fn every_phase_and_event_pair_follows_the_table() {
    let store = SqliteStore::open_in_memory().unwrap();
    let mut checked = 0;
    for (phase, row) in TABLE {
        for (kind, expected) in EventKind::ALL.into_iter().zip(row) {
            let pair = format!("{} in {}", kind.as_str(), phase.as_str());
            assert_eq!(transition(phase, kind).ok(), expected, "{pair}: transition");

            let run_id = RunId::new(&format!("run-{checked}")).unwrap();
            let run_kind = if matches!(
                kind,
                EventKind::GapEvent | EventKind::GapNodeStarted | EventKind::GapNodeSettled
            ) {
                RunKind::Gap
            } else {
                RunKind::Graphspec
            };
            let run = NewRun::new(run_id.clone(), run_id.as_str(), "t", run_kind, json!({}));
            store.create_or_get(run).unwrap();
            let before = setup(phase, names_an_execution(kind));
            if !before.is_empty() {
                store.append(&run_id, &before).unwrap();
            }
            assert_eq!(store.head(&run_id).unwrap().phase(), phase, "{pair}: setup");

            let outcome = store.append(&run_id, &[event_of(kind)]);
            let after = store.head(&run_id).unwrap().phase();
            match (expected, outcome) {
                (Some(next), Ok(_)) => assert_eq!(after, next, "{pair}"),
                (None, Err(LedgerError::InvalidEvent { .. })) => {
                    assert_eq!(after, phase, "{pair}: a refusal changes nothing")
                }
                (expected, outcome) => {
                    panic!("{pair}: expected {expected:?}, the store said {outcome:?}")
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, Phase::ALL.len() * EventKind::ALL.len());
}

#[test]
fn the_table_covers_every_phase_once() {
    let phases: Vec<Phase> = TABLE.iter().map(|(phase, _)| *phase).collect();
    assert_eq!(phases, Phase::ALL);
}

#[test]
fn a_checkpoint_is_refused_while_work_runs_or_without_object_ids() {
    let store = SqliteStore::open_in_memory().unwrap();
    let run_id = RunId::new("run-checkpoint").unwrap();
    let run = NewRun::new(run_id.clone(), "key", "t", RunKind::Graphspec, json!({}));
    store.create_or_get(run).unwrap();
    store
        .append(&run_id, &[RunEvent::RunStarted {}, started(1)])
        .unwrap();
    let checkpoint = event_of(EventKind::CheckpointTaken);
    assert!(matches!(
        store.append(&run_id, std::slice::from_ref(&checkpoint)),
        Err(LedgerError::InvalidEvent { .. })
    ));
    store.append(&run_id, &[completed(1)]).unwrap();
    let RunEvent::CheckpointTaken { before, .. } = checkpoint.clone() else {
        unreachable!()
    };
    let bad = RunEvent::CheckpointTaken {
        number: 1,
        commit: "HEAD".to_owned(),
        tree: "a".repeat(40),
        before,
        next_execution: 2,
        files_changed: 0,
        bytes_changed: 0,
        timestamp_ms: 1,
    };
    assert!(store.append(&run_id, &[bad]).is_err());
    store.append(&run_id, &[checkpoint, started(2)]).unwrap();
}
