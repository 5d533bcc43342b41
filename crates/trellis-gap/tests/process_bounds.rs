//! Tools and scripts that misbehave like workers do (issue 19 #6, #7, #16; issue 12 item 3):
//! endless output, grandchildren, hanging bodies, stdin reads and oversized results end their
//! node with a clear error, within bounded memory, and leave no process behind.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use trellis_gap::{
    CollectingObserver, ExecuteOptions, ExecutionResult, MAX_BRIDGE_FRAME_BYTES, RunEvent,
    RunObserver, ToolRegistry, execute, load_command_manifest,
};

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn gone_soon(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .expect("a pid")
}

/// Peak resident memory of this test process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn single(node: Value) -> Value {
    json!({"version": 3, "nodes": {"x": node, "done": {"type": "end", "status": "success"}},
           "edges": [["START", "x"], ["x", "done"]]})
}

fn run_with(
    scratch: &Scratch,
    registry: ToolRegistry,
    adjust: impl FnOnce(&mut ExecuteOptions),
) -> (ExecutionResult, Vec<RunEvent>) {
    let mut options = ExecuteOptions {
        tool_registry: Arc::new(registry),
        ..ExecuteOptions::default()
    };
    adjust(&mut options);
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options, &observer);
    (result, observer.events())
}

fn script(scratch: &Scratch, name: &str, body: &str) {
    std::fs::write(scratch.dir.path().join("scripts").join(name), body).unwrap();
}

/// The test the issue asks for: a GaP tool prints 100 MB (on stdout without a line break, and
/// lines on stderr) and forks a sleeping grandchild. Memory stays bounded, the node times out,
/// and the grandchild is gone afterwards.
#[test]
fn a_flooding_tool_with_a_grandchild_times_out_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let flood = format!(
        "sleep 300 & echo $! > {pid}; \
         head -c 104857600 /dev/zero | tr '\\0' x; \
         yes 'a line of stderr output that goes on for a while' | head -c 10485760 >&2; \
         sleep 300",
        pid = pid_file.display()
    );
    let manifest = dir.path().join("tools.json");
    std::fs::write(
        &manifest,
        json!({"tools": {"flood": {"command": ["sh", "-c", flood], "timeout_s": 4}}}).to_string(),
    )
    .unwrap();
    let mut registry = ToolRegistry::new();
    load_command_manifest(&mut registry, &manifest).unwrap();
    let scratch = Scratch::new(&single(json!({"type": "tool", "tool": "flood"})));

    /// Counts stderr lines instead of keeping them: the test measures the runner's memory.
    #[derive(Default)]
    struct CountStderr(AtomicUsize);
    impl RunObserver for CountStderr {
        fn on_event(&self, event: &RunEvent) {
            if matches!(event, RunEvent::Log { stream, .. } if stream == "stderr") {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let options = ExecuteOptions {
        tool_registry: Arc::new(registry),
        ..ExecuteOptions::default()
    };
    let counter = CountStderr::default();
    let before = peak_rss_kib();
    let started = Instant::now();
    let result = execute(&scratch.load(), options, &counter);
    let grew_kib = peak_rss_kib().saturating_sub(before);

    let error = result.error.expect("the node fails");
    assert!(error.contains("TimeoutError"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        grew_kib < 64 * 1024,
        "peak memory grew by {grew_kib} KiB while 110 MB went through"
    );
    let logged = counter.0.load(Ordering::Relaxed);
    assert!(logged > 0, "stderr lines reached the log");
    let grandchild = read_pid(&pid_file);
    assert!(
        gone_soon(grandchild),
        "grandchild {grandchild} outlived its node"
    );
    eprintln!("flood: peak memory +{grew_kib} KiB, {logged} stderr lines logged");
}

#[test]
fn a_tool_printing_too_large_a_result_fails_its_node_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tools.json");
    let big = "python3 -c \"import json; print(json.dumps({'v': 'x' * 2000000}))\"";
    std::fs::write(
        &manifest,
        json!({"tools": {"big": {"command": ["sh", "-c", big]}}}).to_string(),
    )
    .unwrap();
    let mut registry = ToolRegistry::new();
    load_command_manifest(&mut registry, &manifest).unwrap();
    let scratch = Scratch::new(&single(json!({"type": "tool", "tool": "big"})));
    let (result, _) = run_with(&scratch, registry, |_| {});
    let error = result.error.expect("the node fails");
    assert!(
        error.contains(&format!("output exceeds {MAX_BRIDGE_FRAME_BYTES} bytes")),
        "{error}"
    );
}

/// Issue 19 #16: a script returning 100 MB fails its node with a clear error, not a ledger
/// batch failure later.
#[test]
fn a_script_returning_too_much_fails_its_node_clearly() {
    let scratch = Scratch::new(&single(
        json!({"type": "script", "script": "scripts/huge.py"}),
    ));
    script(
        &scratch,
        "huge.py",
        "def run(ctx):\n    return {'blob': 'x' * (100 * 1024 * 1024)}\n",
    );
    let (result, _) = run_with(&scratch, ToolRegistry::new(), |_| {});
    let error = result.error.expect("the node fails");
    assert!(
        error.contains(&format!(
            "script output exceeds {MAX_BRIDGE_FRAME_BYTES} bytes"
        )),
        "{error}"
    );
}

/// Issue 19 #7: a script that reads stdin gets EOF instead of eating the bridge's requests.
#[test]
fn a_script_reading_stdin_gets_eof() {
    let scratch = Scratch::new(&single(
        json!({"type": "script", "script": "scripts/reads_stdin.py"}),
    ));
    script(
        &scratch,
        "reads_stdin.py",
        "import sys\n\ndef run(ctx):\n    return {'read': sys.stdin.read()}\n",
    );
    let started = Instant::now();
    let (result, _) = run_with(&scratch, ToolRegistry::new(), |o| {
        o.script_timeout = Duration::from_secs(20);
    });
    assert!(result.is_success(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A script body that records its bridge's pid in `pid_file`, then never returns.
fn hanging(pid_file: &Path) -> String {
    format!(
        "import os, time\n\ndef run(ctx):\n    with open({:?}, 'w') as f:\n        f.write(str(os.getpid()))\n    while True:\n        time.sleep(1)\n",
        pid_file.display().to_string()
    )
}

/// Issue 19 #6: a script that never returns times out (it ignores the cancel it is sent);
/// its bridge, with the stuck body, is stopped.
#[test]
fn a_hanging_script_times_out_and_its_bridge_is_stopped() {
    let scratch = Scratch::new(&single(
        json!({"type": "script", "script": "scripts/hang.py"}),
    ));
    let dir = tempfile::tempdir().unwrap();
    script(&scratch, "hang.py", &hanging(&dir.path().join("pid")));
    let started = Instant::now();
    let (result, _) = run_with(&scratch, ToolRegistry::new(), |o| {
        o.script_timeout = Duration::from_millis(800);
        o.cancel_grace = Duration::from_millis(200);
    });
    let error = result.error.expect("the node fails");
    assert!(
        error.contains("TimeoutError") && error.contains("did not finish within 0.8s"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let bridge = read_pid(&dir.path().join("pid"));
    assert!(
        gone_soon(bridge),
        "the bridge {bridge} still runs the stuck body"
    );
}

/// Issue 19 #6: cancelling the run (what `force-stop` does) stops a hanging script.
#[test]
fn cancelling_a_run_stops_a_hanging_script() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = Scratch::new(&single(
        json!({"type": "script", "script": "scripts/hang.py"}),
    ));
    script(&scratch, "hang.py", &hanging(&dir.path().join("pid")));
    let started = Instant::now();
    let (result, _) = run_with(&scratch, ToolRegistry::new(), |o| {
        o.cancel_grace = Duration::from_millis(200);
        let cancel = o.cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            cancel.cancel();
        });
    });
    assert!(!result.is_success());
    assert!(started.elapsed() < Duration::from_secs(20));
    let bridge = read_pid(&dir.path().join("pid"));
    assert!(
        gone_soon(bridge),
        "the bridge {bridge} still runs the stuck body"
    );
}

/// Issue 29 #13: a workflow bounds its scripts itself — `meta.script_timeouts_s` for one node,
/// `meta.script_timeout_s` for all — over the run's default (300 s here).
#[test]
fn a_workflow_sets_its_script_time_limits_in_meta() {
    for meta in [
        json!({"script_timeouts_s": {"x": 0.8}, "script_timeout_s": 600}),
        json!({"script_timeout_s": 0.8}),
    ] {
        let mut workflow = single(json!({"type": "script", "script": "scripts/hang.py"}));
        workflow["meta"] = meta.clone();
        let scratch = Scratch::new(&workflow);
        let dir = tempfile::tempdir().unwrap();
        script(&scratch, "hang.py", &hanging(&dir.path().join("pid")));
        let (result, _) = run_with(&scratch, ToolRegistry::new(), |o| {
            o.script_timeout = Duration::from_secs(300);
            o.cancel_grace = Duration::from_millis(200);
        });
        let error = result.error.expect("the node fails");
        assert!(
            error.contains("TimeoutError") && error.contains("did not finish within 0.8s"),
            "{meta}: {error}"
        );
        let bridge = read_pid(&dir.path().join("pid"));
        assert!(gone_soon(bridge), "the bridge {bridge} still runs");
    }
}

/// The two `meta` keys are checked before a run: a limit that is not a positive number, or
/// one naming no script, router or tool node, is an error saying where.
#[test]
fn bad_script_time_limits_are_refused_by_validation() {
    let mut workflow = single(json!({"type": "script", "script": "scripts/ok.py"}));
    workflow["meta"] = json!({
        "script_timeout_s": "soon",
        "script_timeouts_s": {"x": -1, "done": 5, "nowhere.y": 5},
    });
    let scratch = Scratch::new(&workflow);
    let issues = trellis_gap::validate(&scratch.load(), &trellis_gap::ValidateOptions::default());
    let located: Vec<(String, String)> = issues
        .iter()
        .map(|issue| (issue.node_id.clone(), issue.message.clone()))
        .collect();
    let at = |location: &str| {
        located
            .iter()
            .find(|(at, _)| at == location)
            .map(|(_, message)| message.clone())
            .unwrap_or_else(|| panic!("no issue at {location}: {located:?}"))
    };
    assert!(at("workflow.meta.script_timeout_s").contains("number of seconds above 0"));
    assert!(at("workflow.meta.script_timeouts_s.x").contains("number of seconds above 0"));
    assert!(at("workflow.meta.script_timeouts_s.done").contains("names no script"));
    assert!(at("workflow.meta.script_timeouts_s.nowhere.y").contains("names no script"));
    let mut fine = single(json!({"type": "script", "script": "scripts/ok.py"}));
    fine["meta"] = json!({"script_timeout_s": 30, "script_timeouts_s": {"x": 2.5}});
    let fine = Scratch::new(&fine);
    assert!(
        trellis_gap::validate(&fine.load(), &trellis_gap::ValidateOptions::default())
            .iter()
            .all(|issue| !issue.node_id.starts_with("workflow.meta")),
    );
}
