//! What a controller handing executions to worker hosts relies on: queueing an execution
//! again keeps its row (a controller that took a run over re-attaches), finished dispatches
//! (settled or lost) are taken once and only by the lease holder, a withdrawn execution fences
//! its worker, fenced `append_at` refuses a stale controller, runs whose controller is gone are
//! found, and a payload is answered only to its live claim. Needs `TRELLIS_TEST_POSTGRES_URL`
//! (skipped without it, failing in CI).

mod common;

use std::time::Duration;

use common::{is_fenced, new_run, run_id};
use serde_json::json;
use trellis_ledger::postgres::leases::{ControllerLease, Dispatch};
use trellis_ledger::testing::postgres::TestSchema;
use trellis_ledger::{PostgresStore, RunEvent, RunId, RunStore, TerminalResult};

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(150);

fn store_with_runs(schema: &TestSchema, ids: &[&str]) -> PostgresStore {
    let store = schema.open().unwrap();
    for id in ids {
        // Created now: the grace before an unleased run counts as orphaned starts here.
        let run = new_run(id, &format!("key-{id}"), json!({"graph": id}))
            .with_created_at_ms(trellis_ledger::store::now_ms());
        store.create_or_get(run).unwrap();
    }
    store
}

/// A store with runs `run-a` and `run-b`, each held by a controller lease of its own.
fn two_held_runs(schema: &TestSchema) -> (PostgresStore, [(RunId, ControllerLease); 2]) {
    let store = store_with_runs(schema, &["run-a", "run-b"]);
    let held = ["run-a", "run-b"].map(|id| {
        let run = run_id(id);
        let lease = store
            .acquire_controller(&run, &format!("ctl-{id}"), LONG)
            .unwrap()
            .unwrap();
        (run, lease)
    });
    (store, held)
}

fn dispatch(execution: u64, payload: &str) -> Dispatch {
    Dispatch {
        execution,
        node: format!("node{execution}"),
        harness: "command".to_owned(),
        payload_json: json!({"payload": payload}).to_string(),
    }
}

#[test]
fn queueing_again_keeps_the_row_and_finished_dispatches_are_taken_once_by_the_holder() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-1"]);
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .enqueue(
            &run,
            lease.fencing_token,
            vec![dispatch(1, "first"), dispatch(2, "first")],
        )
        .unwrap();
    let healthy = store.claim("w1", &["command"], 1, LONG).unwrap();
    assert_eq!(healthy.len(), 1);
    // A successor controller queues both again: the claimed row and the queued one stay.
    store
        .enqueue(
            &run,
            lease.fencing_token,
            vec![dispatch(1, "again"), dispatch(2, "again")],
        )
        .unwrap();
    let doomed = store.claim("w2", &["command"], 5, SHORT).unwrap();
    assert_eq!(doomed.len(), 1, "execution 1 is still claimed by w1");
    assert_eq!(doomed[0].execution, 2);
    assert!(doomed[0].payload_json.contains("first"));
    store.complete(&healthy[0], r#"{"done":1}"#).unwrap();
    std::thread::sleep(SHORT * 3);
    let reaped = store.reap_expired(&run, 1).unwrap();
    assert_eq!(reaped.len(), 1);
    assert!(!reaped[0].requeued, "one claim only: lost");

    assert!(is_fenced(
        store.take_finished(&run, lease.fencing_token + 1000)
    ));
    assert_eq!(
        store.take_finished(&run, lease.fencing_token).unwrap(),
        vec![(1, Some(r#"{"done":1}"#.to_owned())), (2, None)]
    );
    assert!(
        store
            .take_finished(&run, lease.fencing_token)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_withdrawn_execution_fences_its_worker() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-1"]);
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .enqueue(&run, lease.fencing_token, vec![dispatch(5, "x")])
        .unwrap();
    let claim = store.claim("w1", &["command"], 1, LONG).unwrap();
    assert_eq!(claim.len(), 1);
    assert!(is_fenced(store.withdraw(
        &run,
        lease.fencing_token + 1000,
        vec![5]
    )));
    store.heartbeat(&claim[0], LONG).unwrap();
    store.withdraw(&run, lease.fencing_token, vec![5]).unwrap();
    assert!(is_fenced(store.heartbeat(&claim[0], LONG)));
    assert!(is_fenced(store.complete(&claim[0], "{}")));
    assert!(
        store
            .take_finished(&run, lease.fencing_token)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_stale_controller_cannot_append_at_a_cursor() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-1"]);
    let run = run_id("run-1");
    let old = store
        .acquire_controller(&run, "old", SHORT)
        .unwrap()
        .unwrap();
    let cursor = store.latest_cursor(&run).unwrap();
    std::thread::sleep(SHORT * 3);
    let new = store
        .acquire_controller(&run, "new", LONG)
        .unwrap()
        .unwrap();
    assert!(new.fencing_token > old.fencing_token);
    assert!(is_fenced(store.append_at_fenced(
        &run,
        cursor,
        old.fencing_token,
        &[RunEvent::RunStarted {}]
    )));
    assert_eq!(store.latest_cursor(&run).unwrap(), cursor, "nothing stored");
    store
        .append_at_fenced(&run, cursor, new.fencing_token, &[RunEvent::RunStarted {}])
        .unwrap();
}

#[test]
fn runs_whose_controller_is_gone_are_found_and_finished_ones_are_not() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-1", "run-2", "run-3"]);
    let (one, two, three) = (run_id("run-1"), run_id("run-2"), run_id("run-3"));
    // Nobody ever leased them: orphans only once the grace is over.
    assert!(store.orphaned_runs(LONG, 10).unwrap().is_empty());
    let mut all = store.orphaned_runs(Duration::ZERO, 10).unwrap();
    all.sort();
    assert_eq!(all, vec![one.clone(), two.clone(), three.clone()]);

    let live = store
        .acquire_controller(&one, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .acquire_controller(&two, "ctl", SHORT)
        .unwrap()
        .unwrap();
    store
        .append(
            &three,
            &[RunEvent::Terminal {
                result: TerminalResult::Failed {
                    reason: "test".into(),
                },
            }],
        )
        .unwrap();
    std::thread::sleep(SHORT * 3);
    assert_eq!(
        store.orphaned_runs(Duration::ZERO, 10).unwrap(),
        vec![two.clone()],
        "run-1 is held, run-2's lease expired, run-3 is finished"
    );
    store.renew_controller(&live, LONG).unwrap();
    let taken = store
        .acquire_controller(&two, "successor", LONG)
        .unwrap()
        .unwrap();
    assert!(taken.fencing_token > live.fencing_token);
    assert!(store.orphaned_runs(Duration::ZERO, 10).unwrap().is_empty());
}

#[test]
fn a_dispatch_payload_is_answered_only_to_its_live_claim() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-p"]);
    let run = run_id("run-p");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .enqueue(&run, lease.fencing_token, vec![dispatch(1, "work here")])
        .unwrap();
    // Queued, not yet claimed: nobody holds it.
    assert_eq!(store.claimed_payload(&run, 1, 1).unwrap(), None);
    let claim = store.claim("w1", &["command"], 1, SHORT).unwrap().remove(0);
    let held = store
        .claimed_payload(&run, 1, claim.fencing_token)
        .unwrap()
        .expect("the holder gets the payload");
    assert!(held.contains("work here"), "{held}");
    assert_eq!(
        store
            .claimed_payload(&run, 1, claim.fencing_token + 1)
            .unwrap(),
        None
    );
    assert_eq!(
        store.claimed_payload(&run, 2, claim.fencing_token).unwrap(),
        None
    );
    // Once the claim's lease ran out, not even its token is answered.
    std::thread::sleep(SHORT * 3);
    assert_eq!(
        store.claimed_payload(&run, 1, claim.fencing_token).unwrap(),
        None
    );
}

#[test]
fn claims_take_the_oldest_dispatches_across_harnesses_and_runs_in_queue_order() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, [(a, lease_a), (b, lease_b)]) = two_held_runs(&schema);
    let of = |execution: u64, harness: &str| Dispatch {
        harness: harness.to_owned(),
        ..dispatch(execution, harness)
    };
    // Queue order: a1 (command), b1 (claude), a2 (claude), b2 (command), a3 (codex).
    store
        .enqueue(&a, lease_a.fencing_token, vec![of(1, "command")])
        .unwrap();
    store
        .enqueue(&b, lease_b.fencing_token, vec![of(1, "claude")])
        .unwrap();
    store
        .enqueue(&a, lease_a.fencing_token, vec![of(2, "claude")])
        .unwrap();
    store
        .enqueue(&b, lease_b.fencing_token, vec![of(2, "command")])
        .unwrap();
    store
        .enqueue(&a, lease_a.fencing_token, vec![of(3, "codex")])
        .unwrap();
    let taken = |claims: Vec<trellis_ledger::postgres::leases::Claim>| -> Vec<(String, u64)> {
        let mut taken: Vec<(String, u64)> = claims
            .into_iter()
            .map(|claim| (claim.run_id.as_str().to_owned(), claim.execution))
            .collect();
        // One claim's rows run side by side: their order among themselves is not promised.
        taken.sort();
        taken
    };
    // Only the harnesses asked for, the oldest ones, at most the limit.
    assert_eq!(
        taken(store.claim("w1", &["claude", "command"], 3, LONG).unwrap()),
        vec![
            ("run-a".into(), 1),
            ("run-a".into(), 2),
            ("run-b".into(), 1)
        ]
    );
    assert_eq!(
        taken(
            store
                .claim("w2", &["command", "claude", "codex"], 5, LONG)
                .unwrap()
        ),
        vec![("run-a".into(), 3), ("run-b".into(), 2)]
    );
    assert!(store.claim("w3", &["command"], 5, LONG).unwrap().is_empty());
}

#[test]
fn queueing_is_refused_to_a_stale_token_and_for_an_unknown_run() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-1"]);
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    let stale = lease.fencing_token + 1000;
    assert!(is_fenced(store.enqueue(
        &run,
        stale,
        vec![dispatch(1, "x")]
    )));
    assert!(is_fenced(store.enqueue(&run, stale, Vec::new())));
    assert!(is_fenced(store.take_logs(&run, stale)));
    // Nothing of the refused dispatch was queued.
    assert!(store.claim("w1", &["command"], 5, LONG).unwrap().is_empty());
    let unknown = store.enqueue(
        &run_id("no-such-run"),
        lease.fencing_token,
        vec![dispatch(1, "x")],
    );
    assert!(
        matches!(
            unknown,
            Err(trellis_ledger::LedgerError::RunNotFound { .. })
        ),
        "{unknown:?}"
    );
}

#[test]
fn queue_and_outcome_notes_wake_exactly_their_waiters() {
    use trellis_ledger::postgres::dispatch_notes::DispatchNote;
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_runs(&schema, &["run-a", "run-b"]);
    let (a, b) = (run_id("run-a"), run_id("run-b"));
    let lease = store.acquire_controller(&a, "ctl", LONG).unwrap().unwrap();
    let queued = store.dispatch_waiter(DispatchNote::Queued).unwrap();
    let outcome_a = store
        .dispatch_waiter(DispatchNote::Dispatch(a.clone()))
        .unwrap();
    let outcome_b = store
        .dispatch_waiter(DispatchNote::Dispatch(b.clone()))
        .unwrap();
    let quiet = Duration::from_millis(300);
    // The listener's first connect wakes everyone once (it may have missed notes): drain it.
    for waiter in [&queued, &outcome_a, &outcome_b] {
        while store.wait_for_note(waiter, quiet).unwrap() {}
    }
    store
        .enqueue(&a, lease.fencing_token, vec![dispatch(1, "x")])
        .unwrap();
    assert!(
        store.wait_for_note(&queued, LONG).unwrap(),
        "an enqueue wakes the workers"
    );
    assert!(!store.wait_for_note(&outcome_a, quiet).unwrap());
    let claim = store.claim("w1", &["command"], 1, LONG).unwrap().remove(0);
    store.complete(&claim, r#"{"done":1}"#).unwrap();
    assert!(
        store.wait_for_note(&outcome_a, LONG).unwrap(),
        "an outcome wakes its run's collector"
    );
    assert!(
        !store.wait_for_note(&outcome_b, quiet).unwrap(),
        "and no other run's"
    );
    assert!(!store.wait_for_note(&queued, quiet).unwrap());
}

#[test]
fn outcomes_reported_together_settle_each_live_claim_and_refuse_a_fenced_one() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, [(a, lease_a), (b, lease_b)]) = two_held_runs(&schema);
    store
        .enqueue(
            &a,
            lease_a.fencing_token,
            vec![dispatch(1, "x"), dispatch(2, "y")],
        )
        .unwrap();
    store
        .enqueue(&b, lease_b.fencing_token, vec![dispatch(1, "z")])
        .unwrap();
    let mut claims = store.claim("w1", &["command"], 3, LONG).unwrap();
    claims.sort_by_key(|claim| (claim.run_id.as_str().to_owned(), claim.execution));
    // Execution 2 of run-a is withdrawn: its claim is fenced.
    store.withdraw(&a, lease_a.fencing_token, vec![2]).unwrap();
    let answers = store
        .complete_many(
            claims
                .iter()
                .map(|claim| (claim.clone(), format!("{{\"n\":{}}}", claim.execution)))
                .collect(),
        )
        .unwrap();
    assert_eq!(answers.len(), 3);
    assert!(answers[0].is_ok() && answers[2].is_ok(), "{answers:?}");
    assert!(is_fenced(answers[1].clone()));
    assert_eq!(
        store.take_finished(&a, lease_a.fencing_token).unwrap(),
        vec![(1, Some(r#"{"n":1}"#.to_owned()))]
    );
    assert_eq!(
        store.take_finished(&b, lease_b.fencing_token).unwrap(),
        vec![(1, Some(r#"{"n":1}"#.to_owned()))]
    );
    assert!(store.complete_many(Vec::new()).unwrap().is_empty());
}
