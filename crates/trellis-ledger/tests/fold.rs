//! The materialized snapshot always equals the reference fold of the stored events, for random
//! event sequences (valid and invalid) appended one batch at a time — by one connection, and by
//! two connections to one file taking turns at random (each remembers what its own last append
//! left, which must never outlive another connection's append). The PostgreSQL leg checks
//! the same properties on one schema, a fresh run per case.

mod common;

use common::{TestLedger, completed, file_store, new_run, started};
use proptest::prelude::*;
use serde_json::json;
use trellis_graph::{WorkerErrorCode, WorkerOutcome};
use trellis_ledger::{
    Cursor, EventFilter, LogStream, RunEvent, RunStore, StoredEvent, TerminalResult, TokenUsage,
    VoidReason, fold_snapshot,
};

const NODES: [&str; 3] = ["plan", "build", "review"];

fn event_strategy() -> impl Strategy<Value = RunEvent> {
    let execution = 1u64..10;
    prop_oneof![
        2 => Just(RunEvent::RunStarted {}),
        6 => (execution.clone(), 0usize..3).prop_map(|(e, n)| started(e, NODES[n])),
        4 => execution.clone().prop_map(completed),
        1 => execution.clone().prop_map(|e| RunEvent::NodeCompleted {
            execution: e,
            outcome: WorkerOutcome::failure(WorkerErrorCode::Timeout),
            reused_from: None,
        settled_by: None,
        }),
        1 => (execution.clone(), any::<bool>()).prop_map(|(e, join)| RunEvent::ExecutionVoided {
            execution: e,
            reason: if join { VoidReason::ParallelJoin } else { VoidReason::MapTerminal },
        }),
        3 => (proptest::option::of(execution.clone()), "[ -~\n\t\u{1b}]{0,40}")
            .prop_map(|(e, text)| RunEvent::log(e, LogStream::Output, &text, 7)),
        2 => (execution, 0u64..1000, proptest::option::of(0.0f64..2.0)).prop_map(
            |(e, tokens, cost)| RunEvent::TokenUsage {
                execution: e,
                usage: TokenUsage {
                    input_tokens: tokens,
                    output_tokens: tokens / 2,
                    cache_read_tokens: 1,
                    cache_write_tokens: 0,
                    cost_usd: cost,
                },
            }
        ),
        1 => Just(RunEvent::ForceStopRequested {}),
        1 => (1u32..100_000).prop_map(|pid| RunEvent::ControllerAttached {
            pid,
            started_at_ms: 5,
            host: "h".to_owned(),
            boot_id: None,
        }),
        // GaP node events: refused in these GraphSpec runs whatever the state, and a refused
        // batch must store nothing (their acceptance is covered by the events tests).
        1 => (0usize..3, 0u32..3).prop_map(|(n, visit)| RunEvent::GapNodeStarted {
            node: NODES[n].to_owned(),
            visit,
            node_type: "script".to_owned(),
        }),
        1 => (0usize..3, 0u32..3).prop_map(|(n, visit)| RunEvent::GapNodeSettled {
            node: NODES[n].to_owned(),
            visit,
            outcome: trellis_ledger::GapNodeOutcome::Cancelled {},
        }),
        1 => any::<bool>().prop_map(|ok| RunEvent::Terminal {
            result: if ok {
                TerminalResult::Succeeded { output: json!({"n": 1}) }
            } else {
                TerminalResult::Failed { reason: "worker_failed".to_owned() }
            },
        }),
    ]
}

/// An instruction that becomes an event when applied, so that most generated events are valid
/// against the run's current state (and some are deliberately arbitrary).
#[derive(Debug, Clone)]
enum Op {
    /// Any event, often invalid in the current state.
    Raw(Box<RunEvent>),
    /// Start a fresh execution of a node.
    StartFresh(usize),
    /// Complete, fail or void the n-th active execution.
    Settle(usize, u8),
    /// Log or report tokens for the n-th active execution.
    Report(usize, bool),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => event_strategy().prop_map(|e| Op::Raw(Box::new(e))),
        4 => (0usize..3).prop_map(Op::StartFresh),
        4 => (0usize..8, 0u8..3).prop_map(|(n, how)| Op::Settle(n, how)),
        2 => (0usize..8, any::<bool>()).prop_map(|(n, log)| Op::Report(n, log)),
    ]
}

fn to_event(store: &dyn RunStore, run: &trellis_ledger::RunId, op: &Op) -> RunEvent {
    let snapshot = store.snapshot(run).unwrap();
    let active: Vec<u64> = snapshot
        .head
        .progress
        .active_executions
        .keys()
        .copied()
        .collect();
    let pick = |n: usize| active.get(n % active.len().max(1)).copied().unwrap_or(1);
    match op {
        Op::Raw(event) => (**event).clone(),
        Op::StartFresh(node) => {
            let next = snapshot.executions.keys().max().copied().unwrap_or(0) + 1;
            started(next, NODES[*node])
        }
        Op::Settle(n, 0) => completed(pick(*n)),
        Op::Settle(n, 1) => RunEvent::NodeCompleted {
            execution: pick(*n),
            outcome: WorkerOutcome::failure(WorkerErrorCode::Crash),
            reused_from: None,
            settled_by: None,
        },
        Op::Settle(n, _) => RunEvent::ExecutionVoided {
            execution: pick(*n),
            reason: VoidReason::ParallelJoin,
        },
        Op::Report(n, true) => RunEvent::log(Some(pick(*n)), LogStream::Error, "oops\r\n", 3),
        Op::Report(n, false) => RunEvent::TokenUsage {
            execution: pick(*n),
            usage: TokenUsage {
                input_tokens: 100,
                output_tokens: 10,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost_usd: Some(0.1),
            },
        },
    }
}

fn all_events(store: &dyn RunStore, run: &trellis_ledger::RunId) -> Vec<StoredEvent> {
    let mut events = Vec::new();
    let mut cursor = Cursor::START;
    loop {
        let page = store
            .events_after(run, cursor, 50, EventFilter::All)
            .unwrap();
        let Some(last) = page.last() else { break };
        cursor = last.cursor;
        events.extend(page);
    }
    events
}

/// Appends each batch through the writer it names and checks the stored snapshot against the
/// fold of the stored events after every batch.
fn check_batches(
    writers: &[&dyn RunStore],
    run: &trellis_ledger::RunId,
    start_first: bool,
    batches: &[(usize, Vec<Op>)],
) -> Result<(), TestCaseError> {
    let reader = writers[0];
    let record = reader.record(run).unwrap();
    let mut accepted = 0u64;
    if start_first {
        reader.append(run, &[RunEvent::RunStarted {}]).unwrap();
        accepted += 1;
    }
    for (writer, batch) in batches {
        let store = writers[writer % writers.len()];
        // Each op is resolved against the state before the batch, so later ops in a batch
        // may be invalid: that exercises whole-batch rejection.
        let events: Vec<RunEvent> = batch.iter().map(|op| to_event(store, run, op)).collect();
        let before = store.latest_cursor(run).unwrap();
        match store.append(run, &events) {
            Ok(cursor) => {
                accepted += events.len() as u64;
                prop_assert_eq!(cursor.sequence(), before.sequence() + events.len() as u64);
            }
            Err(error) => {
                prop_assert_eq!(error.code(), "event.invalid");
                prop_assert_eq!(store.latest_cursor(run).unwrap(), before);
            }
        }
        let events = all_events(reader, run);
        prop_assert_eq!(events.len() as u64, accepted);
        let folded = fold_snapshot(&record, &events).unwrap();
        for store in writers {
            prop_assert_eq!(&store.snapshot(run).unwrap(), &folded);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn two_writers_taking_turns_keep_the_snapshot_equal_to_the_fold(
        start_first in proptest::bool::weighted(0.9),
        batches in proptest::collection::vec(
            (0usize..2, proptest::collection::vec(op_strategy(), 1..4)),
            1..40,
        )
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite3");
        let first = file_store(&path);
        let second = file_store(&path);
        let (record, _) = first.create_or_get(new_run("run-1", "key-1", json!({"graph": "g"}))).unwrap();
        check_batches(&[&first, &second], &record.run_id, start_first, &batches)?;
    }

    #[test]
    fn stored_snapshot_equals_the_fold_of_stored_events(
        start_first in proptest::bool::weighted(0.9),
        batches in proptest::collection::vec(proptest::collection::vec(op_strategy(), 1..4), 1..40)
    ) {
        let ledger = TestLedger::sqlite();
        let (store, run) = common::store_with_run(&ledger);
        let batches: Vec<(usize, Vec<Op>)> = batches.into_iter().map(|batch| (0, batch)).collect();
        check_batches(&[&*store], &run, start_first, &batches)?;
    }
}

/// The same properties on PostgreSQL: one schema and one set of stores for all cases (a
/// schema per case would spend the time on migrations), a fresh run per case.
mod postgres {
    use std::cell::Cell;

    use proptest::test_runner::{Config, TestRunner};

    use super::*;

    const CASES: u32 = 48;

    fn check_on_postgres(writers: usize) {
        let Some(ledger) = TestLedger::postgres() else {
            eprintln!("skipped: set TRELLIS_TEST_POSTGRES_URL to run the PostgreSQL leg");
            return;
        };
        let stores: Vec<Box<dyn RunStore>> = (0..writers).map(|_| ledger.open()).collect();
        let stores: Vec<&dyn RunStore> = stores.iter().map(|store| &**store).collect();
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            source_file: Some(file!()),
            ..Config::default()
        });
        let case = Cell::new(0u32);
        let strategy = (
            proptest::bool::weighted(0.9),
            proptest::collection::vec(
                (0..writers, proptest::collection::vec(op_strategy(), 1..4)),
                1..40,
            ),
        );
        runner
            .run(&strategy, |(start_first, batches)| {
                case.set(case.get() + 1);
                let (record, _) = stores[0]
                    .create_or_get(new_run(
                        &format!("run-{}", case.get()),
                        &format!("key-{}", case.get()),
                        json!({"graph": "g"}),
                    ))
                    .unwrap();
                check_batches(&stores, &record.run_id, start_first, &batches)
            })
            .unwrap_or_else(|failure| panic!("{failure}"));
    }

    #[test]
    fn stored_snapshot_equals_the_fold_of_stored_events() {
        check_on_postgres(1);
    }

    #[test]
    fn two_writers_taking_turns_keep_the_snapshot_equal_to_the_fold() {
        check_on_postgres(2);
    }
}
