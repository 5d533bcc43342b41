//! Cursors and live reading: strictly-after semantics, filters, paging, errors, waiting.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{completed, started, store_with_run, succeeded};
use trellis_ledger::observe::EventFollower;
use trellis_ledger::{Cursor, EventFilter, LedgerError, LogStream, RunEvent};

fn log(text: &str) -> RunEvent {
    RunEvent::log(None, LogStream::Output, text, 0)
}

backend_tests! {
    fn events_after_is_strictly_after_the_cursor(ledger) {
        let (store, run) = store_with_run(ledger);
        store
            .append(
                &run,
                &[
                    RunEvent::RunStarted {},
                    started(1, "a"),
                    log("x"),
                    completed(1),
                ],
            )
            .unwrap();
        let after_two = store
            .events_after(&run, Cursor::parse("c1:2").unwrap(), 100, EventFilter::All)
            .unwrap();
        let kinds: Vec<&str> = after_two.iter().map(|e| e.event.kind_name()).collect();
        assert_eq!(kinds, ["log", "node_completed"]);
        assert_eq!(after_two[0].cursor.to_string(), "c1:3");
        let at_end = store.latest_cursor(&run).unwrap();
        assert!(
            store
                .events_after(&run, at_end, 100, EventFilter::All)
                .unwrap()
                .is_empty()
        );
    }

    fn filters_split_logs_from_status_events(ledger) {
        let (store, run) = store_with_run(ledger);
        store
            .append(
                &run,
                &[RunEvent::RunStarted {}, log("a"), started(1, "n"), log("b")],
            )
            .unwrap();
        let logs = store
            .events_after(&run, Cursor::START, 100, EventFilter::LogsOnly)
            .unwrap();
        let others = store
            .events_after(&run, Cursor::START, 100, EventFilter::ExceptLogs)
            .unwrap();
        let seq = |events: &[trellis_ledger::StoredEvent]| -> Vec<u64> {
            events.iter().map(|e| e.cursor.sequence()).collect()
        };
        assert_eq!(seq(&logs), [2, 4]);
        assert_eq!(seq(&others), [1, 3]);
    }

    fn pages_respect_the_limit_and_resume_from_the_last_cursor(ledger) {
        let (store, run) = store_with_run(ledger);
        let logs: Vec<RunEvent> = (0..25).map(|i| log(&i.to_string())).collect();
        store.append(&run, &logs).unwrap();
        let mut cursor = Cursor::START;
        let mut seen = 0;
        loop {
            let page = store
                .events_after(&run, cursor, 10, EventFilter::All)
                .unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 10);
            seen += page.len();
            cursor = page.last().unwrap().cursor;
        }
        assert_eq!(seen, 25);
        assert!(
            store
                .events_after(&run, Cursor::START, 0, EventFilter::All)
                .unwrap()
                .is_empty()
        );
    }

    fn cursors_ahead_of_the_run_are_errors(ledger) {
        let (store, run) = store_with_run(ledger);
        store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
        let ahead = Cursor::parse("c1:2").unwrap();
        let error = store
            .events_after(&run, ahead, 10, EventFilter::All)
            .unwrap_err();
        assert!(matches!(error, LedgerError::CursorAhead { .. }), "{error}");
        assert_eq!(error.code(), "cursor.ahead");
        assert!(matches!(
            store.wait_for_change(&run, ahead, Duration::ZERO),
            Err(LedgerError::CursorAhead { .. })
        ));
    }


    fn wait_for_change_times_out_without_events(ledger) {
        let (store, run) = store_with_run(ledger);
        let begun = Instant::now();
        let latest = store
            .wait_for_change(&run, Cursor::START, Duration::from_millis(60))
            .unwrap();
        assert_eq!(latest, Cursor::START);
        assert!(begun.elapsed() >= Duration::from_millis(60));
    }

    fn wait_for_change_wakes_up_when_another_thread_appends(ledger) {
        let (store, run) = store_with_run(ledger);
        let store = Arc::new(store);
        let writer = {
            let store = Arc::clone(&store);
            let run = run.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
            })
        };
        let latest = store
            .wait_for_change(&run, Cursor::START, Duration::from_secs(10))
            .unwrap();
        assert_eq!(latest.sequence(), 1);
        writer.join().unwrap();
    }

    fn a_follower_returns_every_selected_event_once_then_finishes(ledger) {
        let (store, run) = store_with_run(ledger);
        let store = Arc::new(store);
        let writer = {
            let store = Arc::clone(&store);
            let run = run.clone();
            std::thread::spawn(move || {
                store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
                for execution in 1..=20 {
                    store.append(&run, &[started(execution, "step")]).unwrap();
                    store.append(&run, &[log("working")]).unwrap();
                    store.append(&run, &[completed(execution)]).unwrap();
                }
                store.append(&run, &[succeeded()]).unwrap();
            })
        };
        let mut follower =
            EventFollower::new(&**store, run.clone(), Cursor::START, EventFilter::ExceptLogs).unwrap();
        let mut received = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !follower.is_done() && Instant::now() < deadline {
            received.extend(follower.next_batch(Duration::from_millis(200)).unwrap());
        }
        writer.join().unwrap();
        assert!(follower.is_done());
        assert_eq!(received.len(), 1 + 40 + 1);
        assert!(received.iter().all(|e| !e.event.is_log()));
        assert!(received.windows(2).all(|w| w[0].cursor < w[1].cursor));
        assert_eq!(follower.cursor(), store.latest_cursor(&run).unwrap());
        assert!(
            follower
                .next_batch(Duration::from_secs(5))
                .unwrap()
                .is_empty()
        );
    }

    fn a_log_follower_finishes_after_the_terminal_event_it_never_returns(ledger) {
        let (store, run) = store_with_run(ledger);
        store
            .append(
                &run,
                &[RunEvent::RunStarted {}, log("one"), log("two"), succeeded()],
            )
            .unwrap();
        let mut follower = EventFollower::new(
            &*store,
            run,
            Cursor::parse("c1:2").unwrap(),
            EventFilter::LogsOnly,
        )
        .unwrap();
        let batch = follower.next_batch(Duration::from_secs(5)).unwrap();
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0].cursor.sequence(), 3);
        assert!(follower.is_done());
    }
}

#[test]
fn malformed_cursor_text_is_a_clear_error() {
    for text in ["", "c1:", "c1:x", "v2:3", "c1:007", "42"] {
        let error = LedgerError::from(Cursor::parse(text).unwrap_err());
        assert_eq!(error, LedgerError::InvalidCursor);
        assert_eq!(error.code(), "cursor.invalid");
    }
}
