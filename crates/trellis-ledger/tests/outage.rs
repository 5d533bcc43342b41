//! A PostgreSQL ledger riding out a server outage, through a loopback proxy that injects the
//! faults a restart or a failover causes: every open connection cut and new ones refused for a
//! while, and a connection cut right after the server received `COMMIT` (the batch is stored,
//! its answer lost). Calls wait the outage out; no batch is stored twice. Needs
//! `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{new_run, run_id, started};
use serde_json::json;
use trellis_ledger::testing::postgres::{TestSchema, server_url};
use trellis_ledger::{
    Cursor, EventFilter, PostgresOptions, PostgresStore, RunEvent, RunId, RunStore,
};
use trellis_testkit::fault_proxy::{FaultProxy, upstream_of};

fn server() -> Option<String> {
    let url = server_url().unwrap_or_else(|message| panic!("{message}"));
    if url.is_none() {
        eprintln!("skipped: set TRELLIS_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

struct Setup {
    schema: TestSchema,
    proxy: FaultProxy,
    /// The store under test, connected through the proxy.
    store: PostgresStore,
    /// A store connected straight to the server, for checking what was stored.
    direct: PostgresStore,
    run: RunId,
}

fn setup(url: &str, outage_window: Duration) -> Setup {
    let schema = TestSchema::create(url).expect("schema");
    let upstream = upstream_of(url).expect("a host:port URL on loopback");
    let proxy = FaultProxy::start(upstream).expect("proxy");
    let options = PostgresOptions {
        outage_window,
        connect_timeout: Duration::from_secs(2),
        ..schema.options()
    };
    let store = PostgresStore::open_with(&proxy.url(url), options).expect("through the proxy");
    let direct = schema.open().expect("direct");
    store
        .create_or_get(new_run("run-1", "key-1", json!({})))
        .expect("run");
    let run = run_id("run-1");
    store
        .append(&run, &[RunEvent::RunStarted {}])
        .expect("started");
    Setup {
        schema,
        proxy,
        store,
        direct,
        run,
    }
}

fn node_started_count(store: &PostgresStore, run: &RunId) -> usize {
    store
        .events_after(run, Cursor::START, 1000, EventFilter::All)
        .expect("events")
        .iter()
        .filter(|stored| matches!(stored.event, RunEvent::NodeStarted { .. }))
        .count()
}

#[test]
fn calls_made_during_an_outage_wait_it_out_and_store_once() {
    let Some(url) = server() else { return };
    let setup = setup(&url, Duration::from_secs(20));
    let ended = setup.proxy.outage(Duration::from_millis(1500));
    let began = Instant::now();
    let cursor = setup
        .store
        .append(&setup.run, &[started(1, "a")])
        .expect("the append waits the outage out");
    assert!(
        began.elapsed() >= Duration::from_millis(1000),
        "it could not have reached the server during the outage: {:?}",
        began.elapsed()
    );
    ended.join().expect("outage thread");
    assert_eq!(setup.store.head(&setup.run).expect("read").cursor, cursor);
    assert_eq!(node_started_count(&setup.direct, &setup.run), 1);

    // A read during the next outage waits too.
    let ended = setup.proxy.outage(Duration::from_millis(800));
    assert_eq!(setup.store.latest_cursor(&setup.run).expect("read"), cursor);
    ended.join().expect("outage thread");
    drop(setup.schema);
}

#[test]
fn an_append_whose_answer_was_lost_is_found_and_not_stored_again() {
    let Some(url) = server() else { return };
    let setup = setup(&url, Duration::from_secs(20));
    for (execution, node) in [(1, "a"), (2, "b")] {
        setup.proxy.cut_after_commit.store(true, Ordering::SeqCst);
        setup
            .store
            .append(&setup.run, &[started(execution, node)])
            .expect("the committed batch is recognised");
        assert!(
            !setup.proxy.cut_after_commit.load(Ordering::SeqCst),
            "the fault fired"
        );
    }
    // With an expected cursor, as a controller appends.
    let latest = setup.store.latest_cursor(&setup.run).expect("latest");
    setup.proxy.cut_after_commit.store(true, Ordering::SeqCst);
    let cursor = setup
        .store
        .append_at(&setup.run, latest, &[started(3, "c")])
        .expect("recognised after the expected cursor");
    assert_eq!(cursor.sequence(), latest.sequence() + 1);
    assert_eq!(node_started_count(&setup.direct, &setup.run), 3);
    drop(setup.schema);
}

#[test]
fn an_outage_longer_than_the_window_is_reported_unavailable() {
    let Some(url) = server() else { return };
    let setup = setup(&url, Duration::from_millis(600));
    let ended = setup.proxy.outage(Duration::from_secs(4));
    let began = Instant::now();
    let error = setup
        .store
        .append(&setup.run, &[started(1, "a")])
        .expect_err("the server stayed away");
    assert_eq!(error.code(), "ledger.unavailable", "{error}");
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    ended.join().expect("outage thread");
    assert_eq!(node_started_count(&setup.direct, &setup.run), 0);
    drop(setup.schema);
}
