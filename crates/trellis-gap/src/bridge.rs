//! The CPython bridge process: spawn, JSON-lines framing, request multiplexing and crash detection.

use crate::containment::{GapContainment, interpreter_trees, real_interpreter};
use crate::sample::Sample;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use trellis_process::{ProcessEnd, ProcessSpec, Session};

/// The bridge program, embedded at build time and passed to the interpreter with `-c`.
pub const BRIDGE_SOURCE: &str = concat!(
    include_str!("../python/bridge.py"),
    "\n",
    include_str!("../python/bridge_bundles.py")
);

/// Largest protocol frame the bridge sends (a script's return value, a published value, a
/// tool call, a log line): the Python side turns a larger result into a node error ("script
/// output exceeds N bytes"); a larger line read here is a broken bridge.
pub const MAX_BRIDGE_FRAME_BYTES: usize = 512 * 1024;

/// The environment variable that tells the Python side [`MAX_BRIDGE_FRAME_BYTES`].
const FRAME_LIMIT_VAR: &str = "TRELLIS_BRIDGE_MAX_FRAME_BYTES";

const READY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(10);
const STDERR_TAIL_LINES: usize = 20;
/// Longest a Python stream read may wait for its first observation.
const MAX_STREAM_WAIT_S: f64 = 60.0;
/// How long a killed bridge may take to go.
const KILL_GRACE: Duration = Duration::from_millis(200);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How to start the Python interpreter that runs script nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonConfig {
    /// Interpreter program (default `$TRELLIS_PYTHON`, else `python3`).
    pub interpreter: PathBuf,
    /// Extra environment variables on top of the caller's environment.
    pub extra_env: Vec<(String, String)>,
    /// The sandbox the interpreter runs in (`--isolation sandbox`); `None` runs it as the
    /// caller.
    pub containment: Option<GapContainment>,
}

impl Default for PythonConfig {
    fn default() -> Self {
        Self::from_env()
    }
}

impl PythonConfig {
    /// `$TRELLIS_PYTHON` when set and non-empty, else `python3` from `PATH`.
    pub fn from_env() -> Self {
        let interpreter = std::env::var_os("TRELLIS_PYTHON")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        PythonConfig {
            interpreter,
            extra_env: Vec::new(),
            containment: None,
        }
    }

    /// This configuration with its interpreter run in `containment`, named by its real
    /// executable (a shim on `PATH` does not work inside).
    pub fn contained(mut self, containment: GapContainment) -> Self {
        if let Some(real) = real_interpreter(&self.interpreter) {
            self.interpreter = real;
        }
        self.containment = Some(containment);
        self
    }
}

/// Why a bridge request failed (the node's error, not the engine's).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BridgeError {
    #[error("cannot start python bridge ({interpreter}): {message}")]
    Spawn {
        interpreter: String,
        message: String,
    },
    #[error(
        "python bridge exited unexpectedly ({status}){}",
        tail_suffix(stderr_tail)
    )]
    Exited { status: String, stderr_tail: String },
    #[error("cancelled; the python body did not stop within the grace period")]
    Abandoned,
    #[error("did not finish within {seconds}s")]
    TimedOut { seconds: f64 },
    #[error("python bridge protocol error: {0}")]
    Protocol(String),
}

fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; stderr: {tail}")
    }
}

/// Callbacks the host serves while a request is in flight.
pub(crate) trait BridgeHooks {
    /// `ctx.tool(name, **kwargs)` from Python: `Err((type, message))` becomes `tool_error`.
    fn tool_call(&self, tool: &str, kwargs: Map<String, Value>) -> Result<Value, (String, String)>;
    /// `ctx.publish(value)` from a streaming body.
    fn publish(&self, value: Value);
    /// A line the body printed.
    fn log(&self, stream: &str, line: &str);
    /// True once the node should stop.
    fn is_cancelled(&self) -> bool;
    /// `handle.latest()` on the observation stream from Python: `Err(message)` is raised there
    /// as `StreamUnavailable`.
    fn stream_latest(&self, _name: &str, _timeout: Duration) -> Result<Sample, String> {
        Err("no observation stream is running".to_string())
    }
}

type Pending = Arc<Mutex<HashMap<u64, Sender<Value>>>>;

/// How long one request may take.
struct Waiting {
    cancel_grace: Duration,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
}

impl Waiting {
    fn timed_out(&self) -> BridgeError {
        BridgeError::TimedOut {
            seconds: self.timeout.unwrap_or_default().as_secs_f64(),
        }
    }
}

/// A process end in the words of an exit status.
fn describe_end(end: &ProcessEnd) -> String {
    match end {
        ProcessEnd::Exited { code } => format!("exit status: {code}"),
        other => other.describe(),
    }
}

/// One running interpreter serving concurrent requests.
pub struct Bridge {
    session: Session,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
    /// A request timed out or was abandoned with its body still running: no new request goes
    /// here, and the process (with the stuck body) is killed once its last request is done.
    retired: AtomicBool,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge")
            .field("alive", &self.is_alive())
            .finish()
    }
}

/// Where log lines not tied to a request go (bridge stderr, prints from stray threads).
pub(crate) type LogSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The interpreter's environment: the caller's and the configured extras (the frame limit is
/// added last, after containment).
fn bridge_env(config: &PythonConfig) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k != FRAME_LIMIT_VAR)
        .collect();
    env.extend(config.extra_env.iter().cloned());
    env
}

/// How the interpreter is started: as the caller, or inside the run's sandbox (with the
/// interpreter's prefix and every `PYTHONPATH` entry shown read-only).
fn bridge_spec(config: &PythonConfig, interpreter: &str) -> ProcessSpec {
    let mut spec = ProcessSpec {
        program: interpreter.to_owned(),
        args: vec!["-u".into(), "-c".into(), BRIDGE_SOURCE.into()],
        cwd: std::env::current_dir().unwrap_or_default(),
        env: bridge_env(config),
        ..ProcessSpec::default()
    };
    if let Some(containment) = &config.containment {
        let mut trees = interpreter_trees(&config.interpreter);
        if let Some((_, path)) = spec.env.iter().rev().find(|(k, _)| k == "PYTHONPATH") {
            trees.extend(std::env::split_paths(path).filter(|dir| dir.exists()));
        }
        spec = containment.contain(spec, &trees);
    }
    spec.env.push((
        FRAME_LIMIT_VAR.to_owned(),
        MAX_BRIDGE_FRAME_BYTES.to_string(),
    ));
    spec
}

impl Bridge {
    /// Starts the interpreter (through the process runner: own process group, bounded
    /// lines) and waits for its `ready` frame.
    pub(crate) fn start(config: &PythonConfig, log_sink: LogSink) -> Result<Bridge, BridgeError> {
        let interpreter = config.interpreter.to_string_lossy().into_owned();
        let spawn_error = |message: String| BridgeError::Spawn {
            interpreter: interpreter.clone(),
            message,
        };
        let spec = bridge_spec(config, &interpreter);
        let (session, pipes) =
            Session::start(&spec, MAX_BRIDGE_FRAME_BYTES).map_err(spawn_error)?;
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stdout = pipes.stdout;
        {
            let pending = Arc::clone(&pending);
            let alive = Arc::clone(&alive);
            let sink = Arc::clone(&log_sink);
            std::thread::spawn(move || {
                let mut ready_tx = Some(ready_tx);
                for line in stdout {
                    if line.cut {
                        // The Python side never sends a frame this large: the bridge is broken.
                        sink(
                            "stderr",
                            &format!(
                                "python bridge sent a frame over {MAX_BRIDGE_FRAME_BYTES} bytes; stopping it"
                            ),
                        );
                        break;
                    }
                    let Ok(frame) = serde_json::from_slice::<Value>(&line.bytes) else {
                        continue;
                    };
                    if frame.get("kind").and_then(Value::as_str) == Some("ready") {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    let target = frame
                        .get("id")
                        .and_then(Value::as_u64)
                        .and_then(|id| lock(&pending).get(&id).cloned());
                    match target {
                        Some(sender) => {
                            let _ = sender.send(frame);
                        }
                        None => {
                            if frame.get("kind").and_then(Value::as_str) == Some("log") {
                                let stream = frame
                                    .get("stream")
                                    .and_then(Value::as_str)
                                    .unwrap_or("stdout");
                                let text = frame.get("line").and_then(Value::as_str).unwrap_or("");
                                sink(stream, text);
                            }
                        }
                    }
                }
                alive.store(false, Ordering::SeqCst);
                // Dropping every sender wakes all waiters with `Disconnected`.
                lock(&pending).clear();
            });
        }
        {
            let tail = Arc::clone(&stderr_tail);
            let sink = Arc::clone(&log_sink);
            let stderr = pipes.stderr;
            std::thread::spawn(move || {
                for line in stderr {
                    let line = line.text(MAX_BRIDGE_FRAME_BYTES);
                    sink("stderr", &line);
                    let mut tail = lock(&tail);
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let bridge = Bridge {
            session,
            stdin: Mutex::new(pipes.stdin),
            pending,
            next_id: AtomicU64::new(1),
            alive,
            retired: AtomicBool::new(false),
            stderr_tail,
        };
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(()) => Ok(bridge),
            Err(_) => {
                let error = bridge.exited_error();
                bridge.kill();
                Err(spawn_error(error.to_string()))
            }
        }
    }

    /// True while the process is running and its stdout is open.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Whether new requests may go to this bridge.
    fn is_usable(&self) -> bool {
        self.is_alive() && !self.retired.load(Ordering::SeqCst)
    }

    /// Kills the process and everything it started (idempotent).
    pub fn kill(&self) {
        self.session.stop(KILL_GRACE);
        self.alive.store(false, Ordering::SeqCst);
    }

    /// Asks the process to exit, then kills its group if it has not within `grace`.
    pub fn shutdown(&self, grace: Duration) {
        let _ = self.send(&json!({"kind": "shutdown"}));
        self.session.wait_end(grace);
        self.kill();
    }

    fn send(&self, frame: &Value) -> Result<(), BridgeError> {
        let mut line =
            serde_json::to_string(frame).map_err(|e| BridgeError::Protocol(e.to_string()))?;
        line.push('\n');
        let mut stdin = lock(&self.stdin);
        stdin
            .write_all(line.as_bytes())
            .and_then(|_| stdin.flush())
            .map_err(|_| self.exited_error())
    }

    fn exited_error(&self) -> BridgeError {
        // Give the reader threads a moment to collect the exit status and last stderr lines.
        let status = match self.session.wait_end(Duration::from_millis(500)) {
            Some(end) => describe_end(&end),
            None => "still running, output closed".to_string(),
        };
        std::thread::sleep(Duration::from_millis(20));
        let tail: Vec<String> = lock(&self.stderr_tail).iter().cloned().collect();
        BridgeError::Exited {
            status,
            stderr_tail: tail.join(" | "),
        }
    }

    /// Sends request `kind` with `payload` and serves callbacks until the final frame arrives.
    /// On cancellation, or once `timeout` has passed, the body is asked to stop and given
    /// `cancel_grace`; a body that does not stop retires the bridge.
    pub(crate) fn request(
        &self,
        kind: &str,
        mut payload: Map<String, Value>,
        hooks: &dyn BridgeHooks,
        cancel_grace: Duration,
        timeout: Option<Duration>,
    ) -> Result<Value, BridgeError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        if !self.is_alive() {
            return Err(self.exited_error());
        }
        lock(&self.pending).insert(id, tx);
        payload.insert("id".to_string(), json!(id));
        payload.insert("kind".to_string(), json!(kind));
        let limits = Waiting {
            cancel_grace,
            deadline: timeout.map(|t| Instant::now() + t),
            timeout,
        };
        let result = self
            .send(&Value::Object(payload))
            .and_then(|()| self.serve(id, &rx, hooks, &limits));
        lock(&self.pending).remove(&id);
        result
    }

    fn serve(
        &self,
        id: u64,
        rx: &Receiver<Value>,
        hooks: &dyn BridgeHooks,
        limits: &Waiting,
    ) -> Result<Value, BridgeError> {
        let mut cancel_deadline: Option<Instant> = None;
        let mut timed_out = false;
        loop {
            match rx.recv_timeout(POLL) {
                Ok(frame) => {
                    let kind = frame.get("kind").and_then(Value::as_str).unwrap_or("");
                    match kind {
                        "tool_call" => self.answer_tool_call(id, &frame, hooks)?,
                        "stream_latest" => self.answer_stream_read(id, &frame, hooks)?,
                        "publish" => {
                            hooks.publish(frame.get("value").cloned().unwrap_or(Value::Null))
                        }
                        "log" => hooks.log(
                            frame
                                .get("stream")
                                .and_then(Value::as_str)
                                .unwrap_or("stdout"),
                            frame.get("line").and_then(Value::as_str).unwrap_or(""),
                        ),
                        // A body that stopped because its time was up still timed out.
                        _ if timed_out => return Err(limits.timed_out()),
                        _ => return Ok(frame),
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.exited_error()),
            }
            let now = Instant::now();
            match cancel_deadline {
                None => {
                    let cancelled = hooks.is_cancelled();
                    let expired = limits.deadline.is_some_and(|d| now >= d);
                    if cancelled || expired {
                        timed_out = expired && !cancelled;
                        cancel_deadline = Some(now + limits.cancel_grace);
                        self.send(&json!({"id": id, "kind": "cancel"}))?;
                    }
                }
                Some(deadline) if now >= deadline => {
                    // The body still runs: the bridge takes no new request and goes once its
                    // last one is done (its process group is killed then).
                    self.retired.store(true, Ordering::SeqCst);
                    return Err(if timed_out {
                        limits.timed_out()
                    } else {
                        BridgeError::Abandoned
                    });
                }
                Some(_) => {}
            }
        }
    }

    fn answer_stream_read(
        &self,
        id: u64,
        frame: &Value,
        hooks: &dyn BridgeHooks,
    ) -> Result<(), BridgeError> {
        let call_id = frame.get("call_id").cloned().unwrap_or(Value::Null);
        let name = frame.get("name").and_then(Value::as_str).unwrap_or("");
        let timeout = frame
            .get("timeout")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| Duration::from_secs_f64(t.min(MAX_STREAM_WAIT_S)))
            .unwrap_or(Duration::from_secs(2));
        let reply = match hooks.stream_latest(name, timeout) {
            Ok(sample) => json!({"id": id, "kind": "stream_value", "call_id": call_id,
                                 "value": sample.value, "sampled_at": sample.sampled_at, "age_s": sample.age_s}),
            Err(message) => json!({"id": id, "kind": "stream_error", "call_id": call_id,
                                   "error": {"type": "StreamUnavailable", "message": message}}),
        };
        self.send(&reply)
    }

    fn answer_tool_call(
        &self,
        id: u64,
        frame: &Value,
        hooks: &dyn BridgeHooks,
    ) -> Result<(), BridgeError> {
        let call_id = frame.get("call_id").cloned().unwrap_or(Value::Null);
        let tool = frame.get("tool").and_then(Value::as_str).unwrap_or("");
        let kwargs = frame
            .get("kwargs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let reply = match hooks.tool_call(tool, kwargs) {
            Ok(value) => {
                json!({"id": id, "kind": "tool_result", "call_id": call_id, "value": value})
            }
            Err((error_type, message)) => json!({
                "id": id, "kind": "tool_error", "call_id": call_id,
                "error": {"type": error_type, "message": message}
            }),
        };
        self.send(&reply)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A lazily started bridge that is replaced when it dies, so one crash fails one node only.
pub(crate) struct BridgeSlot {
    config: PythonConfig,
    sink: LogSink,
    current: Mutex<Option<Arc<Bridge>>>,
}

impl BridgeSlot {
    pub(crate) fn new(config: PythonConfig, sink: LogSink) -> Self {
        BridgeSlot {
            config,
            sink,
            current: Mutex::new(None),
        }
    }

    /// The live bridge, starting one when there is none or the last one died.
    pub(crate) fn get(&self) -> Result<Arc<Bridge>, BridgeError> {
        let mut current = lock(&self.current);
        if let Some(bridge) = current.as_ref().filter(|b| b.is_usable()) {
            return Ok(Arc::clone(bridge));
        }
        let bridge = Arc::new(Bridge::start(&self.config, Arc::clone(&self.sink))?);
        *current = Some(Arc::clone(&bridge));
        Ok(bridge)
    }

    /// The sandbox this slot's bridges run in, if any.
    pub(crate) fn containment(&self) -> Option<&GapContainment> {
        self.config.containment.as_ref()
    }

    /// Shuts the current bridge down, if any.
    pub(crate) fn shutdown(&self, grace: Duration) {
        if let Some(bridge) = lock(&self.current).take() {
            bridge.shutdown(grace);
        }
    }
}
