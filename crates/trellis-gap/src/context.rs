//! Run-wide shared state and the per-node `ctx` handed to tools and bridged Python bodies, with
//! the [`Tool`] trait those bodies implement and the registry lookup the `ctx` calls through.

use crate::bridge::{BridgeError, BridgeHooks, BridgeSlot};
use crate::events::{RunEvent, RunObserver};
use crate::observation::ObservationStream;
use crate::sample::Sample;
use crate::stream::{CancelToken, StreamSlot};
use crate::timeouts::ScriptTimeouts;
use crate::tools::{ToolDescriptor, ToolError, check_arguments, reply_to_result};
use crate::trace::TraceWriter;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CANCEL_POLL: Duration = Duration::from_millis(2);

/// Per-category call limits (`perception`, `planning`, `sim_step` tags); `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuardLimits {
    pub perception: Option<u64>,
    pub planning: Option<u64>,
    pub sim_step: Option<u64>,
}

const GUARD_CATEGORIES: [(&str, &str); 3] = [
    ("perception", "GAP_MAX_PERCEPTION_CALLS"),
    ("planning", "GAP_MAX_PLANNING_CALLS"),
    ("sim_step", "GAP_MAX_SIM_STEPS"),
];

impl GuardLimits {
    /// Limits from `GAP_MAX_PERCEPTION_CALLS`, `GAP_MAX_PLANNING_CALLS`, `GAP_MAX_SIM_STEPS`
    /// (unset or unparseable means unlimited).
    pub fn from_env() -> Self {
        let read = |var: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        GuardLimits {
            perception: read(GUARD_CATEGORIES[0].1),
            planning: read(GUARD_CATEGORIES[1].1),
            sim_step: read(GUARD_CATEGORIES[2].1),
        }
    }

    fn limit(&self, index: usize) -> Option<u64> {
        [self.perception, self.planning, self.sim_step][index]
    }
}

/// A callable tool body.
pub trait Tool: Send + Sync {
    /// Runs the tool with keyword arguments; `ctx` gives publish, cancellation and nested calls.
    fn call(&self, ctx: &NodeContext<'_>, args: Map<String, Value>) -> Result<Value, ToolError>;
}

impl<F> Tool for F
where
    F: Fn(&NodeContext<'_>, Map<String, Value>) -> Result<Value, ToolError> + Send + Sync,
{
    fn call(&self, ctx: &NodeContext<'_>, args: Map<String, Value>) -> Result<Value, ToolError> {
        self(ctx, args)
    }
}

/// What a context needs of the run's tool registry (`ToolRegistry` in `tools/`): a tool by
/// name, or the reference's not-found error.
pub(crate) trait ToolLookup: Sync {
    /// The descriptor and body of `name`.
    fn lookup(&self, name: &str) -> Result<(&ToolDescriptor, Arc<dyn Tool>), ToolError>;
}

/// How long a script or Python tool body may run, and how long it gets to stop.
#[derive(Debug, Clone)]
pub(crate) struct BodyTimes {
    pub cancel_grace: Duration,
    pub script_timeouts: ScriptTimeouts,
}

/// State shared by every node of one execution.
pub(crate) struct RunShared<'a> {
    pub registry: &'a dyn ToolLookup,
    pub observer: &'a dyn RunObserver,
    pub bridge: BridgeSlot,
    pub trace: Option<TraceWriter>,
    pub cancel: CancelToken,
    pub guard_limits: GuardLimits,
    guard_counts: Mutex<[u64; 3]>,
    pub cancel_grace: Duration,
    /// The run's observation stream, when a connector was given.
    pub observation: Option<Arc<ObservationStream>>,
    /// Every Nth stream read is traced (`$GAP_TRACE_STREAM_SAMPLE_N`, default 1; 0: none).
    pub stream_sample_every: u64,
    /// Longest each script, router or Python tool body may run.
    pub script_timeouts: ScriptTimeouts,
}

impl<'a> RunShared<'a> {
    pub(crate) fn new(
        registry: &'a dyn ToolLookup,
        observer: &'a dyn RunObserver,
        bridge: BridgeSlot,
        trace: Option<TraceWriter>,
        cancel: CancelToken,
        guard_limits: GuardLimits,
        times: BodyTimes,
    ) -> Self {
        RunShared {
            registry,
            observer,
            bridge,
            trace,
            cancel,
            guard_limits,
            guard_counts: Mutex::new([0; 3]),
            cancel_grace: times.cancel_grace,
            script_timeouts: times.script_timeouts,
            observation: None,
            stream_sample_every: std::env::var("GAP_TRACE_STREAM_SAMPLE_N")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1),
        }
    }

    pub(crate) fn emit(&self, event: RunEvent) {
        self.observer.on_event(&event);
    }

    /// Counts a call of a tool with `tags`; fails once a category's count exceeds its limit.
    fn check_guard(&self, tags: &[String]) -> Result<(), ToolError> {
        let Some(index) = GUARD_CATEGORIES
            .iter()
            .position(|(category, _)| tags.iter().any(|t| t == category))
        else {
            return Ok(());
        };
        let Some(limit) = self.guard_limits.limit(index) else {
            return Ok(());
        };
        let mut counts = self.guard_counts.lock().unwrap_or_else(|p| p.into_inner());
        counts[index] += 1;
        if counts[index] > limit {
            let (category, var) = GUARD_CATEGORIES[index];
            return Err(ToolError::GuardLimit {
                message: format!(
                    "{category} call limit exceeded ({}/{limit}); raise it with {var}",
                    counts[index]
                ),
            });
        }
        Ok(())
    }
}

/// The `ctx` of one node body: nested tool calls, publishing, cancellation, logging.
pub struct NodeContext<'a> {
    pub(crate) run: &'a RunShared<'a>,
    node_id: String,
    /// Trace id under which sub-calls are recorded (`None`: not recorded, as for tool nodes).
    trace_id: Option<String>,
    stream: Option<Arc<StreamSlot>>,
    subcall_seq: AtomicU32,
    stream_read_seq: AtomicU32,
}

impl<'a> NodeContext<'a> {
    pub(crate) fn new(
        run: &'a RunShared<'a>,
        node_id: impl Into<String>,
        trace_id: Option<String>,
        stream: Option<Arc<StreamSlot>>,
    ) -> Self {
        NodeContext {
            run,
            node_id: node_id.into(),
            trace_id,
            stream,
            subcall_seq: AtomicU32::new(0),
            stream_read_seq: AtomicU32::new(0),
        }
    }

    /// The node's full id (`<subgraph>.<node>` inside subgraphs).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// True once the run or (for streaming nodes) the node was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.run.cancel.is_set()
            || self
                .stream
                .as_ref()
                .is_some_and(|s| s.cancel_token().is_set())
    }

    /// Sleeps up to `timeout`, returning early (with `true`) when cancelled.
    pub fn wait_cancelled(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.is_cancelled() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep(CANCEL_POLL.min(deadline - now));
        }
    }

    /// Publishes the latest value of a streaming node.
    pub fn publish(&self, value: Value) -> Result<(), ToolError> {
        let Some(slot) = &self.stream else {
            return Err(ToolError::failed(
                "publish",
                "RuntimeError",
                format!(
                    "ctx.publish() called on non-streaming node '{}'",
                    self.node_id
                ),
            ));
        };
        self.run.emit(RunEvent::Published {
            node_id: self.node_id.clone(),
            value: value.clone(),
        });
        slot.publish(value);
        Ok(())
    }

    /// Reports a printed line.
    pub fn log(&self, stream: &str, line: &str) {
        self.run.emit(RunEvent::Log {
            node_id: Some(self.node_id.clone()),
            stream: stream.to_string(),
            line: line.to_string(),
        });
    }

    /// `ctx.tool(name, **args)`: guard check, argument check, call, sub-call record.
    pub fn call_tool(&self, name: &str, args: Map<String, Value>) -> Result<Value, ToolError> {
        let (descriptor, body) = self.run.registry.lookup(name)?;
        self.run.check_guard(&descriptor.tags)?;
        check_arguments(descriptor, &args)?;
        let request = self.trace_id.as_ref().map(|_| args.clone());
        let response = body.call(self, args)?;
        if let (Some(trace), Some(trace_id), Some(request)) =
            (&self.run.trace, &self.trace_id, request)
        {
            let seq = self.subcall_seq.fetch_add(1, Ordering::SeqCst);
            trace.record_subcall(trace_id, seq, name, &Value::Object(request), &response);
        }
        Ok(response)
    }

    /// Calls a Python tool function through the bridge.
    pub(crate) fn call_python_tool(
        &self,
        tool: &str,
        module_path: &Path,
        function: &str,
        package: Option<&Value>,
        args: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let mut payload = Map::new();
        if let Some(package) = package {
            payload.insert("package".into(), package.clone());
        }
        payload.insert("tool".into(), json!(tool));
        payload.insert("module_path".into(), json!(module_path.to_string_lossy()));
        payload.insert("function".into(), json!(function));
        payload.insert("kwargs".into(), Value::Object(args));
        payload.insert("node_id".into(), json!(self.node_id));
        payload.insert("streaming".into(), json!(self.stream.is_some()));
        let reply = self
            .bridge_request("call_tool", payload)
            .map_err(|e| bridge_tool_error(tool, e))?;
        reply_to_result(tool, &reply)
    }

    /// Sends a request to the bridge with this context serving the callbacks.
    pub(crate) fn bridge_request(
        &self,
        kind: &str,
        payload: Map<String, Value>,
    ) -> Result<Value, BridgeError> {
        let bridge = self.run.bridge.get()?;
        bridge.request(
            kind,
            payload,
            self,
            self.run.cancel_grace,
            Some(self.run.script_timeouts.of(&self.node_id)),
        )
    }
}

fn bridge_tool_error(tool: &str, error: BridgeError) -> ToolError {
    match error {
        BridgeError::Abandoned => ToolError::Cancelled {
            message: format!("python tool '{tool}' did not stop within the grace period"),
        },
        BridgeError::TimedOut { seconds } => ToolError::failed(
            tool,
            "TimeoutError",
            format!("python tool '{tool}' did not finish within {seconds}s"),
        ),
        other => ToolError::Bridge {
            message: other.to_string(),
        },
    }
}

impl BridgeHooks for NodeContext<'_> {
    fn tool_call(&self, tool: &str, kwargs: Map<String, Value>) -> Result<Value, (String, String)> {
        self.call_tool(tool, kwargs).map_err(|e| {
            let kind = match &e {
                ToolError::NotFound { .. } => "KeyError".to_string(),
                ToolError::Argument { .. } => "ToolArgumentError".to_string(),
                ToolError::GuardLimit { .. } => "GuardLimitExceeded".to_string(),
                ToolError::Cancelled { .. } => "TaskCancelled".to_string(),
                ToolError::Failed { error_type, .. } => error_type.clone(),
                _ => "ToolError".to_string(),
            };
            let message = match &e {
                ToolError::Failed { message, .. } => message.clone(),
                ToolError::GuardLimit { message } | ToolError::Cancelled { message } => {
                    message.clone()
                }
                ToolError::Argument { message, .. } => message.clone(),
                other => other.to_string(),
            };
            (kind, message)
        })
    }

    fn publish(&self, value: Value) {
        // The Python side rejects publish on non-streaming nodes before sending.
        let _ = NodeContext::publish(self, value);
    }

    fn log(&self, stream: &str, line: &str) {
        NodeContext::log(self, stream, line);
    }

    fn is_cancelled(&self) -> bool {
        NodeContext::is_cancelled(self)
    }

    fn stream_latest(&self, name: &str, timeout: Duration) -> Result<Sample, String> {
        let stream = self
            .run
            .observation
            .as_ref()
            .ok_or_else(|| "no observation stream is running".to_string())?;
        let sample = stream.latest(timeout).map_err(|e| e.to_string())?;
        let seq = self.stream_read_seq.fetch_add(1, Ordering::SeqCst);
        let every = self.run.stream_sample_every;
        if let (Some(trace), Some(trace_id)) = (&self.run.trace, &self.trace_id)
            && every > 0
            && u64::from(seq) % every == 0
        {
            trace.record_stream_read(trace_id, seq, name, &sample.value, sample.sampled_at);
        }
        Ok(sample)
    }
}
