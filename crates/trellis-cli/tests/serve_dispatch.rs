//! `trellis serve --dispatch local|queue`: the setting is in `--help`, queueing is refused
//! without a PostgreSQL ledger, and on one (the test server, a fresh schema) it decides where
//! executions run whatever `$TRELLIS_DISPATCH` says: `queue` waits for a `trellis worker`,
//! `local` runs them under the controller even when the environment asks for the queue; what
//! an execution on a worker host prints reaches the run's ledger while it still runs; a killed
//! worker host's steps die with it; and serve's controllers wait on serve's one listening
//! connection, then on their own once serve is gone.

mod support;

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::graph::{doubling_graph, one_step_graph};
use support::serve::Server;
use support::{STATE_TIMEOUT, Sandbox, uniform_worker_plan, wait_until};
use trellis_ledger::testing::postgres::TestSchema;
use trellis_ledger::{Cursor, EventFilter, PostgresStore, RunEvent, RunId, RunStore};

const TOKEN: &str = "trellis_dispatch_token_3c2b1a";

/// A `trellis worker` process, killed when the test is done with it.
struct KilledOnDrop(Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `trellis worker` host on `ledger` (looking at the queue every 50 ms besides its notes).
fn worker_host(sandbox: &Sandbox, ledger: &str) -> KilledOnDrop {
    let worker = sandbox
        .command(&["worker", "--ledger", ledger, "--poll-ms", "50"])
        .spawn()
        .expect("start trellis worker");
    KilledOnDrop(worker)
}

/// Starts `trellis serve` with `extra` arguments and `env`; answers it and its base URL.
fn serve(sandbox: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> (Server, String) {
    let server = Server::start(sandbox, TOKEN, None, extra, env);
    let base = server.base.clone();
    (server, base)
}

/// `serve --dispatch queue` on `schema`: its ledger location, a store on it, the sandbox,
/// the server and its base URL (dropped in the reverse order: the server first).
fn queue_serve(schema: &TestSchema) -> (String, PostgresStore, Sandbox, Server, String) {
    let ledger = schema.location_url();
    let store = schema.open().expect("a store on the test schema");
    let sandbox = Sandbox::new();
    let (server, base) = serve(&sandbox, &["--ledger", &ledger, "--dispatch", "queue"], &[]);
    (ledger, store, sandbox, server, base)
}

fn call(base: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an HTTP runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .request(method, format!("{base}/api/v1{path}"))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("a JSON answer")
    })
}

fn submit(base: &str, key: &str) -> String {
    submit_graph(base, key, doubling_graph())
}

fn submit_graph(base: &str, key: &str, graph: Value) -> String {
    let answer = call(
        base,
        reqwest::Method::POST,
        "/runs",
        Some(json!({
            "submissionKey": key,
            "graph": graph,
            "input": {"value": 5},
            "plan": {"uniform": uniform_worker_plan(&[])},
        })),
    );
    answer["runId"].as_str().expect("run id").to_owned()
}

/// The run's terminal result once it has one, polling until `within` has passed.
fn result_within(base: &str, run: &str, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let status = call(base, reqwest::Method::GET, &format!("/runs/{run}"), None);
        let result = &status["status"]["terminalResult"];
        if !result.is_null() {
            return Some(result.clone());
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_setting_is_documented_and_queueing_needs_a_shared_ledger() {
    let sandbox = Sandbox::new();
    let help = sandbox.trellis(&["serve", "--help"]).success();
    assert!(help.stdout.contains("--dispatch <MODE>"), "{}", help.stdout);
    assert!(help.stdout.contains("TRELLIS_DISPATCH"), "{}", help.stdout);
    let refused = sandbox.trellis_with_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            "TEAM_TOKEN",
            "--dispatch",
            "queue",
        ],
        &[("TEAM_TOKEN", TOKEN)],
    );
    assert_eq!(refused.code, Some(1), "{refused:#?}");
    assert!(refused.stderr.contains("PostgreSQL"), "{refused:#?}");
    let unknown = sandbox.trellis(&["serve", "--dispatch", "elsewhere"]);
    assert_eq!(unknown.code, Some(2), "{unknown:#?}");
}

#[test]
fn on_postgresql_the_flag_decides_where_executions_run() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let ledger = schema.location_url();
    let sandbox = Sandbox::new();

    // `--dispatch local` wins over an environment asking for the queue: no worker needed.
    let (local, base) = serve(
        &sandbox,
        &["--ledger", &ledger, "--dispatch", "local"],
        &[("TRELLIS_DISPATCH", "queue")],
    );
    let run = submit(&base, "dispatch-local");
    let result = result_within(&base, &run, STATE_TIMEOUT).expect("the run ends");
    assert_eq!(
        result,
        json!({"status": "succeeded", "output": {"result": 10}})
    );
    drop(local);

    // `--dispatch queue` with nothing in the environment: the run waits for a worker host.
    let (queued, base) = serve(&sandbox, &["--ledger", &ledger, "--dispatch", "queue"], &[]);
    let run = submit(&base, "dispatch-queue");
    assert_eq!(
        result_within(&base, &run, Duration::from_secs(3)),
        None,
        "no worker host runs, so nothing may have run the execution"
    );
    let worker = worker_host(&sandbox, &ledger);
    let result = result_within(&base, &run, STATE_TIMEOUT).expect("the worker ran it");
    assert_eq!(
        result,
        json!({"status": "succeeded", "output": {"result": 10}})
    );
    drop(worker);
    drop(queued);
}

/// State `{value, result?}`: the command worker's `gate` step (it prints a line, then waits
/// for the file `open-gate` in the workspace and answers `value + 1`), then `{result}`.
fn gated_graph() -> Value {
    one_step_graph("gate")
}

/// The messages of the run's log events that contain `needle`.
fn log_lines(store: &PostgresStore, run: &RunId, needle: &str) -> Vec<String> {
    store
        .events_after(run, Cursor::START, 10_000, EventFilter::LogsOnly)
        .expect("the run's log events")
        .into_iter()
        .filter_map(|stored| match stored.event {
            RunEvent::Log { message, .. } if message.contains(needle) => Some(message),
            _ => None,
        })
        .collect()
}

#[test]
fn a_worker_hosts_lines_reach_the_ledger_while_the_execution_runs() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (ledger, store, sandbox, server, base) = queue_serve(&schema);
    let worker = worker_host(&sandbox, &ledger);
    let run = submit_graph(&base, "live-logs", gated_graph());
    let run_id = RunId::new(&run).expect("a run id");

    // The gate waits for a file only this test creates, once it saw the gate's first line:
    // were lines sent only with the outcome, this would wait in vain.
    let seen = wait_until("the gate's line in the ledger", STATE_TIMEOUT, || {
        let lines = log_lines(&store, &run_id, "gate attempt");
        (!lines.is_empty()).then_some(lines)
    });
    assert!(seen[0].contains("starting"), "{seen:?}");
    let record = store.record(&run_id).expect("the run's record");
    let workspace = record.submission["workspace"]
        .as_str()
        .expect("the run's workspace")
        .to_owned();
    std::fs::write(std::path::Path::new(&workspace).join("open-gate"), "").expect("open gate");

    let result = result_within(&base, &run, STATE_TIMEOUT).expect("the run ends");
    assert_eq!(
        result,
        json!({"status": "succeeded", "output": {"result": 6}})
    );
    // Pushed while it ran, the line is not sent again with the outcome.
    assert_eq!(log_lines(&store, &run_id, "gate attempt").len(), 1);
    drop(worker);
    drop(server);
}

/// A worker host killed with SIGKILL takes its steps with it: each runs under a guard that
/// kills the step's process group once the host is gone, so nothing it started lives on
/// beside the copy the run dispatches again when the claim expires.
#[test]
fn a_killed_worker_hosts_steps_die_with_it_within_the_claim_lease() {
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (ledger, store, sandbox, server, base) = queue_serve(&schema);
    let lease = Duration::from_millis(1500);
    let mut worker = sandbox
        .command(&[
            "worker",
            "--ledger",
            &ledger,
            "--poll-ms",
            "50",
            "--lease-ms",
            &lease.as_millis().to_string(),
        ])
        .spawn()
        .expect("start trellis worker");
    let run = submit_graph(&base, "orphans", one_step_graph("blockStep"));
    let run_id = RunId::new(&run).expect("a run id");
    let record = store.record(&run_id).expect("the run's record");
    let workspace = std::path::PathBuf::from(
        record.submission["workspace"]
            .as_str()
            .expect("the run's workspace"),
    );
    let pids_file = workspace.join("pids-blockStep.json");
    let pids: Value = wait_until("the step to record its pids", STATE_TIMEOUT, || {
        std::fs::read(&pids_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
    });
    let step = u32::try_from(pids["worker"].as_u64().expect("pid")).expect("u32");
    let grandchild = u32::try_from(pids["grandchild"].as_u64().expect("pid")).expect("u32");
    assert!(support::process_alive(step) && support::process_alive(grandchild));

    // Only the host dies, as with `kill -9` or an out-of-memory kill: not its group.
    support::send_signal(worker.id(), support::Signal::SIGKILL);
    let _ = worker.wait();
    let killed = Instant::now();
    wait_until(
        "the orphaned step and its child to die",
        STATE_TIMEOUT,
        || (!support::process_alive(step) && !support::process_alive(grandchild)).then_some(()),
    );
    let gone_after = killed.elapsed();
    assert!(
        gone_after < lease,
        "the orphans lived {gone_after:?}, past the {lease:?} claim lease"
    );
    eprintln!("orphaned step gone {gone_after:?} after its host");
    drop(server);
}

/// The server processes of the connections whose last statement was `LISTEN` on one of
/// `channels` (a listening connection runs nothing else, so that says what it listens on).
fn listening_pids(url: &str, channels: &[String]) -> Vec<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
        let driver = tokio::spawn(connection);
        let statements: Vec<String> = channels.iter().map(|c| format!("LISTEN \"{c}\"")).collect();
        let rows = client
            .query(
                "SELECT pid FROM pg_stat_activity WHERE query = ANY($1) ORDER BY pid",
                &[&statements],
            )
            .await
            .expect("read pg_stat_activity");
        drop(client);
        let _ = driver.await;
        rows.iter().map(|row| row.get(0)).collect()
    })
}

/// Controllers started by `serve` on PostgreSQL take their wake-ups from serve's one listening
/// connection (so thirty runs add no listener, and PostgreSQL signals no more backends per
/// commit); once serve is gone they listen on connections of their own and still finish.
#[test]
fn controllers_listen_through_serve_and_on_their_own_once_it_is_gone() {
    use trellis_ledger::postgres::dispatch_notes::{DispatchNote, channel};
    let Some(schema) = TestSchema::for_test() else {
        return;
    };
    let (ledger, store, sandbox, server, base) = queue_serve(&schema);
    let runs: Vec<RunId> = ["relayed-a", "relayed-b", "relayed-c"]
        .iter()
        .map(|key| RunId::new(&submit(&base, key)).expect("a run id"))
        .collect();
    let channels: Vec<String> = runs
        .iter()
        .map(|run| channel(schema.name(), &DispatchNote::Dispatch(run.clone())))
        .collect();
    // Without a worker host the runs wait on their notes: every controller has asked for its
    // channel once one connection listens on the last of them.
    let relayed = wait_until("a listener for the runs", STATE_TIMEOUT, || {
        let pids = listening_pids(schema.url(), &channels);
        (!pids.is_empty()).then_some(pids)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        listening_pids(schema.url(), &channels),
        relayed,
        "three waiting controllers, one listening connection (serve's)"
    );
    assert_eq!(relayed.len(), 1);

    server.kill();
    let own = wait_until("each controller to listen itself", STATE_TIMEOUT, || {
        let pids = listening_pids(schema.url(), &channels);
        (pids.len() == runs.len()).then_some(pids)
    });
    assert!(!own.contains(&relayed[0]), "serve's connection is gone");

    let worker = worker_host(&sandbox, &ledger);
    for run in &runs {
        let head = wait_until("the run to finish without serve", STATE_TIMEOUT, || {
            let head = store.head(run).expect("the run's head");
            head.is_finished().then_some(head)
        });
        assert_eq!(
            head.progress.terminal,
            Some(trellis_ledger::TerminalResult::Succeeded {
                output: json!({"result": 10})
            }),
            "{run}"
        );
    }
    drop(worker);
}
