//! The run API: the one boundary every Trellis front end (the CLI, the web UI, the team server)
//! uses to admit, submit, observe and control runs.
//!
//! [`Runtime`] owns a state directory and its ledger. A run goes through
//! [`Runtime::admit`] (graph parsed and verified, input checked, runtime plan admitted — the
//! same steps a controller and `resume` repeat on the stored submission) and
//! [`Runtime::submit`] (created in the ledger, idempotent on its submission key, and driven by a
//! detached controller process or on the calling thread). [`Runtime::status`],
//! [`Runtime::list`], [`Runtime::watch`], [`Runtime::logs`], [`Runtime::run_graph`] and
//! [`Runtime::execution`] read it; [`Runtime::force_stop`] and [`Runtime::resume`] control
//! it. Every error is a closed enum with a stable `code()`; nothing returned ever carries a
//! secret value. `docs/run-api.md` describes the surface; everything else in this crate is
//! private.

// One room per capability, each a folder whose `mod.rs` says its job and what it may import.
// Bottom to top: `plan`, `delivery` < `shared` < `checkpoints` < `control` < `observation`,
// `dispatch`, `gap_runs` < `graphspec` < `worker_host`, `profiles` < `api` (the façade). A room imports only
// rooms below it; what it needs from above comes in as a parameter (docs/architecture.md).
mod api;
mod checkpoints;
mod control;
mod delivery;
mod dispatch;
mod gap_runs;
mod graphspec;
mod observation;
mod plan;
mod profiles;
mod shared;
mod worker_host;

pub use api::doctor::{CheckState, DoctorCheck, DoctorReport, doctor};
pub use api::options::{
    Receipt, ResumeOptions, RuntimeOptions, StartMode, SubmitOptions, WorkspaceMode,
    WorkspaceOptions,
};
pub use api::runtime::{Runtime, parse_run_id};
pub use api::validation::{ValidateRequest, ValidationReport, VerifiedReport, validate};
pub use checkpoints::operations::{
    CheckpointInfo, CheckpointPage, DiscardedWorkspace, MAX_CHECKPOINTS_PER_PAGE, RetainedWorkspace,
};
pub use checkpoints::prune::{
    DEFAULT_PRUNE_AGE_MS, PruneOptions, PruneReason, PruneReport, PrunedItem, PrunedKind,
};
pub use control::isolation::ISOLATION_ENV;
pub use control::spawn::CONTROLLER_SUBCOMMAND as CONTROLLER_COMMAND;
pub use control::spawn::{CONTROLLER_LEASE_ENV, DISPATCH_ENV};
pub use dispatch::DispatchMode;
pub use dispatch::remote_workspace::{RemoteStart, START_COMMIT_HEADER, WORKSPACE_SUBDIR_HEADER};
pub use gap_runs::admission::{GapConnector, GapOutcome, GapRunRequest};
pub use graphspec::admission::{
    AdmissionError, AdmissionSummary, AdmitRequest, Admitted, ConfigSource, GraphSource,
    InputSource, PlanSource, WorstCase, admit,
};
pub use graphspec::source::{
    CheckedOut, RunSource, SourceError, SourceRequest, check_out_source, resolve_source,
    url_has_credentials,
};
pub use observation::cause::{CauseNode, RunCause};
pub use observation::gap_bodies::{GapBody, GapBodyPhase};
pub use observation::gap_end::{GapEnd, GapExitStatus};
pub use observation::logs::{LogEntry, LogFilter, LogRecord, LogsStream};
pub use observation::runs_stream::RunsStream;
pub use observation::streams::{Subscription, WatchStream, WatchUpdate, WatchedExecution};
pub use observation::views::{
    BindingView, ControllerView, ExecutionDetail, ExecutionPhase, ExecutionSummary, GraphBounds,
    GraphLayout, LayoutNode, OutcomeSummary, RunGraph, RunListFilter, RunListing, RunStatus,
    RunSummary, SkippedRun, Termination,
};
pub use observation::watch_schema::watch_update_json_schema;
pub use plan::admission::{AdmissionRefusal, GraphAdmissionError};
pub use plan::connections::{MAX_CALLER_CONNECTIONS, MAX_CONNECTION_VALUE_BYTES};
pub use plan::{Connections, ConnectionsError, PlanError, ServerConnections};
pub use plan::{Isolation, Network};
pub use profiles::document::{
    PROFILE_FORMAT, Profile, ProfileDefinition, ProfilePlan, ProfileSummary, ProfileTemplate,
};
pub use profiles::name::{MAX_PROFILE_NAME_BYTES, ProfileName};
pub use profiles::requests::{DeletedProfile, SaveProfile, SavedProfile};
pub use profiles::store::{ExpectedRevision, ProfileListing, UnreadableProfile};
pub use shared::documents::{DocumentKind, classify};
pub use shared::environment::{
    DEFAULT_HOOK_LIMIT, DEFAULT_HOOKS_BUDGET, EnvironmentError, EnvironmentSpec, HOOK_LIMIT_ENV,
    HOOKS_BUDGET_ENV, Hook,
};
pub use shared::error::RuntimeError;
pub use shared::home::default_home;
/// How much of its workers' output a run records, per execution and per run.
pub use shared::log_budget::{
    MAX_EXECUTION_LOG_BYTES, MAX_EXECUTION_LOG_LINES, MAX_RUN_LOG_BYTES, MAX_RUN_LOG_LINES,
};
pub use shared::profile_error::ProfileError;
pub use shared::templates::{
    DeliveryMode, TemplateDelivery, TemplateInfo, TemplateInput, template, templates,
};
pub use trellis_agents::{Sandbox, SandboxError};
pub use trellis_ledger::{LEDGER_ENV, LedgerLocation};
/// The hidden subcommand a worker host's step guards run as, and what it runs.
pub use trellis_process::{GUARD_SUBCOMMAND as GUARD_COMMAND, run_guard};
pub use worker_host::private_workspace::{CLAIM_HEADER, WorkspaceServer};
pub use worker_host::work::{WorkerOptions, WorkerReport};

/// The run vocabulary front ends render: ids, cursors, phases, results, log levels.
pub use trellis_ledger::observe::{ActiveExecution, ExecutionCounts, PhaseStatus, WatchStatus};
pub use trellis_ledger::{CheckpointBefore, CheckpointBeforeKind, Phase, RunKind};
pub use trellis_run_model::{
    Cursor, LogLevel, LogStream, MAX_LOG_MESSAGE_BYTES, RunId, SettledBy, TerminalResult,
    TokenUsage, VoidReason,
};

/// Graph diagnostics, for rendering a rejected graph.
pub mod diagnostics {
    pub use trellis_graph::{DiagnosticCode, FieldName, GraphDiagnostic, NodeName, PathSegment};
}

/// GaP workflow progress events and results, for rendering a GaP run.
pub mod gap {
    pub use trellis_gap::{
        CheckpointMode, ExecutionResult as GapResult, RunEvent as GapEvent, TraceDiff,
        TraceDiffError, ValidationReport as GapValidationReport, diff_traces,
    };
}

/// The JSON Schema of GraphSpec documents (`graph.json`), for editors.
pub fn graph_json_schema() -> serde_json::Value {
    trellis_graph::schema::graph_json_schema()
}

/// One worker of the built-in registry: its reference and how the runtime runs it (`agent`,
/// `delivery`); `command.<name>@N` references are open-ended and not listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BuiltinWorkerInfo {
    pub worker: &'static str,
    pub kind: &'static str,
}

/// The built-in worker registry, for an editor's worker picker.
pub fn builtin_workers() -> Vec<BuiltinWorkerInfo> {
    use trellis_verify::builtin::{BUILTIN_WORKERS, BuiltinKind};
    BUILTIN_WORKERS
        .iter()
        .map(|builtin| BuiltinWorkerInfo {
            worker: builtin.worker,
            kind: match builtin.kind {
                BuiltinKind::Agent => "agent",
                BuiltinKind::Delivery => "delivery",
                BuiltinKind::Command => "command",
            },
        })
        .collect()
}

/// Internals for this crate's own integration tests and benchmarks: not part of the API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use crate::delivery::{
        ForgeSettings, GitDelivery, RetrySchedule, SourceRevision, parse_remote, read_source,
        run_branch,
    };
    pub use crate::graphspec::reuse::ReuseIndex;
    pub use crate::graphspec::supervisor::{Harnesses, RunContext, Supervisor, history_of};
    pub use crate::plan::RuntimePlan;
}
