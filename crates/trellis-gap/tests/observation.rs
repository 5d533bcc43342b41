//! The observation stream: a connector polled at `meta.observation_stream_hz` feeds
//! `in.observation_stream`; readers see monotonically increasing ticks, reads are traced, and
//! polling stops within 100 ms of the run's end.

mod common;

use common::{Scratch, fixtures};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use trellis_gap::{
    CommandConnector, Connector, ExecuteOptions, ExecutionResult, NullObserver, PythonConfig,
    PythonConnector, execute,
};

/// Counts polls and remembers when each happened.
#[derive(Default)]
struct Ticker {
    polls: Mutex<Vec<Instant>>,
}

impl Connector for Ticker {
    fn get_observation(&self) -> Result<Value, String> {
        let mut polls = self.polls.lock().unwrap();
        polls.push(Instant::now());
        Ok(json!({"tick": polls.len() - 1}))
    }
    fn world_snapshot(&self) -> Result<Option<Value>, String> {
        Ok(None)
    }
}

/// A subgraph that declares the stream as an input and reads it from a script node.
fn reader_workflow(hz: f64) -> Value {
    json!({
        "version": 3, "meta": {"observation_stream_hz": hz},
        "nodes": {"watch": {"type": "subgraph", "ref": "watch_sg"}, "done": {"type": "end", "status": "success"}},
        "edges": [["START", "watch"]],
        "conditional_edges": {"watch": {"router_field": "exit", "mapping": {"ok": "done"}}},
        "subgraphs": {"watch_sg": {
            "skill": "generic", "inputs": {"observation_stream": "ObservationStream"},
            "outputs": {"ticks": {"$ref": "read.ticks"}, "ages": {"$ref": "read.ages"}},
            "nodes": {"read": {"type": "script", "script": "scripts/stream_reader.py",
                               "inputs": {"stream": {"$ref": "in.observation_stream"}}},
                      "ok": {"type": "noop"}},
            "edges": [["START", "read"], ["read", "ok"], ["ok", "END"]],
            "exit": {"router_field": null, "success_values": ["ok"]}}}
    })
}

fn run(
    document: &Value,
    connector: Arc<dyn Connector>,
    trace: Option<&std::path::Path>,
) -> ExecutionResult {
    let scratch = Scratch::new(document);
    let options = ExecuteOptions {
        connector: Some(connector),
        trace_dir: trace.map(std::path::Path::to_path_buf),
        ..ExecuteOptions::default()
    };
    execute(&scratch.load(), options, &NullObserver)
}

fn ticks(result: &ExecutionResult) -> Vec<u64> {
    result.outputs["watch_sg"]["ticks"]
        .as_array()
        .expect("ticks")
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

#[test]
fn a_reader_fed_at_50_hz_sees_increasing_ticks_and_the_stream_stops_with_the_run() {
    let ticker = Arc::new(Ticker::default());
    let trace = tempfile::tempdir().unwrap();
    let result = run(&reader_workflow(50.0), ticker.clone(), Some(trace.path()));
    let ended = Instant::now();
    assert!(result.is_success(), "{result:?}");
    let seen = ticks(&result);
    assert_eq!(seen.len(), 15);
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "not monotonic: {seen:?}"
    );
    assert!(
        seen.last() > seen.first(),
        "the stream did not advance: {seen:?}"
    );
    // 15 reads 30 ms apart at 50 Hz: most reads see a new tick.
    let mut distinct = seen.clone();
    distinct.dedup();
    assert!(distinct.len() >= 5, "{seen:?}");
    // Stale-tolerant reads are fresh at this rate (a poll every 20 ms).
    let ages: Vec<f64> = result.outputs["watch_sg"]["ages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_f64().unwrap())
        .collect();
    assert!(ages.iter().all(|a| *a < 1.0), "{ages:?}");
    std::thread::sleep(Duration::from_millis(250));
    let polls = ticker.polls.lock().unwrap().clone();
    let last = *polls.last().unwrap();
    assert!(
        last <= ended + Duration::from_millis(100),
        "polled {:?} after the run ended",
        last.duration_since(ended)
    );
    // Every read is recorded under the reading node, named by the input it came through.
    let reads = trace.path().join("node_data/watch_sg.read/stream_reads");
    let recorded = std::fs::read_dir(&reads).unwrap().count();
    assert_eq!(recorded, 15);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(reads.join("000_stream/meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["stream"], "stream");
}

#[test]
fn without_a_connector_the_stream_input_is_unbound() {
    let scratch = Scratch::new(&reader_workflow(50.0));
    let result = execute(&scratch.load(), ExecuteOptions::default(), &NullObserver);
    assert_eq!(
        result.error.as_deref(),
        Some("subgraph 'watch_sg' input 'observation_stream' has no upstream producer")
    );
}

#[test]
fn python_module_and_command_connectors_feed_the_stream() {
    let python: Arc<dyn Connector> = Arc::new(PythonConnector::new(
        fixtures().join("connectors/counter.py"),
        PythonConfig::from_env(),
    ));
    assert_eq!(
        python.world_snapshot().unwrap().unwrap()["gripper"]["open"],
        json!(true)
    );
    let result = run(&reader_workflow(50.0), python, None);
    assert!(result.is_success(), "{result:?}");
    let seen = ticks(&result);
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen.last() > seen.first(),
        "{seen:?}"
    );

    let argv = vec![
        "python3".to_string(),
        fixtures()
            .join("connectors/counter_command.py")
            .display()
            .to_string(),
    ];
    let command: Arc<dyn Connector> = Arc::new(CommandConnector::spawn(&argv).unwrap());
    assert_eq!(command.world_snapshot().unwrap(), None);
    let result = run(&reader_workflow(50.0), command, None);
    assert!(result.is_success(), "{result:?}");
    let seen = ticks(&result);
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen.last() > seen.first(),
        "{seen:?}"
    );
}

#[test]
fn a_top_level_node_reads_the_stream_through_in() {
    let document = json!({
        "version": 3, "meta": {"observation_stream_hz": 100},
        "nodes": {"read": {"type": "script", "script": "scripts/stream_reader.py",
                           "inputs": {"stream": {"$ref": "in.observation_stream"}, "reads": 3, "pause_s": 0.02}},
                  "done": {"type": "end", "status": "success"}},
        "edges": [["START", "read"], ["read", "done"]]
    });
    let ticker = Arc::new(Ticker::default());
    let result = run(&document, ticker, None);
    assert!(result.is_success(), "{result:?}");
}
