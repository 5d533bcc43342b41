//! How a [`crate::Runtime`] is opened and how runs are started: state directory and ledger
//! location, submission options, receipts.

use std::path::PathBuf;

use trellis_ledger::LedgerLocation;

use crate::RunId;

/// How to open a runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeOptions {
    /// The state directory; `None` means `$TRELLIS_HOME`, else `$XDG_STATE_HOME/trellis`,
    /// else `~/.local/state/trellis`.
    pub home: Option<PathBuf>,
    /// The ledger: `None` means `$TRELLIS_LEDGER` when set, else `ledger.sqlite3` in the state
    /// directory. A detached controller is handed the same location.
    pub ledger: Option<LedgerLocation>,
    /// The program started as a run's detached controller (it must call
    /// [`crate::Runtime::run_controller`] when given [`crate::CONTROLLER_COMMAND`] and a run id);
    /// `None` means the current executable.
    pub controller_program: Option<PathBuf>,
}

/// How a submitted run is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// A detached controller process drives it; `submit` returns once that process attached.
    /// The run outlives the submitting process.
    #[default]
    Detached,
    /// This thread drives it to its end before `submit` returns (tests, embedding).
    InProcess,
}

/// Options of [`crate::Runtime::submit`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubmitOptions {
    /// The same key and submission return the same run (idempotent retries); `None` makes a
    /// fresh key.
    pub submission_key: Option<String>,
    /// `None`: the first line of the task, the template name or the file name.
    pub title: Option<String>,
    pub start: StartMode,
}

/// Options of [`crate::Runtime::resume`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResumeOptions {
    pub start: StartMode,
}

/// What a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub run_id: RunId,
    /// False when the submission key already named this same submission's run.
    pub created: bool,
}
