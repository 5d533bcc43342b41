//! Append cost per node execution (a `node_started` + `node_completed` pair, each its own
//! transaction as the runtime commits them) on a file-backed WAL ledger, at 64 and 1,024
//! executions per run, plus bytes on disk per execution. With `TRELLIS_TEST_POSTGRES_URL`
//! set, the same pairs on PostgreSQL (a fresh schema; `full` = `synchronous_commit = on`,
//! which means something only on a server running with `fsync = on`).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use trellis_graph::{NodeName, WorkerOutcome};
use trellis_ledger::testing::postgres::{TestSchema, server_url};
use trellis_ledger::{
    Durability, NewRun, PostgresOptions, PostgresStore, RunEvent, RunId, RunKind, RunStore,
    SqliteOptions, SqliteStore,
};

/// Pairs appended per timed iteration.
const PAIRS_PER_ITERATION: u64 = 64;

fn open(path: &Path, durability: Durability) -> SqliteStore {
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    SqliteStore::open_with(path, options).expect("open ledger")
}

fn started(execution: u64) -> RunEvent {
    RunEvent::NodeStarted {
        execution,
        node_instance: execution,
        node: NodeName::new("implement").expect("node name"),
        map_indices: vec![],
        attempt: 1,
        // A typical small step input: ~300 bytes of JSON.
        input: json!({
            "task": "Add a --json flag to the status command and cover it with a test.",
            "repository": "acme/app",
            "acceptance": ["prints one JSON document", "exit code unchanged", "documented"],
            "context": {"branch": "feature/json-status", "attempt": 1, "previousFindings": []}
        }),
        worker: "builtin.agent.software-worker@1".to_owned(),
    }
}

fn completed(execution: u64) -> RunEvent {
    RunEvent::NodeCompleted {
        execution,
        // A typical small verified output: ~300 bytes of JSON.
        outcome: WorkerOutcome::Verified {
            output: json!({
                "summary": "Added --json to status; new test status_json_prints_one_document passes.",
                "changedFiles": ["src/cli/status.rs", "tests/status_json.rs", "docs/cli.md"],
                "followUps": [],
                "confidence": "high"
            }),
            artifacts: vec![],
        },
        reused_from: None,
        settled_by: None,
    }
}

/// A running run that already holds `executions` settled executions (written in big batches,
/// which is fast and not what is measured).
fn run_with(store: &dyn RunStore, key: &str, executions: u64) -> RunId {
    let run = NewRun::new(
        RunId::generate(),
        key,
        "bench",
        RunKind::Graphspec,
        json!({}),
    );
    let (record, _) = store.create_or_get(run).expect("create run");
    store
        .append(&record.run_id, &[RunEvent::RunStarted {}])
        .expect("start");
    let mut next = 1;
    while next <= executions {
        let batch: Vec<RunEvent> = (next..(next + 256).min(executions + 1))
            .flat_map(|e| [started(e), completed(e)])
            .collect();
        store.append(&record.run_id, &batch).expect("fill");
        next += 256;
    }
    record.run_id
}

/// Times `PAIRS_PER_ITERATION` pairs appended one event per transaction to a run that already
/// holds `base` executions.
fn bench_pairs(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    base: u64,
    store: &dyn RunStore,
) {
    group.bench_with_input(id, &base, |b, &base| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                // Stores outlive a benchmark (criterion calls this more than once), so every
                // run needs a key of its own.
                let run = run_with(store, &format!("key-{}", RunId::generate()), base);
                let begun = Instant::now();
                for e in base + 1..=base + PAIRS_PER_ITERATION {
                    black_box(store.append(&run, &[started(e)]).expect("started"));
                    black_box(store.append(&run, &[completed(e)]).expect("completed"));
                }
                total += begun.elapsed();
            }
            total
        });
    });
}

fn append_pairs(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_pair");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(PAIRS_PER_ITERATION));
    for (label, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
        for base in [64u64, 1024] {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = open(&dir.path().join("ledger.sqlite3"), durability);
            let id = BenchmarkId::new(label, format!("{base}_executions"));
            bench_pairs(&mut group, id, base, &store);
        }
    }
    let url = server_url().expect("CI needs the PostgreSQL server");
    if let Some(url) = url {
        let schema = TestSchema::create(&url).expect("test schema");
        for (label, durability) in [("normal", Durability::Normal), ("full", Durability::Full)] {
            let options = PostgresOptions {
                durability,
                ..schema.options()
            };
            let store = PostgresStore::open_with(schema.url(), options).expect("open");
            for base in [64u64, 1024] {
                let id =
                    BenchmarkId::new(format!("postgres_{label}"), format!("{base}_executions"));
                bench_pairs(&mut group, id, base, &store);
            }
        }
    }
    group.finish();
}

/// Prints the file growth per execution: a run of `executions` pairs appended one event per
/// transaction, then the WAL checkpointed into the main file.
fn bytes_per_execution(_c: &mut Criterion) {
    for executions in [64u64, 1024] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ledger.sqlite3");
        let store = open(&path, Durability::Normal);
        let run = run_with(&store, "baseline", 0);
        drop(run);
        let checkpointed_size = |store: SqliteStore| {
            drop(store);
            // Closing the last connection checkpoints the WAL into the main file.
            std::fs::metadata(&path).expect("metadata").len()
        };
        let empty = checkpointed_size(store);
        let store = open(&path, Durability::Normal);
        let run = run_with(&store, "measured", 0);
        for e in 1..=executions {
            store.append(&run, &[started(e)]).expect("started");
            store.append(&run, &[completed(e)]).expect("completed");
        }
        let full = checkpointed_size(store);
        let per = (full - empty) as f64 / executions as f64;
        println!("bytes_on_disk/{executions}_executions: {per:.0} bytes per execution");
    }
}

criterion_group!(benches, append_pairs, bytes_per_execution);
criterion_main!(benches);
