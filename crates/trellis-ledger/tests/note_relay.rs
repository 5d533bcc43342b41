//! A host relaying its ledger notes to a controller it started: the controller's waiters are
//! woken by notes on the channels they want, through the host's one listening connection (the
//! controller opens none), and once the host is gone the controller listens by itself. Needs
//! `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::{new_run, raw_query, run_id};
use serde_json::json;
use trellis_ledger::postgres::dispatch_notes::{self, DispatchNote};
use trellis_ledger::postgres::leases::Dispatch;
use trellis_ledger::testing::postgres::TestSchema;
use trellis_ledger::{PostgresStore, RunId, RunStore};

const LONG: Duration = Duration::from_secs(60);
const QUIET: Duration = Duration::from_millis(300);

/// The server processes of the connections that last ran `LISTEN` on `channel` (a listening
/// connection runs nothing else, so its last statement says what it listens on).
fn listeners_on(url: &str, channel: &str) -> Vec<String> {
    let sql =
        format!("SELECT pid::text FROM pg_stat_activity WHERE query = 'LISTEN \"{channel}\"'");
    raw_query(url, &sql).into_iter().flatten().collect()
}

/// Queues one execution of `run` and has a worker settle it: one outcome note on the run's
/// channel.
fn settle_one(store: &PostgresStore, run: &RunId, token: i64, execution: u64) {
    let dispatch = Dispatch {
        execution,
        node: format!("node{execution}"),
        harness: "command".to_owned(),
        payload_json: json!({}).to_string(),
    };
    store.enqueue(run, token, vec![dispatch]).unwrap();
    let claim = store.claim("w1", &["command"], 1, LONG).unwrap().remove(0);
    store.complete(&claim, r#"{"done":1}"#).unwrap();
}

fn drain(store: &PostgresStore, waiter: &dispatch_notes::DispatchWaiter) {
    while store.wait_for_note(waiter, QUIET).unwrap() {}
}

#[test]
fn a_relayed_controller_is_woken_through_its_host_and_listens_itself_once_the_host_is_gone() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let host = schema.open().unwrap();
    let controller = schema.open().unwrap();
    let (a, b) = (run_id("relay-a"), run_id("relay-b"));
    for run in [&a, &b] {
        let new = new_run(run.as_str(), &format!("key-{run}"), json!({}))
            .with_created_at_ms(trellis_ledger::store::now_ms());
        host.create_or_get(new).unwrap();
    }
    let lease_a = host.acquire_controller(&a, "ctl", LONG).unwrap().unwrap();
    let lease_b = host.acquire_controller(&b, "ctl", LONG).unwrap().unwrap();
    let (ours, theirs) = UnixStream::pair().unwrap();
    host.relay_notes(ours).unwrap();
    controller.listen_through(theirs);

    let outcome_a = controller
        .dispatch_waiter(DispatchNote::Dispatch(a.clone()))
        .unwrap();
    let outcome_b = controller
        .dispatch_waiter(DispatchNote::Dispatch(b.clone()))
        .unwrap();
    // The relay's first answers wake everyone once (notes before it listened were not seen).
    drain(&controller, &outcome_a);
    drain(&controller, &outcome_b);
    let channel_a =
        dispatch_notes::channel(controller.schema(), &DispatchNote::Dispatch(a.clone()));
    let channel_b =
        dispatch_notes::channel(controller.schema(), &DispatchNote::Dispatch(b.clone()));
    let host_listener = listeners_on(schema.url(), &channel_b);
    assert_eq!(
        host_listener.len(),
        1,
        "one connection listens for the controller (the last channel it asked for)"
    );

    settle_one(&host, &a, lease_a.fencing_token, 1);
    assert!(
        controller.wait_for_note(&outcome_a, LONG).unwrap(),
        "an outcome of run a reaches its waiter through the host"
    );
    assert!(
        !controller.wait_for_note(&outcome_b, QUIET).unwrap(),
        "and wakes no waiter of another run"
    );

    // The host goes away: its end of the relay closes with its runtime.
    drop(host);
    let wake = controller.wait_for_note(&outcome_a, LONG).unwrap();
    assert!(
        wake,
        "losing the relay wakes the waiters: notes may have been missed"
    );
    drain(&controller, &outcome_a);
    drain(&controller, &outcome_b);
    let own_listener = [channel_a, channel_b]
        .iter()
        .flat_map(|channel| listeners_on(schema.url(), channel))
        .collect::<Vec<_>>();
    assert_eq!(own_listener.len(), 1, "{own_listener:?}");
    assert_ne!(
        own_listener, host_listener,
        "the controller now listens on a connection of its own, the host's one is gone"
    );
    settle_one(&controller, &b, lease_b.fencing_token, 2);
    assert!(
        controller.wait_for_note(&outcome_b, LONG).unwrap(),
        "and is still woken by its run's outcomes"
    );
}
