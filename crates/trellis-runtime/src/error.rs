//! The runtime's closed error type.

use std::path::PathBuf;

use trellis_ledger::LedgerError;

use crate::plan::PlanError;

/// Why a runtime operation failed. Messages never carry secret values.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("workspace {workspace} already has an active run{holder}")]
    WorkspaceBusy { workspace: PathBuf, holder: String },
    #[error("the run controller did not start: {0}")]
    ControllerStart(String),
    #[error("the stored submission of run {run} cannot be read: {reason}")]
    Submission { run: String, reason: String },
    #[error("{0}")]
    Invalid(String),
}

impl RuntimeError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
