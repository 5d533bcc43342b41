//! Shared builders for the ledger's integration tests.
#![allow(dead_code)]

use std::path::Path;

use serde_json::{Value, json};
use trellis_graph::{NodeName, WorkerOutcome};
use trellis_ledger::{
    Durability, NewRun, RunEvent, RunId, RunKind, RunStore, SqliteOptions, SqliteStore,
    TerminalResult,
};

pub fn run_id(text: &str) -> RunId {
    RunId::new(text).unwrap()
}

pub fn new_run(id: &str, key: &str, submission: Value) -> NewRun {
    NewRun::new(
        run_id(id),
        key,
        "A test run",
        RunKind::Graphspec,
        submission,
    )
    .with_created_at_ms(1_700_000_000_000)
}

/// A file-backed store with fast (NORMAL) durability.
pub fn file_store(path: &Path) -> SqliteStore {
    SqliteStore::open_with(
        path,
        SqliteOptions {
            durability: Durability::Normal,
            ..SqliteOptions::default()
        },
    )
    .unwrap()
}

/// An in-memory store holding one admitted run `run-1`.
pub fn store_with_run() -> (SqliteStore, RunId) {
    let store = SqliteStore::open_in_memory().unwrap();
    let (record, _) = store
        .create_or_get(new_run("run-1", "key-1", json!({"graph": "g"})))
        .unwrap();
    (store, record.run_id)
}

pub fn started(execution: u64, node: &str) -> RunEvent {
    RunEvent::NodeStarted {
        execution,
        node_instance: execution,
        node: NodeName::new(node).unwrap(),
        map_indices: vec![],
        attempt: 1,
        input: json!({"task": format!("do {node}")}),
        worker: "builtin.agent.worker@1".to_owned(),
    }
}

pub fn completed(execution: u64) -> RunEvent {
    RunEvent::NodeCompleted {
        execution,
        outcome: WorkerOutcome::Verified {
            output: json!({"summary": "done"}),
            artifacts: vec![],
        },
        reused_from: None,
        settled_by: None,
    }
}

pub fn succeeded() -> RunEvent {
    RunEvent::Terminal {
        result: TerminalResult::Succeeded {
            output: json!({"ok": true}),
        },
    }
}

pub fn failed(reason: &str) -> RunEvent {
    RunEvent::Terminal {
        result: TerminalResult::Failed {
            reason: reason.to_owned(),
        },
    }
}
