//! A PostgreSQL ledger riding out a server outage, through a loopback proxy that injects the
//! faults a restart or a failover causes: every open connection cut and new ones refused for a
//! while, and a connection cut right after the server received `COMMIT` (the batch is stored,
//! its answer lost). Calls wait the outage out; no batch is stored twice. Needs
//! `TRELLIS_TEST_POSTGRES_URL` (skipped without it, failing in CI).

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{new_run, run_id, started};
use serde_json::json;
use trellis_ledger::testing::postgres::{TestSchema, server_url};
use trellis_ledger::{
    Cursor, EventFilter, PostgresOptions, PostgresStore, RunEvent, RunId, RunStore,
};

fn server() -> Option<String> {
    let url = server_url().unwrap_or_else(|message| panic!("{message}"));
    if url.is_none() {
        eprintln!("skipped: set TRELLIS_TEST_POSTGRES_URL to run the PostgreSQL tests");
    }
    url
}

/// A TCP proxy in front of the server whose faults a test switches on.
struct Proxy {
    address: SocketAddr,
    refusing: Arc<AtomicBool>,
    cut_after_commit: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let proxy = Self {
            address,
            refusing: Arc::new(AtomicBool::new(false)),
            cut_after_commit: Arc::new(AtomicBool::new(false)),
            open: Arc::new(Mutex::new(Vec::new())),
        };
        let (refusing, cut, open) = (
            Arc::clone(&proxy.refusing),
            Arc::clone(&proxy.cut_after_commit),
            Arc::clone(&proxy.open),
        );
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if refusing.load(Ordering::SeqCst) {
                    // As a server that is down: the connection ends at once.
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let mut tracked = open.lock().expect("lock");
                tracked.extend(client.try_clone().ok());
                tracked.extend(server.try_clone().ok());
                drop(tracked);
                // Set while a cut is under way: the server's answer is never relayed.
                let muted = Arc::new(AtomicBool::new(false));
                let to_server = Fault {
                    cut: Some(Arc::clone(&cut)),
                    muted: Arc::clone(&muted),
                };
                pump(client.try_clone(), server.try_clone(), to_server);
                let to_client = Fault { cut: None, muted };
                pump(server.try_clone(), client.try_clone(), to_client);
            }
        });
        proxy
    }

    /// Cuts every open connection and refuses new ones for `length`.
    fn outage(&self, length: Duration) -> std::thread::JoinHandle<()> {
        self.refusing.store(true, Ordering::SeqCst);
        for stream in self.open.lock().expect("lock").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let refusing = Arc::clone(&self.refusing);
        std::thread::spawn(move || {
            std::thread::sleep(length);
            refusing.store(false, Ordering::SeqCst);
        })
    }

    fn url(&self, server_url: &str) -> String {
        let (scheme, rest) = server_url.split_once("://").expect("scheme");
        let (user_info, after_at) = rest.rsplit_once('@').expect("user info");
        let tail = after_at.find(['/', '?']).map_or("", |at| &after_at[at..]);
        format!("{scheme}://{user_info}@{}{tail}", self.address)
    }
}

/// The fault one direction of a connection may inject.
struct Fault {
    /// Client to server: when armed, the next chunk holding `COMMIT` reaches the server and
    /// then both connections are cut.
    cut: Option<Arc<AtomicBool>>,
    /// Server to client: set once such a cut began, so no answer comes back.
    muted: Arc<AtomicBool>,
}

/// Copies `from` to `to` on a thread, injecting `fault`.
fn pump(from: std::io::Result<TcpStream>, to: std::io::Result<TcpStream>, fault: Fault) {
    let (Ok(mut from), Ok(mut to)) = (from, to) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        while let Ok(read) = from.read(&mut buffer) {
            let chunk = &buffer[..read];
            let commits = chunk.windows(6).any(|window| window == b"COMMIT");
            let cutting = commits
                && fault
                    .cut
                    .as_ref()
                    .is_some_and(|cut| cut.swap(false, Ordering::SeqCst));
            if cutting {
                fault.muted.store(true, Ordering::SeqCst);
            }
            if read == 0 || fault.muted.load(Ordering::SeqCst) && fault.cut.is_none() {
                break;
            }
            if to.write_all(chunk).is_err() {
                break;
            }
            if cutting {
                // Let the server commit, then cut before its answer can come back.
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
}

fn upstream(url: &str) -> SocketAddr {
    let rest = url.split_once("://").expect("scheme").1;
    let after_at = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let host_port = after_at.split(['/', '?']).next().expect("host");
    host_port.parse().expect("a host:port URL on loopback")
}

struct Setup {
    schema: TestSchema,
    proxy: Proxy,
    /// The store under test, connected through the proxy.
    store: PostgresStore,
    /// A store connected straight to the server, for checking what was stored.
    direct: PostgresStore,
    run: RunId,
}

fn setup(url: &str, outage_window: Duration) -> Setup {
    let schema = TestSchema::create(url).expect("schema");
    let proxy = Proxy::start(upstream(url));
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
