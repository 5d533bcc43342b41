//! How a [`crate::Runtime`] is opened and how runs are started: state directory and ledger
//! location, submission options, receipts.

use std::path::PathBuf;

use trellis_ledger::LedgerLocation;

use trellis_run_model::RunId;

use crate::shared::environment::EnvironmentSpec;

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
    /// Where the run works and what it records of its workspace.
    pub workspace: WorkspaceOptions,
    /// Skip the agent lane's preflight (CLI installed, signed in, declared variables set).
    pub skip_preflight: bool,
    /// Hooks that prepare the host before the run dispatches (a team server's runs: local
    /// runs use the environment they are started from).
    pub environment: Option<EnvironmentSpec>,
}

/// Where a run works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceMode {
    /// In the workspace itself (the default).
    #[default]
    InPlace,
    /// In a fresh git worktree of the workspace's `HEAD` (under the state directory), so the
    /// user's checkout is untouched until delivery; a failed run keeps it for its successor.
    Worktree,
}

/// How a run treats its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceOptions {
    pub mode: WorkspaceMode,
    /// Record a checkpoint before each writing wave (git workspaces only).
    pub checkpoints: bool,
    /// Keep the checkpoints of a run that succeeds (a failed run always keeps them).
    pub keep_checkpoints: bool,
    /// Give each read-only verifier a disposable copy of the workspace.
    pub verifier_copies: bool,
}

impl Default for WorkspaceOptions {
    fn default() -> Self {
        Self {
            mode: WorkspaceMode::InPlace,
            checkpoints: true,
            keep_checkpoints: false,
            verifier_copies: true,
        }
    }
}

/// Options of [`crate::Runtime::resume`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResumeOptions {
    pub start: StartMode,
    /// Restore this checkpoint of the run (its files) and start from its graph position;
    /// `None`: restore the latest checkpoint only when the workspace no longer matches the
    /// run's last state.
    pub from_checkpoint: Option<u32>,
    /// Restore even when the workspace changed after the run ended (the replaced state is
    /// kept under `refs/trellis/saved/`).
    pub force: bool,
}

/// What a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub run_id: RunId,
    /// False when the submission key already named this same submission's run.
    pub created: bool,
}
