//! Load generator for the team API on loopback: N concurrent clients (default 100) hammer
//! `GET /api/v1/runs/{run}` and then `POST /api/v1/runs` for a bounded time each, and the
//! latency percentiles are printed. Submissions run a graph without executables to its end
//! inside the request (in-process start), so a submit's figure includes admission, creation
//! and the whole run's ledger writes.
//!
//! `cargo bench -p trellis-server --bench api_load` (SQLite in a temp directory);
//! `TRELLIS_BENCH_LEDGER=postgres://…` for PostgreSQL; `TRELLIS_BENCH_SECONDS` (default 5)
//! and `TRELLIS_BENCH_CLIENTS` (default 100).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_runtime::{LedgerLocation, Runtime, RuntimeOptions, StartMode};
use trellis_server::BearerTokens;
use trellis_server::team::{self, TeamState};

const TOKEN: &str = "trellis_bench_token";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn graph() -> Value {
    let state = json!({"kind": "record", "fields": {
        "value": {"type": {"kind": "integer"}, "required": true}}});
    json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": state,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [],
                 "children": [{"kind": "succeed", "name": "done", "output": state,
                     "bindings": [{"target": ["value"], "value": {"source": "state", "path": ["value"]}}]}]},
    })
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(name: &str, mut latencies: Vec<Duration>, errors: usize, elapsed: Duration) {
    latencies.sort_unstable();
    println!(
        "{name}: {} requests ({errors} errors) in {:.1} s = {:.0}/s; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

/// Runs `clients` tasks that each send `request(client, i)` until `duration` is over.
async fn load<F, Fut>(clients: u64, duration: Duration, request: F) -> (Vec<Duration>, usize)
where
    F: Fn(u64, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let request = Arc::new(request);
    let deadline = Instant::now() + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let request = Arc::clone(&request);
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0;
                let mut sequence = 0;
                while Instant::now() < deadline {
                    let started = Instant::now();
                    if request(client, sequence).await {
                        latencies.push(started.elapsed());
                    } else {
                        errors += 1;
                    }
                    sequence += 1;
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for task in tasks {
        if let Ok((latencies, failed)) = task.await {
            all.extend(latencies);
            errors += failed;
        }
    }
    (all, errors)
}

fn main() {
    let seconds = env_number("TRELLIS_BENCH_SECONDS", 5);
    let clients = env_number("TRELLIS_BENCH_CLIENTS", 100);
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = match std::env::var("TRELLIS_BENCH_LEDGER") {
        Ok(url) => LedgerLocation::parse(&url).expect("ledger location"),
        Err(_) => LedgerLocation::Sqlite(dir.path().join("ledger.sqlite3")),
    };
    println!("ledger: {ledger}; {clients} clients, {seconds} s per phase");
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(dir.path().join("state")),
        ledger: Some(ledger),
        controller_program: None,
    })
    .expect("runtime");
    let state = TeamState::new(
        Arc::new(runtime),
        dir.path().join("workspaces"),
        StartMode::InProcess,
        1024,
    )
    .expect("state");
    let mut tokens = BearerTokens::new();
    tokens.add_secret("bench", TOKEN).expect("token");
    let app = team::app(state, tokens);

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(trellis_server::serve_with(
            listener,
            app,
            trellis_server::Limits::default(),
            None,
            std::future::pending(),
        ));
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(clients as usize)
            .build()
            .expect("client");
        let submit = |key: String| {
            client
                .post(format!("{base}/api/v1/runs"))
                .bearer_auth(TOKEN)
                .json(&json!({"submissionKey": key, "graph": graph(), "input": {"value": 1}}))
                .send()
        };
        let seeded: Value = submit("seed".to_owned())
            .await
            .expect("seed")
            .json()
            .await
            .expect("seed answer");
        let run = seeded["runId"].as_str().expect("run id").to_owned();

        let duration = Duration::from_secs(seconds);
        let status_url = format!("{base}/api/v1/runs/{run}");
        let status_client = client.clone();
        let started = Instant::now();
        let (latencies, errors) = load(clients, duration, move |_, _| {
            let request = status_client.get(&status_url).bearer_auth(TOKEN).send();
            async move {
                match request.await {
                    Ok(response) => {
                        response.status().is_success() && response.bytes().await.is_ok()
                    }
                    Err(_) => false,
                }
            }
        })
        .await;
        report("GET status", latencies, errors, started.elapsed());

        let submit_url = format!("{base}/api/v1/runs");
        let submit_client = client.clone();
        let started = Instant::now();
        let (latencies, errors) = load(clients, duration, move |client, sequence| {
            let request = submit_client
                .post(&submit_url)
                .bearer_auth(TOKEN)
                .json(&json!({"submissionKey": format!("c{client}-{sequence}"),
                              "graph": graph(), "input": {"value": 1}}))
                .send();
            async move {
                match request.await {
                    Ok(response) => response.status().as_u16() == 201,
                    Err(_) => false,
                }
            }
        })
        .await;
        report(
            "POST submit (admit + create + run in-process)",
            latencies,
            errors,
            started.elapsed(),
        );
    });
}
