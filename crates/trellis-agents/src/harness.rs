//! The harness port: one execution request in, streamed events and one settled result out.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_graph::{NodeName, WorkerOutcome};
pub use trellis_run_model::{LogLevel, LogStream, TokenUsage};

use crate::binding::Binding;
use crate::contract::NodeContract;
use crate::redact::SecretEnv;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a harness needs for one execution.
#[derive(Debug, Clone)]
pub struct ExecutionRequest {
    pub run_id: String,
    pub node: NodeName,
    pub execution: u64,
    /// Stable across crash retries and loop rounds of the same occurrence.
    pub node_instance: u64,
    pub attempt: u32,
    pub input: Value,
    pub instructions: Option<String>,
    pub contract: NodeContract,
    pub binding: Binding,
    /// The repository or directory the run works in.
    pub workspace: PathBuf,
    /// A private directory for this execution (homes, schema files); created for agent
    /// bindings only, and removed by the caller.
    pub scratch: PathBuf,
    pub deadline: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub environment: SecretEnv,
    /// Variables every harness passes through (`PATH`, `HOME`), read from the controller.
    pub base_env: Vec<(String, String)>,
}

/// Something that happened during an execution, already redacted.
#[derive(Debug, Clone, PartialEq)]
pub enum HarnessEvent {
    /// The worker process started; its process group id.
    Started {
        process_group: u32,
    },
    /// A log line: its stream, its severity (said by the harness, never guessed from the
    /// text) and the message.
    Log {
        stream: LogStream,
        level: LogLevel,
        message: String,
    },
    Usage(TokenUsage),
}

/// The settled result: the outcome the graph sees plus usage totals for the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionResult {
    pub outcome: WorkerOutcome,
    pub usage: TokenUsage,
    /// The worker was killed by this signal, sent from outside Trellis: the outcome is not of
    /// the work's own making, so a resumed run runs the execution again.
    pub killed_from_outside: Option<i32>,
    /// The worker host running it stopped renewing its claim (it died or lost the ledger):
    /// Trellis settled it `crash`, and the node's attempts decide whether it runs again.
    pub worker_lost: bool,
}

impl ExecutionResult {
    /// A result the worker itself produced.
    pub fn settled(outcome: WorkerOutcome, usage: TokenUsage) -> Self {
        Self {
            outcome,
            usage,
            killed_from_outside: None,
            worker_lost: false,
        }
    }
}

pub type EventSink = mpsc::Sender<HarnessEvent>;

/// Runs executions for one kind of binding.
pub trait Harness: Send + Sync {
    /// The harness name shown in logs (`exec`, `claude`, …).
    fn name(&self) -> &str;

    /// Runs one execution to its settled outcome. On `cancel`, stops the worker and settles
    /// `refusal`; the caller decides what a cancelled execution means.
    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult>;

    /// Forgets everything kept for `run_id` (agent sessions reused across executions). The
    /// controller calls it when a run ends.
    fn close_run(&self, _run_id: &str) {}

    /// Whether an execution a previous controller of the run started can be handed to this
    /// harness again and still settle once (true for the worker-host queue, whose dispatch
    /// rows outlive the controller; a local child process cannot be re-attached).
    fn adopts_active(&self) -> bool {
        false
    }
}
