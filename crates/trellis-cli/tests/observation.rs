//! `trellis run --json` output is linear in the run's events: each watch line carries what
//! changed (event, execution, counts), so the bytes per map item do not grow with the map's
//! width, and every line matches the schema `trellis schema watch-update` publishes.

mod support;

use serde_json::{Value, json};
use support::Sandbox;
use support::graph::{array, graph, integer, map, null, record, seq, state_path, succeed};

/// A command worker that reads its request and answers a null output at once.
fn no_op_plan() -> Value {
    json!({"kind": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; echo '{\"output\":null}'"]})
}

fn no_op_step(name: &str) -> Value {
    let nothing = null();
    json!({
        "kind": "step", "name": name, "worker": format!("command.{name}@1"),
        "input": nothing, "output": nothing, "inputBindings": [], "writeBindings": [],
        "timeoutMs": 120_000, "attempts": 1,
    })
}

/// A map of `items` no-op steps over the input's `items`, then success.
fn map_graph(items: u64) -> (Value, Value) {
    let item = record(&[("value", integer(), true)]);
    let state = record(&[("items", array(item), true)]);
    let fan = map(
        "fan",
        &state,
        no_op_step("item"),
        state_path(&["items"]),
        items,
        &[],
    );
    let document = graph(
        state.clone(),
        seq("root", &state, vec![fan, succeed("done", null(), &[])], &[]),
    );
    let input = json!({"items": (0..items).map(|v| json!({"value": v})).collect::<Vec<_>>()});
    (document, input)
}

/// The stdout of `trellis run --json` of a map of `items` items, which must succeed.
fn map_run_output(items: u64) -> String {
    let sandbox = Sandbox::new();
    let (document, input) = map_graph(items);
    let args = sandbox.run_args(&document, &input, &no_op_plan());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sandbox.trellis(&args).success().stdout
}

/// Bytes of the watch lines (without the receipt and the final line, which carries the
/// output), and the lines themselves.
fn watch_lines(stdout: &str) -> (usize, Vec<Value>) {
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() > 2,
        "a receipt, updates and a final line:\n{stdout}"
    );
    let middle = &lines[1..lines.len() - 1];
    let bytes = middle.iter().map(|l| l.len() + 1).sum();
    (bytes, support::ndjson(stdout))
}

#[test]
fn bytes_per_item_stay_flat_as_a_map_widens() {
    let (narrow_bytes, narrow) = watch_lines(&map_run_output(16));
    let (wide_bytes, wide) = watch_lines(&map_run_output(256));

    // Per item: one start and one completion line of the same size, whatever the width.
    let narrow_per_item = narrow_bytes as f64 / 16.0;
    let wide_per_item = wide_bytes as f64 / 256.0;
    assert!(
        wide_per_item < narrow_per_item * 1.25,
        "bytes per item grew from {narrow_per_item:.0} (16 items) to {wide_per_item:.0} (256 items)"
    );

    for (items, lines) in [(16u64, &narrow), (256, &wide)] {
        assert_eq!(lines[0].as_object().map(|o| o.len()), Some(1), "receipt");
        assert!(lines[0]["runId"].is_string());
        let last = lines.last().expect("a final line");
        assert_eq!(last["event"], "terminal");
        assert_eq!(last["status"]["terminalResult"]["status"], "succeeded");
        assert_eq!(last["counts"], json!({"active": 0, "settled": items}));
        let started = lines
            .iter()
            .filter(|l| l["event"] == "node_started")
            .count();
        assert_eq!(started as u64, items, "one start line per item");
        let most_active = lines
            .iter()
            .filter_map(|l| l["counts"]["active"].as_u64())
            .max();
        assert!(most_active.is_some_and(|n| n >= 1 && n <= items));
        assert!(
            lines
                .iter()
                .all(|l| l["status"].get("activeExecutions").is_none()),
            "no line lists the active executions"
        );
    }
}

#[test]
fn every_watch_line_matches_the_published_schema() {
    let sandbox = Sandbox::new();
    let schema: Value = serde_json::from_str(
        &sandbox
            .trellis(&["schema", "watch-update"])
            .success()
            .stdout,
    )
    .expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");

    let stdout = map_run_output(4);
    let lines = support::ndjson(&stdout);
    for line in &lines[1..] {
        let errors: Vec<String> = validator.iter_errors(line).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{line}\ndoes not match: {errors:?}");
    }
    // The schema is not vacuous: a line listing active executions, or without counts, fails.
    let mut listed = lines[2].clone();
    listed["status"]["activeExecutions"] = json!([]);
    assert!(!validator.is_valid(&listed));
    let mut uncounted = lines[2].clone();
    uncounted.as_object_mut().map(|o| o.remove("counts"));
    assert!(!validator.is_valid(&uncounted));
}

/// Issue 37: `trellis attach RUN NODE` follows one execution live — its first line arrives
/// while it still runs — and exits once it settles, saying how; `logs --execution` keeps only
/// that execution's lines, by node, id or reference; a reference naming nothing is refused.
#[test]
fn attach_follows_a_running_execution_live_and_exits_when_it_settles() {
    use std::io::BufRead;
    let sandbox = Sandbox::new();
    let run = sandbox.start_detached(&sandbox.run_args(
        &support::graph::one_step_graph("gate"),
        &json!({"value": 1}),
        &support::uniform_worker_plan(&[]),
    ));
    let (attach, stdout) = sandbox.spawn_reading(&["attach", &run, "gate"]);
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("readable");
    assert_eq!(first, "gate attempt 1 starting");
    // The gate waits for a file only this test writes: the line came while it ran.
    let status = sandbox.status(&run);
    assert_eq!(status["status"]["phase"], "running", "{status}");
    std::fs::write(sandbox.workspace.join("open-gate"), "").expect("open the gate");
    let attached = support::finish(attach, support::STATE_TIMEOUT, &["attach"]);
    assert_eq!(attached.code, Some(0), "{attached:#?}");
    assert!(
        attached.stderr.contains("(gate) completed"),
        "{attached:#?}"
    );
    sandbox.wait_finished(&run);

    let by_node = sandbox
        .trellis(&["logs", &run, "--execution", "gate"])
        .success()
        .ndjson();
    assert!(!by_node.is_empty());
    assert!(
        by_node.iter().all(|line| line["node"] == "gate"),
        "{by_node:?}"
    );
    let id = by_node[0]["executionId"].as_u64().expect("id").to_string();
    let reference = by_node[0]["execution"]
        .as_str()
        .expect("reference")
        .to_owned();
    for named in [id.as_str(), reference.as_str()] {
        let lines = sandbox
            .trellis(&["logs", &run, "--execution", named])
            .success()
            .ndjson();
        assert_eq!(lines, by_node, "--execution {named}");
    }
    let all = sandbox.trellis(&["logs", &run]).success().ndjson();
    assert!(all.len() >= by_node.len());
    let unknown = sandbox.trellis(&["logs", &run, "--execution", "ex-nothing"]);
    assert_eq!(unknown.code, Some(1), "{unknown:#?}");
    assert!(unknown.stderr.contains("ex-nothing"), "{unknown:#?}");
    let replayed = sandbox
        .trellis(&["attach", &run, &id, "--json"])
        .success()
        .ndjson();
    assert_eq!(
        replayed, by_node,
        "attach to a settled execution replays it and ends"
    );
}
