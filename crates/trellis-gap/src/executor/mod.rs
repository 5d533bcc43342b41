//! Executor entry point: validation gate, trace setup and the run's shared state; the
//! top-level scope, end node and recovery are in `top_level.rs`.

mod checkpoints;
mod journaling;
mod nodes;
mod scope;
mod subgraph;
mod top_level;

use crate::bridge::{BridgeSlot, LogSink, PythonConfig};
use crate::checkpoint::{CheckpointMode, CheckpointResult};
use crate::connector::Connector;
use crate::context::{BodyTimes, GuardLimits, RunShared};
use crate::events::{ExecutionResult, RunEvent, RunObserver};
use crate::issue::{Issue, graph_validation_message};
use crate::journal::NodeJournal;
use crate::model::{IN, Workflow};
use crate::observation::{DEFAULT_OBSERVATION_HZ, ObservationStream, observation_hz};
use crate::skills::SkillRegistry;
use crate::stream::CancelToken;
use crate::timeouts::ScriptTimeouts;
use crate::tools::{ToolError, ToolRegistry};
use crate::trace::TraceWriter;
use crate::validate::{ValidateOptions, validate};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEFAULT_VISIT_CAP: usize = 10_000;
const DEFAULT_GRACE_S: f64 = 2.0;
const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(60);
const BRIDGE_SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// Longest a script, router or Python tool body runs unless configured otherwise (the same
/// default as a command tool's `timeout_s`).
pub const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// How to run a workflow.
#[derive(Clone)]
pub struct ExecuteOptions {
    /// Top-level `in.*` values and the base for unbound subgraph inputs.
    pub inputs: Map<String, Value>,
    /// Where `dag_trace.json` and `node_data/` go; `None` writes no trace.
    pub trace_dir: Option<PathBuf>,
    /// Upper bound of concurrently running ready nodes per super-step (and Send copies).
    pub max_workers: usize,
    /// Tools available to tool nodes, recovery calls and `ctx.tool`.
    pub tool_registry: Arc<ToolRegistry>,
    /// Skill bundles: S4/SK rules before the run, `gap_skills.*` packages for the scripts of a
    /// bundle's subgraphs, and canonical scripts not shipped beside the workflow.
    pub skill_registry: Arc<SkillRegistry>,
    /// How to start the Python bridge.
    pub python: PythonConfig,
    /// Super-step cap per scope (default `$GAP_ITERATION_CAP`, else 10000).
    pub node_visit_cap: usize,
    /// Grace period for cooperative cancellation (default `$GAP_PARALLEL_CANCEL_GRACE_S`, else 2 s).
    pub cancel_grace: Duration,
    /// Longest a script, router or Python tool body may run before it is stopped like a
    /// cancelled one and its node fails with a timeout, unless the workflow's `meta` says
    /// otherwise (`script_timeout_s`, `script_timeouts_s`; default `$GAP_SCRIPT_TIMEOUT_S`,
    /// else [`DEFAULT_SCRIPT_TIMEOUT`]).
    pub script_timeout: Duration,
    /// How long a `$ref` to a streaming node waits for its first publish.
    pub stream_publish_timeout: Duration,
    /// Per-tag call limits.
    pub guard_limits: GuardLimits,
    /// Cancelling this token stops the run (running bodies get the grace period).
    pub cancel: CancelToken,
    /// Where observations and world snapshots come from.
    pub connector: Option<Arc<dyn Connector>>,
    /// Polling rate when neither `meta.observation_stream_hz` nor `$GAP_OBSERVATION_STREAM_HZ`
    /// sets one.
    pub observation_hz: f64,
    /// How subgraph checkpoint sidecars are treated.
    pub checkpoints: CheckpointMode,
    /// Where tool, script and router bodies are recorded before and after they run, and
    /// whose settled outputs are reused instead of running again (a resumed run).
    pub journal: Option<Arc<dyn NodeJournal>>,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        let env_f64 = |var: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        let grace = env_f64("GAP_PARALLEL_CANCEL_GRACE_S")
            .filter(|g| g.is_finite() && *g >= 0.0)
            .unwrap_or(DEFAULT_GRACE_S);
        ExecuteOptions {
            inputs: Map::new(),
            trace_dir: None,
            max_workers: 8,
            tool_registry: Arc::new(ToolRegistry::new()),
            skill_registry: Arc::new(SkillRegistry::new()),
            python: PythonConfig::from_env(),
            node_visit_cap: std::env::var("GAP_ITERATION_CAP")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(DEFAULT_VISIT_CAP),
            cancel_grace: Duration::from_secs_f64(grace),
            script_timeout: env_f64("GAP_SCRIPT_TIMEOUT_S")
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(Duration::from_secs_f64)
                .unwrap_or(DEFAULT_SCRIPT_TIMEOUT),
            stream_publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            guard_limits: GuardLimits::from_env(),
            cancel: CancelToken::new(),
            connector: None,
            observation_hz: DEFAULT_OBSERVATION_HZ,
            checkpoints: CheckpointMode::Off,
            journal: None,
        }
    }
}

/// An error raised while running nodes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ExecError {
    /// A node body failed (`message` is the full "Node '<id>' failed: …" text).
    #[error("{message}")]
    Node {
        node_id: String,
        message: String,
        traceback: Option<String>,
        terminal: bool,
    },
    /// A routing or structural failure at run time.
    #[error("{0}")]
    Pipeline(String),
    /// A `$ref` could not be resolved for a node.
    #[error("Node '{node_id}' failed: WorkflowValidationError: {message}")]
    Resolve { node_id: String, message: String },
    /// A guard limit tripped; never routed through `on_error`.
    #[error("GuardLimitExceeded: {0}")]
    Guard(String),
    /// The run was cancelled; never routed through `on_error`.
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// A strict checkpoint failed; never routed through `on_error`.
    #[error("VerificationFailed: {0}")]
    Verification(String),
}

impl ExecError {
    /// Terminal errors bypass `on_error` and abort the run.
    pub(crate) fn is_terminal(&self) -> bool {
        match self {
            ExecError::Node { terminal, .. } => *terminal,
            ExecError::Guard(_) | ExecError::Cancelled(_) | ExecError::Verification(_) => true,
            _ => false,
        }
    }

    pub(crate) fn from_tool(node_id: &str, error: ToolError) -> ExecError {
        match error {
            ToolError::GuardLimit { message } => ExecError::Guard(message),
            ToolError::Cancelled { message } => {
                ExecError::Cancelled(format!("node '{node_id}': {message}"))
            }
            other => {
                let terminal = matches!(other, ToolError::Failed { terminal: true, .. });
                ExecError::Node {
                    node_id: node_id.to_string(),
                    message: format!("Node '{node_id}' failed: {other}"),
                    traceback: other.traceback().map(str::to_string),
                    terminal,
                }
            }
        }
    }

    fn traceback(&self) -> Option<String> {
        match self {
            ExecError::Node { traceback, .. } => traceback.clone(),
            _ => None,
        }
    }

    /// The node whose body failed, when the error is one node's failure.
    fn failed_node(&self) -> Option<String> {
        match self {
            ExecError::Node { node_id, .. } | ExecError::Resolve { node_id, .. } => {
                Some(node_id.clone())
            }
            _ => None,
        }
    }
}

/// One execution's state beyond what nodes share through `ctx`.
pub(crate) struct Executor<'a> {
    pub run: RunShared<'a>,
    pub workflow: &'a Workflow,
    pub options: &'a ExecuteOptions,
    /// `{subgraph: {output: value}}`, most recently finished subgraph last.
    pub cross_outputs: Mutex<IndexMap<String, Map<String, Value>>>,
    /// First node failure of the run, as "<full_id>: <text>".
    pub first_error: Mutex<Option<String>>,
    pub visits: Mutex<IndexMap<String, u32>>,
    /// Every checkpoint evaluated so far, in order.
    pub checkpoint_results: Mutex<Vec<CheckpointResult>>,
    /// The "no world snapshot" warning is given once per run.
    pub snapshot_warned: AtomicBool,
}

/// Validates and runs `workflow`, reporting progress to `observer`; never panics on bad input.
pub fn execute(
    workflow: &Workflow,
    options: ExecuteOptions,
    observer: &dyn RunObserver,
) -> ExecutionResult {
    let started = Instant::now();
    let mut result = run_validated(workflow, &options, observer);
    result.duration_s = started.elapsed().as_secs_f64();
    observer.on_event(&RunEvent::RunFinished {
        result: result.clone(),
    });
    result
}

fn empty_result(error: String) -> ExecutionResult {
    ExecutionResult {
        checkpoints: Vec::new(),
        exit_status: None,
        end_node: None,
        outputs: IndexMap::new(),
        error: Some(error),
        failed_node: None,
        traceback: None,
        trace_dir: None,
        duration_s: 0.0,
    }
}

fn run_validated(
    workflow: &Workflow,
    options: &ExecuteOptions,
    observer: &dyn RunObserver,
) -> ExecutionResult {
    let validate_options = ValidateOptions {
        tool_registry: Some(&options.tool_registry),
        skill_registry: (!options.skill_registry.is_empty()).then_some(&*options.skill_registry),
        ..ValidateOptions::default()
    };
    let issues = validate(workflow, &validate_options);
    let (errors, warnings): (Vec<Issue>, Vec<Issue>) =
        issues.into_iter().partition(Issue::is_error);
    for issue in warnings {
        observer.on_event(&RunEvent::ValidationWarning { issue });
    }
    if !errors.is_empty() {
        return empty_result(graph_validation_message(&errors));
    }
    let trace = match &options.trace_dir {
        None => None,
        Some(dir) => match TraceWriter::create(dir) {
            Ok(writer) => Some(writer),
            Err(e) => {
                return empty_result(format!(
                    "cannot create trace directory {}: {e}",
                    dir.display()
                ));
            }
        },
    };
    if let Some(trace) = &trace {
        trace.register_topology(workflow);
        trace.copy_workflow(&workflow.workflow_dir);
        trace.flush();
    }
    observer.on_event(&RunEvent::RunStarted {
        workflow_dir: workflow.workflow_dir.to_string_lossy().into_owned(),
        trace_dir: options
            .trace_dir
            .as_ref()
            .map(|d| d.to_string_lossy().into_owned()),
    });
    let sink_observer: &dyn RunObserver = observer;
    // The bridge's reader threads outlive this call's borrow, so unattributed lines go through a channel.
    let (log_tx, log_rx) = std::sync::mpsc::channel::<(String, String)>();
    let log_tx = Mutex::new(log_tx);
    let sink: LogSink = Arc::new(move |stream: &str, line: &str| {
        if let Ok(tx) = log_tx.lock() {
            let _ = tx.send((stream.to_string(), line.to_string()));
        }
    });
    let observation = options.connector.as_ref().map(|connector| {
        let hz = observation_hz(&workflow.meta, options.observation_hz);
        Arc::new(ObservationStream::start(Arc::clone(connector), hz))
    });
    let mut run = RunShared::new(
        &*options.tool_registry,
        observer,
        BridgeSlot::new(options.python.clone(), sink),
        trace,
        options.cancel.clone(),
        options.guard_limits,
        BodyTimes {
            cancel_grace: options.cancel_grace,
            script_timeouts: ScriptTimeouts::from_meta(&workflow.meta, options.script_timeout),
        },
    );
    run.observation = observation;
    let executor = Executor {
        run,
        workflow,
        options,
        cross_outputs: Mutex::new(IndexMap::new()),
        first_error: Mutex::new(None),
        visits: Mutex::new(IndexMap::new()),
        checkpoint_results: Mutex::new(Vec::new()),
        snapshot_warned: AtomicBool::new(false),
    };
    let mut result = executor.run_top_level();
    // The stream stops with the run, before anything else is torn down.
    if let Some(stream) = &executor.run.observation {
        stream.stop();
    }
    result.checkpoints = executor
        .checkpoint_results
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    executor.run.bridge.shutdown(BRIDGE_SHUTDOWN_GRACE);
    for (stream, line) in log_rx.try_iter() {
        sink_observer.on_event(&RunEvent::Log {
            node_id: None,
            stream,
            line,
        });
    }
    if let Some(trace) = &executor.run.trace {
        trace.flush();
        result.trace_dir = Some(trace.dir().to_path_buf());
    }
    result
}

/// The `in` pseudo-node of a scope.
pub(crate) fn in_key() -> String {
    IN.to_string()
}
