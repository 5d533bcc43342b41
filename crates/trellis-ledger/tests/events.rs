//! Event validation: every rule of the vocabulary, batch atomicity and normalization.

#[macro_use]
mod common;

use common::{completed, failed, new_run, started, store_with_run, succeeded};
use serde_json::json;
use trellis_ledger::limits::{MAX_EVENT_JSON_BYTES, MAX_LOG_MESSAGE_BYTES};
use trellis_ledger::{
    Cursor, EventFilter, ExecutionState, LedgerError, LogLevel, LogStream, Phase, RunEvent, RunId,
    RunKind, RunStore, TerminalResult, TokenUsage, VoidReason,
};

fn rejected(store: &dyn RunStore, run: &RunId, events: &[RunEvent]) -> (usize, String) {
    let before = store.snapshot(run).unwrap();
    match store.append(run, events) {
        Err(LedgerError::InvalidEvent { index, reason }) => {
            // A rejected batch stores nothing at all.
            assert_eq!(store.snapshot(run).unwrap(), before);
            (index, reason)
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn running(ledger: &common::TestLedger) -> (Box<dyn RunStore>, RunId) {
    let (store, run) = store_with_run(ledger);
    store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
    (store, run)
}

backend_tests! {
    fn sequences_increase_by_one_per_event(ledger) {
        let (store, run) = store_with_run(ledger);
        assert_eq!(store.latest_cursor(&run).unwrap(), Cursor::START);
        let cursor = store
            .append(&run, &[RunEvent::RunStarted {}, started(1, "a")])
            .unwrap();
        assert_eq!(cursor.to_string(), "c1:2");
        assert_eq!(store.append(&run, &[completed(1)]).unwrap().sequence(), 3);
        let events = store
            .events_after(&run, Cursor::START, 100, EventFilter::All)
            .unwrap();
        let sequences: Vec<u64> = events.iter().map(|e| e.cursor.sequence()).collect();
        assert_eq!(sequences, [1, 2, 3]);
        assert_eq!(store.append(&run, &[]).unwrap(), cursor.next().unwrap());
    }

    fn run_started_only_once_and_only_from_admitted(ledger) {
        let (store, run) = running(ledger);
        let (_, reason) = rejected(&*store, &run, &[RunEvent::RunStarted {}]);
        assert!(reason.contains("admitted"), "{reason}");
    }

    fn node_started_needs_a_running_run_and_a_fresh_positive_execution(ledger) {
        let (store, run) = store_with_run(ledger);
        rejected(&*store, &run, &[started(1, "a")]);
        store
            .append(&run, &[RunEvent::RunStarted {}, started(1, "a")])
            .unwrap();
        let (_, reason) = rejected(&*store, &run, &[started(1, "b")]);
        assert!(reason.contains("already started"), "{reason}");
        store.append(&run, &[completed(1)]).unwrap();
        // Settled ids stay taken.
        rejected(&*store, &run, &[started(1, "b")]);
        rejected(&*store, &run, &[started(0, "b")]);
        let mut bad_worker = started(2, "b");
        if let RunEvent::NodeStarted { worker, .. } = &mut bad_worker {
            *worker = String::new();
        }
        rejected(&*store, &run, &[bad_worker]);
    }

    fn execution_numbers_stay_taken_whichever_connection_and_order_starts_them(ledger) {
        let first = ledger.open();
        let (record, _) = first
            .create_or_get(new_run("run-1", "key-1", json!({"graph": "g"})))
            .unwrap();
        let run = record.run_id;
        first
            .append(&run, &[RunEvent::RunStarted {}, started(5, "a")])
            .unwrap();
        first.append(&run, &[completed(5)]).unwrap();
        // Below the highest number but never used: accepted, then taken.
        first.append(&run, &[started(3, "b")]).unwrap();
        rejected(&*first, &run, &[started(3, "b")]);
        rejected(&*first, &run, &[started(5, "b")]);
        // A second connection knows nothing of the first one's appends.
        let second = ledger.open();
        rejected(&*second, &run, &[started(5, "c")]);
        rejected(&*second, &run, &[started(3, "c")]);
        second.append(&run, &[started(4, "c")]).unwrap();
        // The first connection's memory of the run is stale now and must not be trusted.
        rejected(&*first, &run, &[started(4, "d")]);
        first.append(&run, &[started(6, "d")]).unwrap();
        rejected(&*second, &run, &[started(6, "e")]);
    }

    fn settling_needs_an_active_execution(ledger) {
        let (store, run) = running(ledger);
        let (_, reason) = rejected(&*store, &run, &[completed(7)]);
        assert!(reason.contains("not active"), "{reason}");
        store
            .append(&run, &[started(7, "a"), completed(7)])
            .unwrap();
        rejected(&*store, &run, &[completed(7)]);
        let void = RunEvent::ExecutionVoided {
            execution: 7,
            reason: VoidReason::ParallelJoin,
        };
        rejected(&*store, &run, &[void]);
    }

    fn voided_executions_record_their_reason(ledger) {
        let (store, run) = running(ledger);
        let void = RunEvent::ExecutionVoided {
            execution: 4,
            reason: VoidReason::MapTerminal,
        };
        let cursor = store.append(&run, &[started(4, "m"), void]).unwrap();
        let snapshot = store.snapshot(&run).unwrap();
        assert!(snapshot.head.progress.active_executions.is_empty());
        match &snapshot.executions[&4].state {
            ExecutionState::Voided { at, reason, .. } => {
                assert_eq!(*at, cursor);
                assert_eq!(*reason, VoidReason::MapTerminal);
            }
            other => panic!("{other:?}"),
        }
    }

    fn a_bad_event_rejects_the_whole_batch_and_names_its_index(ledger) {
        let (store, run) = running(ledger);
        let (index, _) = rejected(
            &*store,
            &run,
            &[started(1, "a"), started(2, "b"), completed(9)],
        );
        assert_eq!(index, 2);
        assert_eq!(store.latest_cursor(&run).unwrap().sequence(), 1);
        assert!(store.snapshot(&run).unwrap().executions.is_empty());
        // The ids of the rejected batch are still free.
        store.append(&run, &[started(1, "a")]).unwrap();
    }

    fn nothing_follows_the_terminal_event(ledger) {
        let (store, run) = running(ledger);
        store.append(&run, &[succeeded()]).unwrap();
        for event in [
            RunEvent::log(None, LogStream::System, "late", 1),
            RunEvent::ForceStopRequested {},
            started(1, "a"),
            failed("again"),
        ] {
            let (_, reason) = rejected(&*store, &run, &[event]);
            assert!(reason.contains("finished"), "{reason}");
        }
        let head = store.head(&run).unwrap();
        assert_eq!(head.phase(), Phase::Finished);
        assert!(head.progress.finished_at_ms.is_some());
    }

    fn terminal_needs_no_active_executions_and_a_label_reason(ledger) {
        let (store, run) = running(ledger);
        store.append(&run, &[started(1, "a")]).unwrap();
        rejected(&*store, &run, &[failed("worker_failed")]);
        store.append(&run, &[completed(1)]).unwrap();
        for bad in ["", "has space", "1digit", &"r".repeat(129)] {
            rejected(&*store, &run, &[failed(bad)]);
        }
        store.append(&run, &[failed("runtime_lost")]).unwrap();
        assert_eq!(
            store.head(&run).unwrap().progress.terminal,
            Some(TerminalResult::Failed {
                reason: "runtime_lost".to_owned()
            })
        );
    }

    fn force_stop_blocks_new_dispatches_but_lets_executions_settle(ledger) {
        let (store, run) = running(ledger);
        store
            .append(&run, &[started(1, "a"), RunEvent::ForceStopRequested {}])
            .unwrap();
        assert_eq!(store.head(&run).unwrap().phase(), Phase::Stopping);
        let (_, reason) = rejected(&*store, &run, &[started(2, "b")]);
        assert!(reason.contains("force-stop"), "{reason}");
        rejected(&*store, &run, &[RunEvent::ForceStopRequested {}]);
        store
            .append(&run, &[completed(1), failed("force_stopped")])
            .unwrap();
    }

    fn request_force_stop_is_idempotent_and_a_no_op_after_the_end(ledger) {
        let (store, run) = running(ledger);
        let head = store.request_force_stop(&run).unwrap();
        assert!(head.progress.force_stop_requested);
        assert_eq!(head.cursor.sequence(), 2);
        let again = store.request_force_stop(&run).unwrap();
        assert_eq!(again.cursor, head.cursor);
        store.append(&run, &[failed("force_stopped")]).unwrap();
        let finished = store.request_force_stop(&run).unwrap();
        assert_eq!(finished.phase(), Phase::Finished);
        assert_eq!(
            finished.cursor.sequence(),
            3,
            "nothing appended after the end"
        );
    }

    fn append_at_refuses_a_moved_run(ledger) {
        let (store, run) = running(ledger);
        let at_one = store.latest_cursor(&run).unwrap();
        store.append_at(&run, at_one, &[started(1, "a")]).unwrap();
        let error = store
            .append_at(&run, at_one, &[started(2, "b")])
            .unwrap_err();
        assert!(matches!(error, LedgerError::StaleCursor { .. }), "{error}");
        assert_eq!(error.code(), "cursor.stale");
    }

    fn logs_are_sanitized_on_the_way_in_and_must_name_known_executions(ledger) {
        let (store, run) = running(ledger);
        let raw = RunEvent::Log {
            execution: None,
            stream: LogStream::Output,
            level: LogLevel::Info,
            message: format!("\u{1b}[2J{}", "x".repeat(MAX_LOG_MESSAGE_BYTES)),
            timestamp_ms: 5,
        };
        store.append(&run, &[raw]).unwrap();
        let stored = store
            .events_after(&run, Cursor::START, 10, EventFilter::LogsOnly)
            .unwrap();
        let RunEvent::Log { message, .. } = &stored[0].event else {
            panic!("not a log");
        };
        assert!(message.starts_with("\\u{1b}[2J"));
        assert!(message.len() <= MAX_LOG_MESSAGE_BYTES);
        assert!(message.contains("truncated"));

        let (_, reason) = rejected(
            &*store,
            &run,
            &[RunEvent::log(Some(3), LogStream::Error, "x", 1)],
        );
        assert!(reason.contains("unknown execution"), "{reason}");
        store
            .append(
                &run,
                &[
                    started(3, "a"),
                    RunEvent::log(Some(3), LogStream::Error, "x", 1),
                ],
            )
            .unwrap();
    }

    fn token_usage_accumulates_per_execution_and_per_run(ledger) {
        let (store, run) = running(ledger);
        let usage = |input, cost| RunEvent::TokenUsage {
            execution: 1,
            usage: TokenUsage {
                input_tokens: input,
                output_tokens: 2,
                cache_read_tokens: 3,
                cache_write_tokens: 4,
                cost_usd: cost,
            },
        };
        rejected(&*store, &run, &[usage(1, None)]);
        store
            .append(
                &run,
                &[started(1, "a"), usage(10, None), usage(5, Some(0.25))],
            )
            .unwrap();
        let snapshot = store.snapshot(&run).unwrap();
        let total = snapshot.head.progress.token_usage;
        assert_eq!(total.input_tokens, 15);
        assert_eq!(total.output_tokens, 4);
        assert_eq!(total.cost_usd, Some(0.25));
        assert_eq!(snapshot.executions[&1].token_usage, Some(total));
        rejected(&*store, &run, &[usage(1, Some(f64::NAN))]);
        rejected(&*store, &run, &[usage(1, Some(-1.0))]);
    }

    fn controller_attachment_is_recorded_with_its_cursor(ledger) {
        let (store, run) = store_with_run(ledger);
        let attach = RunEvent::ControllerAttached {
            pid: 4242,
            started_at_ms: 99,
            host: "builder".to_owned(),
            boot_id: Some("b0".to_owned()),
        };
        let cursor = store.append(&run, &[attach]).unwrap();
        let controller = store.head(&run).unwrap().progress.controller.unwrap();
        assert_eq!((controller.pid, controller.started_at_ms), (4242, 99));
        assert_eq!(controller.attached_at, cursor);
        let nameless = RunEvent::ControllerAttached {
            pid: 1,
            started_at_ms: 0,
            host: "a\nb".to_owned(),
            boot_id: None,
        };
        rejected(&*store, &run, &[nameless]);
    }

    fn gap_events_belong_to_gap_runs(ledger) {
        let (store, graphspec) = store_with_run(ledger);
        let progress = RunEvent::GapEvent {
            payload: json!({"type": "node_entered", "node": "pack"}),
        };
        rejected(&*store, &graphspec, std::slice::from_ref(&progress));
        let mut gap = new_run("gap-1", "gap-key", json!({"workflow": {}}));
        gap.kind = RunKind::Gap;
        gap.submission_digest = gap.compute_digest();
        let (record, _) = store.create_or_get(gap).unwrap();
        store
            .append(&record.run_id, &[RunEvent::RunStarted {}, progress])
            .unwrap();
    }

    fn gap_node_events_are_journaled_in_gap_runs_and_read_back_whole(ledger) {
        let (store, graphspec) = store_with_run(ledger);
        let dispatched = RunEvent::GapNodeStarted {
            node: "pick.grasp".to_owned(),
            visit: 2,
            node_type: "script".to_owned(),
        };
        rejected(&*store, &graphspec, std::slice::from_ref(&dispatched));
        let mut gap = new_run("gap-2", "gap-key-2", json!({"workflow": {}}));
        gap.kind = RunKind::Gap;
        gap.submission_digest = gap.compute_digest();
        let (record, _) = store.create_or_get(gap).unwrap();
        let run = record.run_id.clone();
        let settled = RunEvent::GapNodeSettled {
            node: "pick.grasp".to_owned(),
            visit: 2,
            outcome: trellis_ledger::GapNodeOutcome::Succeeded {
                output: Some(json!({"route": "done", "n": [1, 2]})),
                omitted_bytes: None,
                reused_from: Some(RunId::new("earlier").unwrap()),
            },
        };
        let failed = RunEvent::GapNodeSettled {
            node: "<send>.place#0".to_owned(),
            visit: 0,
            outcome: trellis_ledger::GapNodeOutcome::Failed {
                error: "Node failed: ValueError".to_owned(),
            },
        };
        // Not before the run started: nothing is dispatched in an admitted run.
        rejected(&*store, &run, std::slice::from_ref(&dispatched));
        let events = [RunEvent::RunStarted {}, dispatched.clone(), settled, failed];
        store.append(&run, &events).unwrap();
        let stored: Vec<RunEvent> = store
            .events_after(&run, Cursor::START, 10, EventFilter::All)
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(stored, events);
        let snapshot = store.snapshot(&run).unwrap();
        let folded = trellis_ledger::fold_snapshot(
            &record,
            &store.events_after(&run, Cursor::START, 10, EventFilter::All).unwrap(),
        )
        .unwrap();
        assert_eq!(snapshot, folded);
        assert_eq!(snapshot.head.progress.auxiliary_events, 3);
        // A node id is a bounded printable label.
        for node in [String::new(), "a\nb".to_owned(), "n".repeat(513)] {
            let bad = RunEvent::GapNodeStarted {
                node,
                visit: 0,
                node_type: "tool".to_owned(),
            };
            rejected(&*store, &run, &[bad]);
        }
        // After a stop request no body may be dispatched, but one may still settle.
        store.request_force_stop(&run).unwrap();
        rejected(&*store, &run, std::slice::from_ref(&dispatched));
        let cancelled = RunEvent::GapNodeSettled {
            node: "pick.grasp".to_owned(),
            visit: 3,
            outcome: trellis_ledger::GapNodeOutcome::Cancelled {},
        };
        store.append(&run, &[cancelled]).unwrap();
    }

    fn oversized_events_are_rejected(ledger) {
        let (store, run) = running(ledger);
        let mut big = started(1, "a");
        if let RunEvent::NodeStarted { input, .. } = &mut big {
            *input = json!("x".repeat(MAX_EVENT_JSON_BYTES));
        }
        let (index, reason) = rejected(&*store, &run, &[started(2, "b"), big]);
        assert_eq!(index, 1);
        assert!(reason.contains("bytes"), "{reason}");
    }

    fn appending_to_an_unknown_run_is_run_not_found(ledger) {
        let store = ledger.open();
        let ghost = RunId::new("ghost").unwrap();
        let error = store
            .append(&ghost, &[RunEvent::RunStarted {}])
            .unwrap_err();
        assert_eq!(
            error,
            LedgerError::RunNotFound {
                run_id: "ghost".to_owned()
            }
        );
        assert_eq!(error.code(), "run.not_found");
    }

    fn runs_appended_in_turns_keep_their_own_events_executions_and_cursors(ledger) {
        let (store, first) = running(ledger);
        let (second, _) = store
            .create_or_get(new_run("run-2", "key-2", json!({"graph": "h"})))
            .unwrap();
        let second = second.run_id;
        store.append(&second, &[RunEvent::RunStarted {}]).unwrap();
        for execution in 1..=5 {
            store.append(&first, &[started(execution, "a")]).unwrap();
            store.append(&second, &[started(execution, "b")]).unwrap();
            store.append(&second, &[completed(execution)]).unwrap();
        }
        let sequences = |run: &RunId, filter| -> Vec<u64> {
            store
                .events_after(run, Cursor::START, 100, filter)
                .unwrap()
                .iter()
                .map(|event| event.cursor.sequence())
                .collect()
        };
        assert_eq!(
            sequences(&first, EventFilter::All),
            (1..=6).collect::<Vec<_>>()
        );
        assert_eq!(
            sequences(&second, EventFilter::All),
            (1..=11).collect::<Vec<_>>()
        );
        let first_snapshot = store.snapshot(&first).unwrap();
        let second_snapshot = store.snapshot(&second).unwrap();
        assert_eq!(first_snapshot.executions.len(), 5);
        assert!(
            first_snapshot
                .executions
                .values()
                .all(|e| e.state.is_active())
        );
        assert!(
            first_snapshot
                .executions
                .values()
                .all(|e| e.node.as_str() == "a")
        );
        assert_eq!(second_snapshot.executions.len(), 5);
        assert!(
            second_snapshot
                .executions
                .values()
                .all(|e| !e.state.is_active())
        );
        // Reading after the last event of one run never reaches into the next run's rows.
        let after_first = store
            .events_after(&first, Cursor::at(6).unwrap(), 100, EventFilter::All)
            .unwrap();
        assert!(after_first.is_empty());
    }

    fn progress_appends_are_validated_and_ordered_like_any_other(ledger) {
        // What a running execution reports (its process group, its lines) may be committed
        // without waiting for the disk, but it is the same append: numbered in turn with the
        // durable ones, folded into the snapshot, refused whole when invalid.
        let (store, run) = running(ledger);
        store.append(&run, &[started(1, "a")]).unwrap();
        let progress = [
            RunEvent::WorkerProcess { execution: 1, process_group: 4242 },
            RunEvent::log(Some(1), LogStream::Output, "working", 1),
        ];
        assert_eq!(store.append_progress(&run, &progress).unwrap().sequence(), 4);
        let before = store.snapshot(&run).unwrap();
        assert_eq!(before.executions[&1].process_group, Some(4242));
        let unknown = [RunEvent::log(Some(9), LogStream::Output, "who?", 2)];
        assert!(matches!(
            store.append_progress(&run, &unknown),
            Err(LedgerError::InvalidEvent { index: 0, .. })
        ));
        assert_eq!(store.snapshot(&run).unwrap(), before);
        assert_eq!(store.append(&run, &[completed(1)]).unwrap().sequence(), 5);
        let sequences: Vec<u64> = store
            .events_after(&run, Cursor::START, 100, EventFilter::All)
            .unwrap()
            .iter()
            .map(|e| e.cursor.sequence())
            .collect();
        assert_eq!(sequences, [1, 2, 3, 4, 5]);
        // Another store on the same ledger reads what the progress append stored.
        let other = ledger.open();
        assert_eq!(other.snapshot(&run).unwrap(), store.snapshot(&run).unwrap());
    }
}
