//! Shared builders for the ledger's integration tests, and the backend factory that runs a
//! suite against SQLite and PostgreSQL alike (`backend_tests!`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

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

/// A store on `ledger` holding one admitted run `run-1`.
pub fn store_with_run(ledger: &TestLedger) -> (Box<dyn RunStore>, RunId) {
    let store = ledger.open();
    let (record, _) = store
        .create_or_get(new_run("run-1", "key-1", json!({"graph": "g"})))
        .unwrap();
    (store, record.run_id)
}

/// The variable through which a parent test hands its ledger to a child process.
pub const CHILD_LEDGER_ENV: &str = "TRELLIS_LEDGER_TEST_CHILD_LEDGER";

/// A fresh, empty ledger for one test; every `open` is a new store (its own connections) on
/// it, as another process would have.
pub enum TestLedger {
    /// A file in a private temporary directory.
    Sqlite {
        _dir: Option<tempfile::TempDir>,
        path: PathBuf,
    },
    /// A schema of its own on the test server.
    Postgres(trellis_ledger::testing::postgres::TestSchema),
}

impl TestLedger {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite3");
        Self::Sqlite {
            _dir: Some(dir),
            path,
        }
    }

    /// A fresh schema on the test server; `None` (the test is skipped) when no server is
    /// configured outside CI. In CI a missing server fails the test.
    pub fn postgres() -> Option<Self> {
        use trellis_ledger::testing::postgres::{TestSchema, server_url};
        let url = server_url().unwrap_or_else(|message| panic!("{message}"))?;
        Some(Self::Postgres(TestSchema::create(&url).unwrap()))
    }

    pub fn open(&self) -> Box<dyn RunStore> {
        match self {
            Self::Sqlite { path, .. } => Box::new(file_store(path)),
            Self::Postgres(schema) => Box::new(schema.open().unwrap()),
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }

    /// What a child process needs to open this ledger (see [`TestLedger::from_child_env`]).
    pub fn child_env(&self) -> String {
        match self {
            Self::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
            Self::Postgres(schema) => format!("postgres:{}", schema.name()),
        }
    }

    /// The ledger a parent handed over through [`CHILD_LEDGER_ENV`], left in place when the
    /// child is done.
    pub fn from_child_env() -> Option<Self> {
        let value = std::env::var(CHILD_LEDGER_ENV).ok()?;
        if let Some(path) = value.strip_prefix("sqlite:") {
            return Some(Self::Sqlite {
                _dir: None,
                path: PathBuf::from(path),
            });
        }
        let name = value.strip_prefix("postgres:").unwrap();
        let url = trellis_ledger::testing::postgres::server_url()
            .unwrap()
            .unwrap();
        let schema = trellis_ledger::testing::postgres::TestSchema::existing(&url, name);
        Some(Self::Postgres(schema))
    }
}

/// Runs each test function against a fresh SQLite ledger (module `sqlite`) and a fresh
/// PostgreSQL schema (module `postgres`, skipped outside CI when no server is configured).
#[macro_export]
macro_rules! backend_tests {
    ($($(#[$meta:meta])* fn $name:ident($ledger:ident) $body:block)*) => {
        mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                $(#[$meta])*
                fn $name() {
                    let $ledger = &$crate::common::TestLedger::sqlite();
                    $body
                }
            )*
        }
        mod postgres {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                $(#[$meta])*
                fn $name() {
                    let Some(ledger) = $crate::common::TestLedger::postgres() else {
                        eprintln!("skipped: set TRELLIS_TEST_POSTGRES_URL to run the PostgreSQL leg");
                        return;
                    };
                    let $ledger = &ledger;
                    $body
                }
            )*
        }
    };
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

/// Whether `result` is the ledger's refusal of a stale lease or claim (`lease.fenced`); any
/// other answer fails the test.
pub fn is_fenced<T: std::fmt::Debug>(result: Result<T, trellis_ledger::LedgerError>) -> bool {
    match result {
        Err(error) => {
            assert_eq!(error.code(), "lease.fenced", "{error}");
            true
        }
        Ok(value) => panic!("expected a fenced refusal, got {value:?}"),
    }
}

/// Runs `sql` on its own connection (outside any ledger store) and returns the rows' first
/// column as text.
pub fn raw_query(url: &str, sql: &str) -> Vec<Option<String>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        let rows = client.simple_query(sql).await.unwrap();
        drop(client);
        let _ = driver.await;
        rows.into_iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
                _ => None,
            })
            .collect()
    })
}
