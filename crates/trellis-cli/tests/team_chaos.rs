//! The team on one PostgreSQL ledger under fire: two `trellis serve` hosts whose controllers
//! queue every execution, three `trellis worker` hosts running them with the command workers,
//! and concurrent runs of a race/loop/map graph. At seeded random points one worker is killed
//! (SIGKILL) mid-run and one serving host is killed with its controllers (a host crash); the
//! other host takes the orphaned runs over. Every run must still succeed with the right
//! output, no execution may settle twice, and every run's stored snapshot must equal the fold
//! of its events.
//!
//! Bounded for CI (`TRELLIS_CHAOS_SEEDS`, default 20 seeds, `TRELLIS_CHAOS_RUNS`, default 2
//! runs per seed); the full size is `TRELLIS_CHAOS_RUNS=20`. Skipped without a
//! PostgreSQL test server (`scripts/postgres.sh start`).

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use support::graph::{chain_graph, chain_output, composite_graph};
use support::{TRELLIS, send_signal, uniform_worker_plan};
use trellis_ledger::testing::postgres::{TestSchema, server_url};
use trellis_ledger::{EventFilter, RunEvent, RunId, RunStore, SettledBy, fold_snapshot};

const TOKEN: &str = "trellis_chaos_token_0a1b2c3d4e5f";
/// Short leases so lost hosts are noticed quickly.
const CONTROLLER_LEASE_MS: &str = "1500";
const CLAIM_LEASE_MS: &str = "1500";
/// How long every run of one seed may take to end: a liveness bound, not a speed check, so it
/// grows with the runs of a seed (20 runs on a loaded 2-core machine take about 100 s).
fn seed_timeout(runs: u64) -> Duration {
    Duration::from_secs(120.max(15 * runs))
}
const MAP_ITEMS: i64 = 4;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator: the kill points of a seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One `trellis` process of the team, killed (with its children) when dropped.
struct Host {
    child: Child,
    address: Option<String>,
}

impl Host {
    fn spawn(root: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let home = root.join(name);
        std::fs::create_dir_all(&home).expect("home");
        let log = std::fs::File::create(root.join(format!("{name}.log"))).expect("log");
        let mut command = Command::new(TRELLIS);
        command
            .args(args)
            .current_dir(&home)
            .env("TRELLIS_HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .env_remove("TRELLIS_LEDGER")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = command.spawn().expect("start trellis");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first: Value = lines
            .next()
            .and_then(Result::ok)
            .and_then(|line| serde_json::from_str(&line).ok())
            .unwrap_or_else(|| panic!("{name} did not start: see {}", root.display()));
        std::thread::spawn(move || lines.for_each(drop));
        Self {
            address: first["listening"].as_str().map(str::to_owned),
            child,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL to the host and to every process it started (a serving host's controllers).
    fn crash(&mut self) {
        let children = children_of(self.pid());
        send_signal(self.pid(), Signal::SIGKILL);
        for child in children {
            send_signal(child, Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.crash();
        }
    }
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&candidate| {
            std::fs::read_to_string(format!("/proc/{candidate}/stat"))
                .ok()
                .and_then(|stat| {
                    // The command name may hold spaces: fields resume after its ')'.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// The chaos graph: the composite race/loop/map whose race rival answers at once (a worker
/// slot is not held for ever) and whose executables may run three times (a lost worker
/// settles `crash`, retried).
fn chaos_graph() -> Value {
    fn adjust(node: &mut Value) {
        match node {
            Value::Object(fields) => {
                if fields.get("kind") == Some(&json!("step")) && fields["name"] == "slowRival" {
                    fields.insert("name".into(), json!("noopRival"));
                    fields.insert("worker".into(), json!("command.noopRival@1"));
                }
                if matches!(
                    fields.get("kind").and_then(Value::as_str),
                    Some("step" | "verifier")
                ) {
                    fields.insert("attempts".into(), json!(3));
                }
                fields.values_mut().for_each(adjust);
            }
            Value::Array(items) => items.iter_mut().for_each(adjust),
            _ => {}
        }
    }
    let mut graph = composite_graph();
    adjust(&mut graph);
    graph
}

/// Submits `body` to the team API; the new run's id, or what the server said.
async fn post_run(client: &reqwest::Client, base: &str, body: &Value) -> Result<String, String> {
    let answer = client
        .post(format!("{base}/api/v1/runs"))
        .bearer_auth(TOKEN)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let answer: Value = answer.json().await.map_err(|e| e.to_string())?;
    match answer["runId"].as_str() {
        Some(run) if status.is_success() => Ok(run.to_owned()),
        _ => Err(format!("{status}: {answer}")),
    }
}

async fn submit(client: &reqwest::Client, base: &str, key: &str) -> Result<String, String> {
    let items: Vec<Value> = (1..=MAP_ITEMS)
        .map(|value| json!({"value": value}))
        .collect();
    let body = json!({
        "submissionKey": key,
        "graph": chaos_graph(),
        "input": {"items": items, "round": 0},
        "plan": {"uniform": uniform_worker_plan(&[])},
    });
    post_run(client, base, &body).await
}

fn every_event(store: &dyn RunStore, run: &RunId) -> Vec<trellis_ledger::StoredEvent> {
    let mut events = Vec::new();
    let mut after = trellis_ledger::Cursor::at(0).expect("cursor");
    loop {
        let page = store
            .events_after(run, after, 1000, EventFilter::default())
            .expect("events");
        let Some(last) = page.last() else {
            return events;
        };
        after = last.cursor;
        events.extend(page);
    }
}

/// What the kills did to one run, for the test's tally.
#[derive(Debug, Default, Clone, Copy)]
struct Damage {
    /// It had more than one controller (taken over after its host crashed).
    taken_over: bool,
    /// Executions settled `crash` because their worker host was lost.
    workers_lost: usize,
}

/// Everything the test demands of one finished run; what the kills did to it.
fn check_run(store: &dyn RunStore, run: &RunId) -> Damage {
    let squares: Vec<i64> = (1..=MAP_ITEMS).map(|v| v * v).collect();
    let snapshot = store.snapshot(run).expect("snapshot");
    let terminal = serde_json::to_value(&snapshot.head.progress.terminal).expect("terminal");
    assert_eq!(
        terminal,
        json!({"status": "succeeded", "output": {"note": "fast", "round": 3, "squares": squares}}),
        "run {run}"
    );
    let events = every_event(store, run);
    let mut settled: BTreeMap<u64, usize> = BTreeMap::new();
    let mut damage = Damage::default();
    let mut controllers = 0;
    for event in &events {
        match &event.event {
            RunEvent::ControllerAttached { .. } => controllers += 1,
            RunEvent::NodeCompleted {
                settled_by: Some(SettledBy::WorkerLost),
                ..
            } => damage.workers_lost += 1,
            _ => {}
        }
        if let RunEvent::NodeCompleted { execution, .. }
        | RunEvent::ExecutionVoided { execution, .. } = &event.event
        {
            *settled.entry(*execution).or_default() += 1;
        }
    }
    let twice: Vec<_> = settled.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "run {run}: settled twice: {twice:?}");
    let record = store.record(run).expect("record");
    let folded = fold_snapshot(&record, &events).expect("fold");
    assert_eq!(folded, snapshot, "run {run}: the snapshot is not the fold");
    damage.taken_over = controllers > 1;
    damage
}

/// Waits until every run finished; the first one still running after `limit`, if any.
fn unfinished_after<'r>(
    store: &dyn RunStore,
    run_ids: &'r [RunId],
    limit: Duration,
) -> Option<&'r RunId> {
    let deadline = Instant::now() + limit;
    for run in run_ids {
        while !store.head(run).expect("head").is_finished() {
            if Instant::now() > deadline {
                return Some(run);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    None
}

fn one_seed(url: &str, seed: u64, runs: u64) -> Vec<Damage> {
    let schema = TestSchema::create(url).expect("schema");
    let ledger = schema.location_url();
    let root = tempfile::Builder::new()
        .prefix("trellis-chaos-")
        .tempdir()
        .expect("temp dir");
    let root_path = root.path().canonicalize().expect("canonical");
    let serve_env = [
        ("TEAM_TOKEN", TOKEN),
        ("TRELLIS_DISPATCH", "queue"),
        ("TRELLIS_CONTROLLER_LEASE_MS", CONTROLLER_LEASE_MS),
    ];
    let mut serves: Vec<Host> = (0..2)
        .map(|i| {
            let workspaces = root_path.join(format!("workspaces-{i}"));
            let workspaces = workspaces.to_str().expect("UTF-8");
            Host::spawn(
                &root_path,
                &format!("serve-{i}"),
                &[
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--token-env",
                    "TEAM_TOKEN",
                    "--workspaces",
                    workspaces,
                    "--ledger",
                    &ledger,
                    // The stand-in worker's script lies outside the workspace, which a
                    // sandbox does not show (containment is tested in containment.rs).
                    "--isolation",
                    "none",
                ],
                &serve_env,
            )
        })
        .collect();
    let mut workers: Vec<Host> = (0..3)
        .map(|i| {
            Host::spawn(
                &root_path,
                &format!("worker-{i}"),
                &[
                    "worker",
                    "--ledger",
                    &ledger,
                    "--slots",
                    "4",
                    "--lease-ms",
                    CLAIM_LEASE_MS,
                    "--poll-ms",
                    "50",
                ],
                &[],
            )
        })
        .collect();
    let client = reqwest::Client::new();
    let http = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an HTTP runtime");
    let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let bases: Vec<String> = serves
        .iter()
        .map(|s| format!("http://{}", s.address.as_deref().expect("address")))
        .collect();
    let mut run_ids = Vec::new();
    for index in 0..runs {
        let base = &bases[(index % 2) as usize];
        let run = http
            .block_on(submit(&client, base, &format!("chaos-{seed}-{index}")))
            .unwrap_or_else(|e| panic!("seed {seed}: submit: {e}"));
        run_ids.push(RunId::new(&run).expect("run id"));
    }
    // The kill points: a worker, then a serving host, at random moments of the runs.
    let worker_at = Duration::from_millis(100 + dice.below(1500));
    let serve_at = Duration::from_millis(100 + dice.below(2500));
    let victim_worker = dice.below(3) as usize;
    let victim_serve = dice.below(2) as usize;
    let started = Instant::now();
    let mut pending = vec![(worker_at, true), (serve_at, false)];
    pending.sort();
    for (at, is_worker) in pending {
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        if is_worker {
            workers[victim_worker].crash();
        } else {
            serves[victim_serve].crash();
        }
    }
    let store = schema.open().expect("open the ledger");
    if let Some(run) = unfinished_after(&store, &run_ids, seed_timeout(runs)) {
        // Keep the hosts' logs for whoever reads the failure.
        let kept = root.keep();
        panic!(
            "seed {seed}: run {run} did not finish; logs in {}",
            kept.display()
        );
    }
    let damage = run_ids.iter().map(|run| check_run(&store, run)).collect();
    drop(workers);
    drop(serves);
    drop(store);
    damage
}

#[test]
fn runs_survive_a_killed_worker_and_a_crashed_serving_host() {
    let url = match server_url() {
        Ok(Some(url)) => url,
        Ok(None) => return eprintln!("skipped: no PostgreSQL test server"),
        Err(message) => panic!("{message}"),
    };
    let seeds = setting("TRELLIS_CHAOS_SEEDS", 20);
    let runs = setting("TRELLIS_CHAOS_RUNS", 2);
    let mut damage = Vec::new();
    let started = Instant::now();
    for seed in 1..=seeds {
        damage.extend(one_seed(&url, seed, runs));
        eprintln!("seed {seed}: {runs} runs ended well");
    }
    let taken_over = damage.iter().filter(|d| d.taken_over).count();
    let workers_lost: usize = damage.iter().map(|d| d.workers_lost).sum();
    eprintln!(
        "{} runs over {seeds} seeds in {:.0} s: {taken_over} taken over by the other host, \
         {workers_lost} executions settled worker_lost and retried",
        damage.len(),
        started.elapsed().as_secs_f64()
    );
    // The kills must have hit something, or the test proved nothing.
    assert!(taken_over > 0, "no run was ever taken over");
}

/// A serving host and its controllers on a ledger that goes away: every connection to the
/// PostgreSQL server passes a loopback proxy that, at seeded random moments while the runs
/// work, cuts them all and refuses new ones for 1–5 s. Every run must still succeed with the
/// right output, each of its steps must have been called exactly once, no execution may settle
/// twice or be settled by Trellis instead of its worker (`runtime_lost`), and every snapshot
/// must equal the fold of its events. Bounded for CI (`TRELLIS_OUTAGE_SEEDS`, default 2, runs
/// per seed `TRELLIS_OUTAGE_RUNS`, default 3, outages per seed `TRELLIS_OUTAGES`, default 3).
#[test]
fn runs_ride_out_ledger_outages() {
    let url = match server_url() {
        Ok(Some(url)) => url,
        Ok(None) => return eprintln!("skipped: no PostgreSQL test server"),
        Err(message) => panic!("{message}"),
    };
    let seeds = setting("TRELLIS_OUTAGE_SEEDS", 2);
    let runs = setting("TRELLIS_OUTAGE_RUNS", 3);
    let outages = setting("TRELLIS_OUTAGES", 3);
    let mut away = 0.0;
    for seed in 1..=seeds {
        away += outage_seed(&url, seed, runs, outages);
        eprintln!("seed {seed}: {runs} runs ended well through {outages} outages");
    }
    eprintln!(
        "{} runs over {seeds} seeds: none lost, no step called twice, {away:.1} s without a ledger",
        seeds * runs
    );
}

/// Steps of the chain each outage run works through, and how long each takes.
const OUTAGE_CHAIN_STEPS: usize = 28;
const OUTAGE_STEP_MS: &str = "600";

async fn submit_chain(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    v: i64,
) -> Result<String, String> {
    let body = json!({
        "submissionKey": key,
        "workspace": key,
        "graph": chain_graph(OUTAGE_CHAIN_STEPS),
        "input": {"v": v},
        "plan": {"uniform": uniform_worker_plan(&[("WORKER_DELAY_MS", OUTAGE_STEP_MS)])},
    });
    post_run(client, base, &body).await
}

/// One seed of [`runs_ride_out_ledger_outages`]; the seconds the ledger was away.
fn outage_seed(url: &str, seed: u64, runs: u64, outages: u64) -> f64 {
    use trellis_testkit::fault_proxy::{FaultProxy, upstream_of};

    let schema = TestSchema::create(url).expect("schema");
    let upstream = upstream_of(url).expect("a host:port test server URL");
    let proxy = FaultProxy::start(upstream).expect("proxy");
    let ledger = proxy.url(&schema.location_url());
    let root = tempfile::Builder::new()
        .prefix("trellis-outage-")
        .tempdir()
        .expect("temp dir");
    let root_path = root.path().canonicalize().expect("canonical");
    let keep_logs = std::env::var_os("TRELLIS_KEEP_OUTAGE_LOGS").is_some();
    let workspaces = root_path.join("workspaces");
    let serve = Host::spawn(
        &root_path,
        "serve",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            "TEAM_TOKEN",
            "--workspaces",
            workspaces.to_str().expect("UTF-8"),
            "--ledger",
            &ledger,
            "--isolation",
            "none",
        ],
        // Longer than any outage: a lease lost to an outage would be a lost run.
        &[
            ("TEAM_TOKEN", TOKEN),
            ("TRELLIS_CONTROLLER_LEASE_MS", "9000"),
        ],
    );
    let base = format!("http://{}", serve.address.as_deref().expect("address"));
    let client = reqwest::Client::new();
    let http = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an HTTP runtime");
    let keys: Vec<String> = (0..runs).map(|i| format!("outage-{seed}-{i}")).collect();
    let run_ids: Vec<RunId> = keys
        .iter()
        .zip(1..)
        .map(|(key, v)| {
            let run = http
                .block_on(submit_chain(&client, &base, key, v))
                .unwrap_or_else(|e| panic!("seed {seed}: submit: {e}"));
            RunId::new(&run).expect("run id")
        })
        .collect();
    let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut away = 0.0;
    for _ in 0..outages {
        // Outages at random points of the runs, the ledger back for a while in between.
        std::thread::sleep(Duration::from_millis(1500 + dice.below(2500)));
        let length = Duration::from_millis(1000 + dice.below(4000));
        away += length.as_secs_f64();
        proxy.outage(length).join().expect("outage");
    }
    let store = schema.open().expect("open the ledger");
    if let Some(run) = unfinished_after(&store, &run_ids, seed_timeout(runs)) {
        // Keep the hosts' logs for whoever reads the failure.
        let kept = root.keep();
        panic!(
            "seed {seed}: run {run} did not finish; logs in {}",
            kept.display()
        );
    }
    for ((run, key), v) in run_ids.iter().zip(&keys).zip(1..) {
        let snapshot = store.snapshot(run).expect("snapshot");
        let terminal = serde_json::to_value(&snapshot.head.progress.terminal).expect("terminal");
        let expected =
            json!({"status": "succeeded", "output": chain_output(OUTAGE_CHAIN_STEPS, v)});
        if terminal != expected {
            let kept = root.keep();
            panic!(
                "seed {seed}: run {run} ended {terminal}; logs in {}",
                kept.display()
            );
        }
        let events = every_event(&store, run);
        let mut settled: BTreeMap<u64, usize> = BTreeMap::new();
        for event in &events {
            match &event.event {
                RunEvent::NodeCompleted {
                    execution,
                    settled_by,
                    ..
                } => {
                    assert!(settled_by.is_none(), "run {run}: {event:?}");
                    *settled.entry(*execution).or_default() += 1;
                }
                RunEvent::ControllerAttached { .. } => {}
                _ => {}
            }
        }
        assert!(settled.values().all(|n| *n == 1), "run {run}: {settled:?}");
        let record = store.record(run).expect("record");
        assert_eq!(fold_snapshot(&record, &events).expect("fold"), snapshot);
        // Each step was called exactly once: no settled call ran again.
        let calls = std::fs::read_to_string(workspaces.join(key).join("invocations.log"))
            .expect("the worker's invocation log");
        assert_eq!(
            calls.lines().count(),
            OUTAGE_CHAIN_STEPS,
            "run {run}: {calls}"
        );
    }
    drop(serve);
    drop(store);
    if keep_logs {
        eprintln!("logs kept in {}", root.keep().display());
    }
    away
}
