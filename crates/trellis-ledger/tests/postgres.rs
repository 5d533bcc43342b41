//! What only the PostgreSQL backend has: schema migrations on a shared server, connection
//! failures, lock timeouts, notifications, and being called from inside tokio runtimes.
//! Needs `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::{new_run, raw_query, run_id, started};
use serde_json::json;
use trellis_ledger::postgres::schema::{MIGRATIONS_TABLE, latest_version};
use trellis_ledger::testing::postgres::{TestSchema, server_url};
use trellis_ledger::{
    Cursor, LedgerError, LedgerLocation, PostgresOptions, PostgresStore, RunEvent, RunStore,
};

fn server() -> Option<String> {
    let url = server_url().unwrap_or_else(|message| panic!("{message}"));
    if url.is_none() {
        eprintln!("skipped: set TRELLIS_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

fn url_with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user_info, hosts) = rest.rsplit_once('@').unwrap();
    let user = user_info.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{hosts}")
}

#[test]
fn concurrent_openers_of_a_new_schema_migrate_it_once() {
    let Some(url) = server() else { return };
    let name = format!("t_migrate_{}", std::process::id());
    let barrier = Arc::new(Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (url, name, barrier) = (url.clone(), name.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                TestSchema::existing(&url, &name).open()
            })
        })
        .collect();
    let stores: Vec<PostgresStore> = openers
        .into_iter()
        .map(|opener| opener.join().unwrap().unwrap())
        .collect();
    // Owns the schema from here on, so it is dropped at the end.
    let schema = TestSchema::attach(&url, &name).unwrap();
    let versions = raw_query(
        &url,
        &format!("SELECT version FROM {name}.{MIGRATIONS_TABLE} ORDER BY version"),
    );
    let expected: Vec<Option<String>> = (1..=latest_version())
        .map(|v| Some(v.to_string()))
        .collect();
    assert_eq!(versions, expected);
    assert!(stores.iter().all(|store| store.schema() == name));
    stores[0]
        .create_or_get(new_run("run-a", "key-a", json!({})))
        .unwrap();
    assert!(stores[3].find_by_key("key-a").unwrap().is_some());
    drop(schema);
}

#[test]
fn a_schema_from_a_newer_build_or_another_application_is_refused() {
    let Some(url) = server() else { return };
    let newer = TestSchema::create(&url).unwrap();
    raw_query(
        &url,
        &format!(
            "INSERT INTO {}.{MIGRATIONS_TABLE} (version) VALUES (999)",
            newer.name()
        ),
    );
    let error = newer.open().unwrap_err();
    assert_eq!(
        error,
        LedgerError::SchemaTooNew {
            found: 999,
            supported: i64::from(latest_version())
        }
    );
    assert_eq!(error.code(), "ledger.schema_too_new");

    let foreign = format!("t_foreign_{}", std::process::id());
    raw_query(
        &url,
        &format!("CREATE SCHEMA {foreign}; CREATE TABLE {foreign}.runs (x integer)"),
    );
    let error = TestSchema::existing(&url, &foreign).open().unwrap_err();
    raw_query(&url, &format!("DROP SCHEMA {foreign} CASCADE"));
    assert!(matches!(error, LedgerError::NotALedger { .. }), "{error}");
}

#[test]
fn unreachable_servers_and_wrong_passwords_are_clear_errors_without_the_password() {
    let Some(url) = server() else { return };
    let quick = PostgresOptions {
        connect_timeout: Duration::from_secs(3),
        ..PostgresOptions::default()
    };
    let canary = "CANARY-pw-4f1d";
    // Port 1 on loopback: nothing listens there.
    let nowhere = format!("postgres://trellis:{canary}@127.0.0.1:1/trellis");
    let error = PostgresStore::open_with(&nowhere, quick.clone()).unwrap_err();
    assert_eq!(error.code(), "ledger.unavailable", "{error}");
    assert!(!format!("{error} {error:?}").contains(canary));

    let wrong = url_with_password(&url, canary);
    let error = PostgresStore::open_with(&wrong, quick).unwrap_err();
    assert_eq!(error.code(), "ledger.unavailable", "{error}");
    assert!(error.to_string().contains("credentials"), "{error}");
    assert!(!format!("{error} {error:?}").contains(canary));
}

#[test]
fn a_location_url_may_name_its_schema_through_the_standard_options_parameter() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let with_path = schema.location_url();
    let location = LedgerLocation::parse(&with_path).unwrap();
    assert!(!location.to_string().contains(&url_password(&url)));
    let store = location.open().unwrap();
    store
        .create_or_get(new_run("via-url", "key-url", json!({})))
        .unwrap();
    assert!(
        schema
            .open()
            .unwrap()
            .find_by_key("key-url")
            .unwrap()
            .is_some()
    );
}

/// A server that takes no writes (a standby, or `default_transaction_read_only`) is named as
/// such with what to do, not as a bare SQLSTATE.
#[test]
fn a_read_only_server_says_so_and_what_to_do() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let read_only = format!(
        "{}%20-c%20default_transaction_read_only%3Don",
        schema.location_url()
    );
    let location = LedgerLocation::parse(&read_only).unwrap();
    let error = match location.open() {
        Ok(store) => store
            .create_or_get(new_run("read-only", "key-read-only", json!({})))
            .expect_err("a read-only server refuses the write"),
        Err(error) => error,
    };
    assert_eq!(error.code(), "ledger.read_only", "{error}");
    let text = error.to_string();
    assert!(
        text.contains("accepts no writes") && text.contains("primary"),
        "{text}"
    );
    assert!(!text.contains(&url_password(&url)), "{text}");
}

fn url_password(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let user_info = rest.rsplit_once('@').unwrap().0;
    user_info.split_once(':').unwrap().1.to_owned()
}

#[test]
fn a_writer_blocked_on_a_runs_row_lock_fails_busy_after_the_lock_timeout() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let store = PostgresStore::open_with(
        &url,
        PostgresOptions {
            lock_timeout: Duration::from_millis(300),
            ..schema.options()
        },
    )
    .unwrap();
    store
        .create_or_get(new_run("run-1", "key-1", json!({})))
        .unwrap();
    let run = run_id("run-1");
    // Another session holds the run's head row for a while.
    let holder = {
        let url = url.clone();
        let name = schema.name().to_owned();
        std::thread::spawn(move || {
            raw_query(
                &url,
                &format!(
                    "BEGIN; SELECT 1 FROM {name}.run_heads FOR UPDATE; SELECT pg_sleep(1.5); COMMIT"
                ),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let error = store.append(&run, &[RunEvent::RunStarted {}]).unwrap_err();
    assert_eq!(error, LedgerError::Busy);
    holder.join().unwrap();
    assert_eq!(
        store.append(&run, &[RunEvent::RunStarted {}]).unwrap(),
        Cursor::at(1).unwrap()
    );
}

#[test]
fn a_waiter_is_woken_by_another_stores_append_through_a_notification() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let waiter = schema.open().unwrap();
    let writer = schema.open().unwrap();
    waiter
        .create_or_get(new_run("run-1", "key-1", json!({})))
        .unwrap();
    let run = run_id("run-1");
    // The first wait starts the listening connection.
    let latest = waiter
        .wait_for_change(&run, Cursor::START, Duration::from_millis(300))
        .unwrap();
    assert_eq!(latest, Cursor::START);
    let append = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        writer
            .append(&run_id("run-1"), &[RunEvent::RunStarted {}])
            .unwrap()
    });
    let begun = Instant::now();
    let latest = waiter
        .wait_for_change(&run, Cursor::START, Duration::from_secs(30))
        .unwrap();
    let waited = begun.elapsed();
    assert_eq!(latest, append.join().unwrap());
    // Without the notification the waiter would only look again after its 5 s safety poll.
    assert!(waited < Duration::from_secs(4), "woken after {waited:?}");
    // A run nobody writes to keeps its waiter waiting until the timeout.
    let begun = Instant::now();
    let unchanged = waiter
        .wait_for_change(&run, latest, Duration::from_millis(400))
        .unwrap();
    assert_eq!(unchanged, latest);
    assert!(begun.elapsed() >= Duration::from_millis(400));
}

#[test]
fn the_store_works_from_inside_tokio_runtimes_and_can_be_dropped_there() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let store: Arc<dyn RunStore> = Arc::new(schema.open().unwrap());
    store
        .create_or_get(new_run("run-1", "key-1", json!({})))
        .unwrap();
    let run = run_id("run-1");

    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    current.block_on(async {
        store.append(&run, &[RunEvent::RunStarted {}]).unwrap();
    });

    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    multi.block_on(async {
        let tasks: Vec<_> = (1..=4u64)
            .map(|execution| {
                let store = Arc::clone(&store);
                let run = run.clone();
                tokio::spawn(async move {
                    store.append(&run, &[started(execution, "step")]).unwrap();
                    store.head(&run).unwrap()
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        // A store opened and dropped on a runtime worker thread.
        let inner = schema.open().unwrap();
        assert_eq!(inner.head(&run).unwrap().progress.executions_started, 4);
        drop(inner);
    });
    assert_eq!(store.latest_cursor(&run).unwrap().sequence(), 5);
}

#[test]
fn byte_needles_are_found_even_when_they_split_a_character() {
    let Some(url) = server() else { return };
    let schema = TestSchema::create(&url).unwrap();
    let store = schema.open().unwrap();
    store
        .create_or_get(new_run("run-1", "key-1", json!({"note": "naïve"})))
        .unwrap();
    let run = run_id("run-1");
    // "ï" is C3 AF in UTF-8; its first byte alone is not valid UTF-8.
    assert!(store.run_contains_bytes(&run, b"na\xC3").unwrap());
    assert!(!store.run_contains_bytes(&run, b"na\xC4").unwrap());
    assert!(matches!(
        store.run_contains_bytes(&run_id("ghost"), b"x"),
        Err(LedgerError::RunNotFound { .. })
    ));
}
