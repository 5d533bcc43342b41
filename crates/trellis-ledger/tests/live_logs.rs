//! Log lines worker hosts push while their executions run: taken once, in order, and only by
//! the run's controller; refused from a worker whose claim expired, was withdrawn or settled;
//! taken together with the outcome they precede; and a ledger from before them is upgraded.
//! Needs `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::time::Duration;

use common::{is_fenced, new_run, raw_query, run_id};
use serde_json::json;
use trellis_ledger::postgres::leases::{Claim, Dispatch};
use trellis_ledger::postgres::logs::DispatchLog;
use trellis_ledger::postgres::schema::{MIGRATIONS_TABLE, latest_version};
use trellis_ledger::testing::postgres::TestSchema;
use trellis_ledger::{LogLevel, LogStream, PostgresStore, RunId, RunStore};

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(150);

fn store_with_run(schema: &TestSchema) -> (PostgresStore, RunId) {
    let store = schema.open().unwrap();
    store
        .create_or_get(new_run("run-1", "key-run-1", json!({})))
        .unwrap();
    (store, run_id("run-1"))
}

fn line(message: &str) -> DispatchLog {
    DispatchLog {
        stream: LogStream::Error,
        level: LogLevel::Warn,
        message: message.to_owned(),
    }
}

/// Queues `executions` under `token` and claims them all with `ttl`, by execution.
fn claimed(
    store: &PostgresStore,
    run: &RunId,
    token: i64,
    executions: &[u64],
    ttl: Duration,
) -> Vec<Claim> {
    let dispatches = executions
        .iter()
        .map(|&execution| Dispatch {
            execution,
            node: format!("node{execution}"),
            harness: "command".to_owned(),
            payload_json: "{}".to_owned(),
        })
        .collect();
    store.enqueue(run, token, dispatches).unwrap();
    let mut claims = store
        .claim("w1", &["command"], executions.len(), ttl)
        .unwrap();
    claims.sort_by_key(|claim| claim.execution);
    assert_eq!(claims.len(), executions.len());
    claims
}

#[test]
fn pushed_lines_are_taken_once_in_order_and_only_by_the_holder() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, run) = store_with_run(&schema);
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    let claims = claimed(&store, &run, lease.fencing_token, &[1, 2], LONG);
    store
        .push_logs(&claims[0], &[line("one a"), line("one b")])
        .unwrap();
    store.push_logs(&claims[1], &[line("two a")]).unwrap();
    // A NUL byte cannot be PostgreSQL text; the line still goes through.
    store
        .push_logs(&claims[0], &[line("one c \u{0} after a NUL")])
        .unwrap();
    store.push_logs(&claims[0], &[]).unwrap();

    assert!(is_fenced(store.take_logs(&run, lease.fencing_token + 1000)));
    assert_eq!(
        store.take_logs(&run, lease.fencing_token).unwrap(),
        vec![
            (1, line("one a")),
            (1, line("one b")),
            (2, line("two a")),
            (1, line("one c \u{0} after a NUL")),
        ]
    );
    assert!(
        store
            .take_logs(&run, lease.fencing_token)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_worker_whose_claim_is_gone_cannot_push() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, run) = store_with_run(&schema);
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    let claims = claimed(&store, &run, lease.fencing_token, &[1], SHORT);
    std::thread::sleep(SHORT * 3);
    // Expired but not reaped yet: refused all the same, by the server's clock.
    assert!(is_fenced(store.push_logs(&claims[0], &[line("late")])));
    store.reap_expired(&run, 1).unwrap();
    assert!(is_fenced(store.push_logs(&claims[0], &[line("later")])));

    let claims = claimed(&store, &run, lease.fencing_token, &[2, 3], LONG);
    store.push_logs(&claims[0], &[line("withdrawn")]).unwrap();
    store.withdraw(&run, lease.fencing_token, vec![2]).unwrap();
    assert!(is_fenced(store.push_logs(&claims[0], &[line("gone")])));
    store.complete(&claims[1], r#"{"done":3}"#).unwrap();
    assert!(is_fenced(store.push_logs(&claims[1], &[line("settled")])));
    // The withdrawn execution's line went with it; nothing of the refused pushes is there.
    assert!(
        store
            .take_logs(&run, lease.fencing_token)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn an_outcome_is_taken_with_the_lines_pushed_before_it() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, run) = store_with_run(&schema);
    let old = store
        .acquire_controller(&run, "old", SHORT)
        .unwrap()
        .unwrap();
    let claims = claimed(&store, &run, old.fencing_token, &[4], LONG);
    store.push_logs(&claims[0], &[line("first")]).unwrap();
    store.push_logs(&claims[0], &[line("last")]).unwrap();
    store.complete(&claims[0], r#"{"done":4}"#).unwrap();
    std::thread::sleep(SHORT * 3);
    let new = store
        .acquire_controller(&run, "new", LONG)
        .unwrap()
        .unwrap();
    // The stale controller takes nothing; its successor gets the lines and the outcome.
    assert!(is_fenced(
        store.take_finished_and_logs(&run, old.fencing_token)
    ));
    let collected = store
        .take_finished_and_logs(&run, new.fencing_token)
        .unwrap();
    assert_eq!(collected.logs, vec![(4, line("first")), (4, line("last"))]);
    assert_eq!(
        collected.finished,
        vec![(4, Some(r#"{"done":4}"#.to_owned()))]
    );
    let again = store
        .take_finished_and_logs(&run, new.fencing_token)
        .unwrap();
    assert!(again.logs.is_empty() && again.finished.is_empty());
}

#[test]
fn a_ledger_from_before_pushed_lines_is_upgraded() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (store, run) = store_with_run(&schema);
    drop(store);
    // Back to version 3: a ledger written before pushed lines and the claim indexes.
    let name = schema.name().to_owned();
    raw_query(
        schema.url(),
        &format!(
            "DROP TABLE {name}.dispatch_logs;
             DROP INDEX {name}.dispatch_queue_finished;
             DROP INDEX {name}.dispatch_queue_waiting;
             CREATE INDEX dispatch_queue_waiting ON {name}.dispatch_queue (harness, queued_at)
                 WHERE state = 'queued';
             DELETE FROM {name}.{MIGRATIONS_TABLE} WHERE version >= 4"
        ),
    );
    assert!(latest_version() >= 5);
    let store = schema.open().unwrap();
    let lease = store
        .acquire_controller(&run, "ctl", LONG)
        .unwrap()
        .unwrap();
    let claims = claimed(&store, &run, lease.fencing_token, &[1], LONG);
    store.push_logs(&claims[0], &[line("upgraded")]).unwrap();
    assert_eq!(
        store.take_logs(&run, lease.fencing_token).unwrap(),
        vec![(1, line("upgraded"))]
    );
}
