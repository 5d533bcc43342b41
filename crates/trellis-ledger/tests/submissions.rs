//! Admission: idempotent submission keys, conflicts, bounds and resume lineage.

#[macro_use]
mod common;

use std::sync::{Arc, Barrier};

use common::{failed, new_run, run_id, store_with_run};
use serde_json::json;
use trellis_ledger::limits::MAX_SUBMISSION_JSON_BYTES;
use trellis_ledger::{Admission, LedgerError, Phase, RunEvent, RunFilter};

backend_tests! {
    fn same_key_and_submission_returns_the_existing_run(ledger) {
        let store = ledger.open();
        let (first, admission) = store
            .create_or_get(new_run("run-a", "key", json!({"input": 1})))
            .unwrap();
        assert_eq!(admission, Admission::Created);
        // A retry generates a fresh run id; the key and digest identify the run.
        let (again, admission) = store
            .create_or_get(new_run("run-b", "key", json!({"input": 1})))
            .unwrap();
        assert_eq!(admission, Admission::Existing);
        assert_eq!(again, first);
        assert_eq!(again.run_id.as_str(), "run-a");
        assert!(matches!(
            store.record(&run_id("run-b")),
            Err(LedgerError::RunNotFound { .. })
        ));
    }

    fn same_key_with_a_different_submission_is_a_conflict(ledger) {
        let store = ledger.open();
        store
            .create_or_get(new_run("run-a", "key", json!({"input": 1})))
            .unwrap();
        let error = store
            .create_or_get(new_run("run-b", "key", json!({"input": 2})))
            .unwrap_err();
        assert_eq!(error, LedgerError::SubmissionConflict);
        assert_eq!(
            error.to_string(),
            "submission key already identifies a different admitted run"
        );
        assert_eq!(error.code(), "submission.conflict");
    }

    fn a_run_id_reused_with_another_key_is_refused(ledger) {
        let store = ledger.open();
        store
            .create_or_get(new_run("run-a", "key-1", json!({})))
            .unwrap();
        let error = store
            .create_or_get(new_run("run-a", "key-2", json!({})))
            .unwrap_err();
        assert!(
            matches!(error, LedgerError::RunIdConflict { .. }),
            "{error}"
        );
    }

    fn find_by_key_and_record_return_the_admitted_submission(ledger) {
        let (store, id) = store_with_run(ledger);
        let found = store.find_by_key("key-1").unwrap().unwrap();
        assert_eq!(found.run_id, id);
        assert_eq!(found.submission, json!({"graph": "g"}));
        assert_eq!(store.record(&id).unwrap(), found);
        assert!(store.find_by_key("nope").unwrap().is_none());
    }

    fn invalid_submissions_are_rejected_before_storage(ledger) {
        let store = ledger.open();
        let mut untitled = new_run("r1", "k1", json!({}));
        untitled.title = String::new();
        let mut control = new_run("r2", "k2", json!({}));
        control.title = "bad\ntitle".to_owned();
        let mut long_key = new_run("r3", "k3", json!({}));
        long_key.submission_key = "k".repeat(257);
        let mut bad_digest = new_run("r4", "k4", json!({}));
        bad_digest.submission_digest = "ABC".to_owned();
        let huge = new_run(
            "r5",
            "k5",
            json!({"blob": "x".repeat(MAX_SUBMISSION_JSON_BYTES)}),
        );
        for run in [untitled, control, long_key, bad_digest, huge] {
            let error = store.create_or_get(run).unwrap_err();
            assert!(matches!(error, LedgerError::InvalidRun { .. }), "{error}");
        }
        assert!(store.list_runs(&RunFilter::default()).unwrap().is_empty());
    }

    fn resume_lineage_links_predecessor_and_successor(ledger) {
        let (store, first) = store_with_run(ledger);
        let resumed = new_run("run-2", "key-2", json!({})).with_predecessor(first.clone());
        let error = store.create_or_get(resumed.clone()).unwrap_err();
        assert!(
            matches!(error, LedgerError::InvalidRun { .. }),
            "unfinished: {error}"
        );

        store
            .append(&first, &[RunEvent::RunStarted {}, failed("worker_failed")])
            .unwrap();
        let (record, _) = store.create_or_get(resumed).unwrap();
        assert_eq!(record.predecessor.as_ref(), Some(&first));
        assert_eq!(
            store.record(&first).unwrap().successor,
            Some(record.run_id.clone())
        );
        assert_eq!(store.head(&first).unwrap().successor, Some(record.run_id));

        let twice = new_run("run-3", "key-3", json!({})).with_predecessor(first);
        assert!(matches!(
            store.create_or_get(twice).unwrap_err(),
            LedgerError::InvalidRun { .. }
        ));
        let orphan = new_run("run-4", "key-4", json!({})).with_predecessor(run_id("ghost"));
        assert!(matches!(
            store.create_or_get(orphan).unwrap_err(),
            LedgerError::RunNotFound { .. }
        ));
    }

    fn list_runs_is_newest_first_filtered_and_paged(ledger) {
        let store = ledger.open();
        for i in 0..5u64 {
            let run = new_run(&format!("run-{i}"), &format!("key-{i}"), json!({}))
                .with_created_at_ms(1000 + i);
            store.create_or_get(run).unwrap();
        }
        store
            .append(&run_id("run-3"), &[RunEvent::RunStarted {}])
            .unwrap();
        let ids = |filter: &RunFilter| -> Vec<String> {
            store
                .list_runs(filter)
                .unwrap()
                .into_iter()
                .map(|listed| listed.expect("readable run").run_id.to_string())
                .collect()
        };
        assert_eq!(
            ids(&RunFilter::default()),
            ["run-4", "run-3", "run-2", "run-1", "run-0"]
        );
        let page = RunFilter {
            limit: 2,
            ..RunFilter::default()
        };
        assert_eq!(ids(&page), ["run-4", "run-3"]);
        let next = RunFilter {
            after_run: Some(run_id("run-3")),
            ..page
        };
        assert_eq!(ids(&next), ["run-2", "run-1"]);
        let running = RunFilter {
            phase: Some(Phase::Running),
            ..RunFilter::default()
        };
        assert_eq!(ids(&running), ["run-3"]);
    }

    fn concurrent_threads_submitting_the_same_key_get_one_run(ledger) {
        drop(ledger.open());
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                // Each thread has its own store, like separate processes would.
                let store = ledger.open();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    let run = new_run(&format!("run-{i}"), "shared-key", json!({"same": true}));
                    store.create_or_get(run).unwrap()
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let created = results
            .iter()
            .filter(|(_, admission)| *admission == Admission::Created)
            .count();
        assert_eq!(created, 1);
        let winner = &results[0].0.run_id;
        assert!(results.iter().all(|(record, _)| &record.run_id == winner));
        let store = ledger.open();
        assert_eq!(store.list_runs(&RunFilter::default()).unwrap().len(), 1);
    }

    fn runs_persist_across_reopening_the_ledger(ledger) {
        {
            let store = ledger.open();
            store
                .create_or_get(new_run("run-a", "key", json!({"x": 1})))
                .unwrap();
            store
                .append(&run_id("run-a"), &[RunEvent::RunStarted {}])
                .unwrap();
        }
        let store = ledger.open();
        let head = store.head(&run_id("run-a")).unwrap();
        assert_eq!(head.phase(), Phase::Running);
        assert_eq!(head.cursor.to_string(), "c1:1");
    }
}

#[test]
fn digest_ignores_key_order_but_not_title() {
    let a = new_run("r", "k", json!({"a": 1, "b": 2}));
    let b = new_run("r", "k", serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap());
    assert_eq!(a.submission_digest, b.submission_digest);
    let mut retitled = a.clone();
    retitled.title = "Another title".to_owned();
    assert_ne!(retitled.compute_digest(), a.submission_digest);
}
