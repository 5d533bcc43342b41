//! Controller leases, fencing tokens and the dispatch queue of the PostgreSQL ledger: a lease
//! is held by one holder at a time, a later grant always has a larger token, a stale token
//! cannot append, heartbeat or settle anything, and concurrent claimers never share a row.
//! Needs `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{is_fenced, new_run, run_id, started};
use serde_json::json;
use trellis_ledger::postgres::leases::Dispatch;
use trellis_ledger::testing::postgres::TestSchema;
use trellis_ledger::{PostgresStore, RunEvent, RunStore};

/// Long enough never to lapse during a step of a test on a loaded machine.
const LONG: Duration = Duration::from_secs(60);
/// Short enough to wait out.
const SHORT: Duration = Duration::from_millis(150);

fn store_with_run(schema: &TestSchema, id: &str) -> PostgresStore {
    let store = schema.open().unwrap();
    store
        .create_or_get(new_run(id, &format!("key-{id}"), json!({"graph": id})))
        .unwrap();
    store
}

fn dispatch(execution: u64) -> Dispatch {
    Dispatch {
        execution,
        node: format!("node{execution}"),
        harness: "command".to_owned(),
        payload_json: json!({"execution": execution}).to_string(),
    }
}

#[test]
fn a_controller_lease_has_one_holder_and_a_stale_controller_cannot_append() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_run(&schema, "run-1");
    let run = run_id("run-1");

    let first = store
        .acquire_controller(&run, "host-a", SHORT)
        .unwrap()
        .unwrap();
    assert_eq!(
        store.acquire_controller(&run, "host-b", LONG).unwrap(),
        None
    );
    // The holder asking again keeps its token (a retry must not fence itself).
    let again = store
        .acquire_controller(&run, "host-a", SHORT)
        .unwrap()
        .unwrap();
    assert_eq!(again.fencing_token, first.fencing_token);
    store
        .append_fenced(&run, first.fencing_token, &[RunEvent::RunStarted {}])
        .unwrap();

    std::thread::sleep(SHORT * 3);
    let second = store
        .acquire_controller(&run, "host-b", LONG)
        .unwrap()
        .unwrap();
    assert!(second.fencing_token > first.fencing_token);
    let before = store.latest_cursor(&run).unwrap();
    assert!(is_fenced(store.append_fenced(
        &run,
        first.fencing_token,
        &[started(1, "work")]
    )));
    assert!(is_fenced(store.renew_controller(&first, LONG)));
    assert_eq!(
        store.latest_cursor(&run).unwrap(),
        before,
        "a fenced append stored something"
    );
    store
        .append_fenced(&run, second.fencing_token, &[started(1, "work")])
        .unwrap();
    let renewed = store.renew_controller(&second, LONG).unwrap();
    assert!(renewed.expires_at_ms >= second.expires_at_ms);

    let missing = store.acquire_controller(&run_id("run-none"), "host-a", LONG);
    assert_eq!(missing.unwrap_err().code(), "run.not_found");
}

#[test]
fn fencing_tokens_increase_across_runs_and_stores() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let one = store_with_run(&schema, "run-1");
    let two = store_with_run(&schema, "run-2");
    let mut tokens = Vec::new();
    for (store, run) in [(&one, "run-1"), (&two, "run-2")] {
        let lease = store
            .acquire_controller(&run_id(run), "host", LONG)
            .unwrap()
            .unwrap();
        tokens.push(lease.fencing_token);
        store
            .enqueue(&run_id(run), lease.fencing_token, vec![dispatch(1)])
            .unwrap();
    }
    for claim in two.claim("worker", &["command"], 10, LONG).unwrap() {
        tokens.push(claim.fencing_token);
    }
    assert_eq!(tokens.len(), 4);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
}

#[test]
fn only_the_current_controller_may_queue_work() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_run(&schema, "run-1");
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "host-a", SHORT)
        .unwrap()
        .unwrap();
    std::thread::sleep(SHORT * 3);
    assert!(is_fenced(store.enqueue(
        &run,
        lease.fencing_token,
        vec![dispatch(1)]
    )));
    assert!(store.claim("w", &["command"], 10, LONG).unwrap().is_empty());
}

#[test]
fn an_expired_claim_is_requeued_and_the_late_outcome_is_refused() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_run(&schema, "run-1");
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .enqueue(&run, lease.fencing_token, vec![dispatch(1), dispatch(2)])
        .unwrap();
    // A worker of another harness sees nothing.
    assert!(store.claim("w0", &["claude"], 10, LONG).unwrap().is_empty());

    let slow = store.claim("w1", &["command"], 1, SHORT).unwrap();
    assert_eq!(slow.len(), 1);
    let slow = slow.into_iter().next().unwrap();
    assert_eq!((slow.execution, slow.claims), (1, 1));
    let healthy = store.claim("w2", &["command"], 5, LONG).unwrap();
    assert_eq!(healthy.len(), 1, "execution 1 is claimed, only 2 is left");
    let healthy = healthy.into_iter().next().unwrap();
    store.heartbeat(&healthy, LONG).unwrap();
    store
        .complete(&healthy, r#"{"status":"verified"}"#)
        .unwrap();
    // Settling twice is refused too.
    assert!(is_fenced(store.complete(&healthy, "{}")));

    std::thread::sleep(SHORT * 3);
    assert!(
        store
            .reap_expired(&run, 3)
            .unwrap()
            .iter()
            .all(|r| r.requeued)
    );
    assert!(is_fenced(store.heartbeat(&slow, LONG)));
    assert!(is_fenced(store.complete(&slow, r#"{"status":"late"}"#)));

    let retry = store.claim("w3", &["command"], 5, LONG).unwrap();
    assert_eq!(retry.len(), 1);
    let retry = retry.into_iter().next().unwrap();
    assert_eq!((retry.execution, retry.claims), (1, 2));
    assert!(retry.fencing_token > slow.fencing_token);
    store.complete(&retry, r#"{"status":"retried"}"#).unwrap();

    let settled = store.take_finished(&run, lease.fencing_token).unwrap();
    assert_eq!(
        settled,
        vec![
            (1, Some(r#"{"status":"retried"}"#.to_owned())),
            (2, Some(r#"{"status":"verified"}"#.to_owned())),
        ]
    );
    assert!(
        store
            .take_finished(&run, lease.fencing_token)
            .unwrap()
            .is_empty(),
        "taken once"
    );
}

#[test]
fn a_claim_out_of_claims_is_lost_not_requeued() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_run(&schema, "run-1");
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    store
        .enqueue(&run, lease.fencing_token, vec![dispatch(7)])
        .unwrap();
    let claim = store.claim("w1", &["command"], 1, SHORT).unwrap();
    assert_eq!(claim.len(), 1);
    std::thread::sleep(SHORT * 3);
    let reaped = store.reap_expired(&run, 1).unwrap();
    assert_eq!(reaped.len(), 1);
    assert!(!reaped[0].requeued);
    assert!(store.claim("w2", &["command"], 1, LONG).unwrap().is_empty());
    assert!(is_fenced(store.complete(&claim[0], "{}")));
}

#[test]
fn concurrent_claimers_never_share_an_execution() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let store = store_with_run(&schema, "run-1");
    let run = run_id("run-1");
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    const EXECUTIONS: u64 = 120;
    store
        .enqueue(
            &run,
            lease.fencing_token,
            (1..=EXECUTIONS).map(dispatch).collect(),
        )
        .unwrap();
    const CLAIMERS: usize = 4;
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let handles: Vec<_> = (0..CLAIMERS)
        .map(|index| {
            let store = schema.open().unwrap();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut mine = Vec::new();
                loop {
                    let claims = store
                        .claim(&format!("w{index}"), &["command"], 3, LONG)
                        .unwrap();
                    if claims.is_empty() {
                        return mine;
                    }
                    for claim in claims {
                        store.complete(&claim, "{}").unwrap();
                        mine.push(claim.execution);
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.join().unwrap());
    }
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(
        all.len() as u64,
        EXECUTIONS,
        "an execution was claimed twice"
    );
    assert_eq!(distinct, (1..=EXECUTIONS).collect());
    let finished = store.take_finished(&run, lease.fencing_token).unwrap();
    assert_eq!(finished.len() as u64, EXECUTIONS);
    assert!(finished.iter().all(|(_, outcome)| outcome.is_some()));
}
