//! The runtime's closed error type, with a stable code per variant.

use std::path::PathBuf;

use trellis_ledger::LedgerError;

use crate::plan::PlanError;
use crate::shared::admission_error::AdmissionError;
use crate::shared::profile_error::ProfileError;

/// Why a runtime operation failed. Messages never carry secret values.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("cannot locate a state directory: set TRELLIS_HOME or HOME")]
    NoHome,
    #[error("cannot create the state directory {}: {reason}", path.display())]
    StateDirectory { path: PathBuf, reason: String },
    #[error("cannot open the ledger {location}: {cause}")]
    OpenLedger {
        location: String,
        cause: LedgerError,
    },
    #[error("{0:?} is not a run id: {1}")]
    InvalidRunId(String, String),
    #[error("{context}: {cause}")]
    Io {
        context: String,
        cause: std::io::Error,
    },
    #[error("workspace {} already has an active run{holder}", workspace.display())]
    WorkspaceBusy { workspace: PathBuf, holder: String },
    #[error("the run controller did not start: {0}")]
    ControllerStart(String),
    /// The watchdog that ends this process's children with it could not be started.
    #[error("cannot tie child processes to this one: {0}")]
    ChildWatchdog(String),
    /// `--isolation sandbox` (or a plan's `"isolation": "sandbox"`) on a host that cannot
    /// build the sandbox: refused, never run uncontained.
    #[error(transparent)]
    Sandbox(#[from] trellis_agents::SandboxError),
    #[error("run {run} was created but did not start: {cause}")]
    NotStarted {
        run: String,
        cause: Box<RuntimeError>,
    },
    #[error("run {0} is still active; stop it first or wait for it")]
    StillActive(String),
    #[error("run {0} succeeded; there is nothing to resume")]
    NothingToResume(String),
    #[error("run {run} was already resumed as {successor}")]
    AlreadyResumed { run: String, successor: String },
    #[error("run {run} has no execution {execution}")]
    UnknownExecution { run: String, execution: u64 },
    #[error("run {run}: {why}")]
    UnresolvedExecution { run: String, why: String },
    #[error("{0}")]
    NotSubmittable(String),
    #[error("submission key already used by run {0}")]
    KeyInUse(String),
    #[error("run {run} has no checkpoint {id}")]
    UnknownCheckpoint { run: String, id: u32 },
    #[error(
        "checkpoint {id} of run {run} was pruned and git has since collected its files; \
         resume from a later checkpoint (`trellis checkpoints {run}`) or without --from-checkpoint"
    )]
    CheckpointPruned { run: String, id: u32 },
    #[error(
        "the workspace changed after run {run} ended; resume with --force to replace those \
         changes (they are kept under {keep})"
    )]
    WorkspaceChanged { run: String, keep: String },
    #[error("run {0} has no checkpoints (its workspace is not in git, or they were off)")]
    NoCheckpoints(String),
    #[error("run {run} has no retained workspace{reason}")]
    NoRetainedWorkspace { run: String, reason: String },
    /// A worker host asked for, or returned, the workspace of an execution its claim does not
    /// hold (unknown, settled, withdrawn, or claimed anew since).
    #[error("execution {execution} of run {run} is not held by this claim")]
    NotClaimed { run: String, execution: u64 },
    /// The execution has no start point to send (its workspace is not in git).
    #[error("execution {execution} of run {run} has no workspace a worker host can fetch")]
    NoStartPoint { run: String, execution: u64 },
    /// A returned result is unusable (a truncated or foreign bundle) or differs from the one
    /// already returned for the execution.
    #[error("the result of execution {execution} of run {run} is refused: {why}")]
    ResultRefused {
        run: String,
        execution: u64,
        why: String,
        conflict: bool,
    },
    #[error("workspace: {0}")]
    Workspace(#[from] trellis_workspace::WorkspaceError),
    /// The plan's agents could not work (preflight): one line per problem, with its fix.
    #[error("preflight found {} problem(s) before the run was created:\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Preflight(Vec<trellis_agents::preflight::PreflightProblem>),
    /// A caller's connection values were refused, or a required one has no value.
    #[error(transparent)]
    Connections(#[from] crate::plan::ConnectionsError),
    /// An environment file was refused.
    #[error(transparent)]
    Environment(#[from] crate::shared::environment::EnvironmentError),
    #[error("internal runtime failure: {0}")]
    Internal(String),
}

impl From<PlanError> for RuntimeError {
    fn from(error: PlanError) -> Self {
        Self::Admission(AdmissionError::Plan(error))
    }
}

impl RuntimeError {
    pub(crate) fn io(context: impl Into<String>, cause: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            cause,
        }
    }

    /// A stable, machine-readable code (the ledger's and admission's codes pass through).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Ledger(error) | Self::OpenLedger { cause: error, .. } => error.code(),
            Self::Admission(error) => error.code(),
            Self::Profile(error) => error.code(),
            Self::NoHome => "runtime.no_home",
            Self::StateDirectory { .. } => "runtime.state_directory",
            Self::InvalidRunId(..) => "run.invalid_id",
            Self::Io { .. } => "runtime.io",
            Self::WorkspaceBusy { .. } => "run.workspace_busy",
            Self::ControllerStart(_) => "run.controller_start",
            Self::ChildWatchdog(_) => "runtime.child_watchdog",
            Self::Sandbox(_) => "runtime.sandbox_unavailable",
            Self::NotStarted { cause, .. } => cause.code(),
            Self::StillActive(_) => "run.still_active",
            Self::NothingToResume(_) => "run.nothing_to_resume",
            Self::AlreadyResumed { .. } => "run.already_resumed",
            Self::UnknownExecution { .. } | Self::UnresolvedExecution { .. } => {
                "run.unknown_execution"
            }
            Self::NotSubmittable(_) => "run.not_submittable",
            Self::KeyInUse(_) => "submission.key_in_use",
            Self::UnknownCheckpoint { .. } => "run.unknown_checkpoint",
            Self::CheckpointPruned { .. } => "run.checkpoint_pruned",
            Self::WorkspaceChanged { .. } => "run.workspace_changed",
            Self::NoCheckpoints(_) => "run.no_checkpoints",
            Self::NoRetainedWorkspace { .. } => "run.no_retained_workspace",
            Self::NotClaimed { .. } => "dispatch.not_claimed",
            Self::NoStartPoint { .. } => "dispatch.no_start_point",
            Self::ResultRefused { conflict: true, .. } => "dispatch.result_conflict",
            Self::ResultRefused { .. } => "dispatch.result_invalid",
            Self::Workspace(error) => error.code(),
            Self::Preflight(_) => "run.preflight",
            Self::Connections(error) => error.code(),
            Self::Environment(error) => error.code(),
            Self::Internal(_) => "runtime.internal",
        }
    }
}
