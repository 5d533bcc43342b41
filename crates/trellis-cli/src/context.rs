//! What most commands need: the state directory, the ledger, and small input helpers.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use serde_json::Value;
use trellis_graph::json::parse_strict;
use trellis_graph::limits::MAX_DOCUMENT_BYTES;
use trellis_ledger::{RunId, RunStore, SqliteStore};
use trellis_runtime::home::{TrellisHome, default_home};
use trellis_runtime::recovery::{Liveness, reconcile};

/// The opened state directory and ledger.
pub struct Context {
    pub home: TrellisHome,
    pub store: Arc<dyn RunStore>,
}

impl Context {
    /// Opens `$TRELLIS_HOME` (created on first use) and its ledger.
    pub fn open() -> anyhow::Result<Self> {
        let root = default_home()
            .ok_or_else(|| anyhow!("cannot locate a state directory: set TRELLIS_HOME or HOME"))?;
        let home = TrellisHome::open(&root)
            .with_context(|| format!("cannot create the state directory {}", root.display()))?;
        let store = SqliteStore::open(home.ledger_path())
            .with_context(|| format!("cannot open the ledger {}", home.ledger_path().display()))?;
        Ok(Self {
            home,
            store: Arc::new(store),
        })
    }

    /// Parses a run id argument and checks that the run exists, finalizing it first if its
    /// controller is gone (so nothing reports "running" for a dead run).
    pub fn known_run(&self, text: &str) -> anyhow::Result<RunId> {
        let run_id = RunId::new(text).map_err(|e| anyhow!("{text:?} is not a run id: {e}"))?;
        self.store.head(&run_id)?;
        self.reconcile(&run_id)?;
        Ok(run_id)
    }

    pub fn reconcile(&self, run_id: &RunId) -> anyhow::Result<Liveness> {
        Ok(reconcile(self.store.as_ref(), &self.home, run_id)?)
    }
}

/// Reads a JSON document strictly, refusing files over 16 MiB before reading them.
pub fn read_json_file(path: &Path, what: &str) -> anyhow::Result<Value> {
    let text = read_text_file(path, what)?;
    parse_strict(&text).map_err(|e| anyhow!("{what} {}: {e}", path.display()))
}

/// Reads a UTF-8 text file of at most 16 MiB.
pub fn read_text_file(path: &Path, what: &str) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    if meta.len() > MAX_DOCUMENT_BYTES as u64 {
        bail!(
            "{what} {} is {} bytes; the limit is 16 MiB",
            path.display(),
            meta.len()
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {what} {}", path.display()))
}

/// True when standard output is a terminal (live views instead of NDJSON).
pub fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}
