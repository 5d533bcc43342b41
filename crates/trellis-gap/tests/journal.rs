//! The node journal: every body is announced before it runs and reported once settled, a
//! recalled body is not run again, a replay walks the same visits, and a refused dispatch
//! keeps its body from running.

mod common;

use common::Scratch;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use trellis_gap::{
    CancelToken, CollectingObserver, ExecuteOptions, ExecutionResult, NodeJournal, RunEvent,
    SettledBody, ToolRegistry, execute,
};

/// What a journal was told, in order, and the outputs it hands back.
#[derive(Default)]
struct MemoryJournal {
    recallable: HashMap<(String, u32), Value>,
    log: Mutex<Vec<String>>,
    settled: Mutex<HashMap<(String, u32), Value>>,
    refuse: bool,
}

impl NodeJournal for MemoryJournal {
    fn recall(&self, node_id: &str, visit: u32) -> Option<Value> {
        self.recallable.get(&(node_id.to_owned(), visit)).cloned()
    }

    fn dispatched(&self, node_id: &str, visit: u32, node_type: &str) -> Result<(), String> {
        if self.refuse {
            return Err("the ledger is closed".to_owned());
        }
        self.log
            .lock()
            .unwrap()
            .push(format!("start {node_id}#{visit} {node_type}"));
        Ok(())
    }

    fn settled(&self, node_id: &str, visit: u32, outcome: SettledBody<'_>, recalled: bool) {
        let word = match (outcome, recalled) {
            (SettledBody::Succeeded(output), _) => {
                self.settled
                    .lock()
                    .unwrap()
                    .insert((node_id.to_owned(), visit), output.clone());
                if recalled { "reused" } else { "ok" }
            }
            (SettledBody::Failed(_), _) => "failed",
            (SettledBody::Cancelled, _) => "cancelled",
        };
        self.log
            .lock()
            .unwrap()
            .push(format!("{word} {node_id}#{visit}"));
    }
}

/// `step` (a counting tool) looped by the `decide` router until it counted three.
fn loop_doc() -> Value {
    json!({"version": 3, "nodes": {
        "step": {"type": "tool", "tool": "t.step"},
        "decide": {"type": "router", "script": "scripts/decide.py", "inputs": {"n": {"$ref": "step.n"}}},
        "done": {"type": "end", "status": "success"}},
        "edges": [["START", "step"], ["step", "decide"]],
        "conditional_edges": {"decide": {"router_field": null, "mapping": {"loop": "step", "done": "done"}}}})
}

/// Runs the loop workflow; `step` counts on `calls` and cancels the run at call `cancel_at`.
fn run_loop(
    scratch: &Scratch,
    journal: Arc<MemoryJournal>,
    calls: Arc<AtomicUsize>,
    cancel_at: Option<usize>,
) -> (ExecutionResult, Vec<RunEvent>) {
    let cancel = CancelToken::new();
    let mut registry = ToolRegistry::new();
    let stop = cancel.clone();
    registry.register_fn("t.step", move |_, _| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        if cancel_at == Some(n) {
            stop.cancel();
        }
        Ok(json!({"n": n}))
    });
    let options = ExecuteOptions {
        tool_registry: Arc::new(registry),
        cancel_grace: Duration::from_millis(300),
        cancel,
        journal: Some(journal),
        ..ExecuteOptions::default()
    };
    let observer = CollectingObserver::default();
    let result = execute(&scratch.load(), options, &observer);
    (result, observer.events())
}

#[test]
fn bodies_are_announced_before_and_reported_after_they_run() {
    let scratch = Scratch::new(&loop_doc());
    let journal = Arc::new(MemoryJournal::default());
    let calls = Arc::new(AtomicUsize::new(0));
    let (result, _) = run_loop(&scratch, journal.clone(), calls, None);
    assert!(result.is_success(), "{result:?}");
    let log = journal.log.lock().unwrap().clone();
    let expected: Vec<String> = (0..3)
        .flat_map(|visit| {
            [
                format!("start step#{visit} tool"),
                format!("ok step#{visit}"),
                format!("start decide#{visit} router"),
                format!("ok decide#{visit}"),
            ]
        })
        .collect();
    assert_eq!(log, expected);
    assert_eq!(
        journal.settled.lock().unwrap()[&("decide".to_owned(), 2)],
        json!({"route": "done"}),
        "a router's journaled output is what its body returned"
    );
}

#[test]
fn a_replay_reuses_settled_bodies_and_runs_only_the_rest() {
    let scratch = Scratch::new(&loop_doc());
    let calls = Arc::new(AtomicUsize::new(0));
    let first = Arc::new(MemoryJournal::default());
    let (interrupted, _) = run_loop(&scratch, first.clone(), calls.clone(), Some(2));
    assert!(!interrupted.is_success(), "the cancelled attempt fails");
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let second = Arc::new(MemoryJournal {
        recallable: first.settled.lock().unwrap().clone(),
        ..MemoryJournal::default()
    });
    let (resumed, events) = run_loop(&scratch, second.clone(), calls.clone(), None);
    assert!(resumed.is_success(), "{resumed:?}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "only the third count runs; the first two are replayed"
    );
    let log = second.log.lock().unwrap().clone();
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("start step"))
            .collect::<Vec<_>>(),
        ["start step#2 tool"]
    );
    assert!(log.contains(&"reused step#0".to_owned()));
    assert!(log.contains(&"reused step#1".to_owned()));
    let reused = events
        .iter()
        .filter(|e| matches!(e, RunEvent::NodeReused { .. }))
        .count();
    assert!(reused >= 3, "step twice and at least one decide: {reused}");
}

#[test]
fn a_refused_dispatch_does_not_run_its_body() {
    let scratch = Scratch::new(&loop_doc());
    let journal = Arc::new(MemoryJournal {
        refuse: true,
        ..MemoryJournal::default()
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let (result, _) = run_loop(&scratch, journal, calls.clone(), None);
    assert!(!result.is_success());
    assert!(
        result
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("not started"),
        "{result:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
