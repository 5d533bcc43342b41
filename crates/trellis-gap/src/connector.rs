//! Connectors: where a run's observations (the observation stream) and world snapshots (the
//! checkpoints) come from — a Python module, a long-running command speaking JSON lines, or any
//! [`Connector`] a caller implements.

use crate::bridge::{BridgeHooks, BridgeSlot, PythonConfig};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ChildStdin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use trellis_process::{ProcessSpec, Session};

/// Longest a connector call may take before it counts as failed.
pub const CONNECTOR_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest line a command connector may answer with.
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The robot, simulator or test double a run observes.
pub trait Connector: Send + Sync {
    /// One observation for the stream (`get_observation` of the reference's connectors).
    fn get_observation(&self) -> Result<Value, String>;
    /// The world state checkpoints are judged against; `Ok(None)` when there is none.
    fn world_snapshot(&self) -> Result<Option<Value>, String>;
}

/// Functions `get_observation()` and `world_snapshot()` of a Python module file, run in an
/// interpreter of their own (a missing `world_snapshot` means no snapshots).
pub struct PythonConnector {
    module_path: PathBuf,
    bridge: BridgeSlot,
}

impl PythonConnector {
    /// A connector over the module at `module_path`; the interpreter starts on first use.
    pub fn new(module_path: impl Into<PathBuf>, python: PythonConfig) -> Self {
        PythonConnector {
            module_path: module_path.into(),
            bridge: BridgeSlot::new(python, Arc::new(|_: &str, _: &str| {})),
        }
    }

    fn call(&self, function: &str) -> Result<Option<Value>, String> {
        let bridge = self.bridge.get().map_err(|e| e.to_string())?;
        let mut payload = Map::new();
        payload.insert(
            "module_path".into(),
            json!(self.module_path.to_string_lossy()),
        );
        payload.insert("function".into(), json!(function));
        let hooks = DeadlineHooks {
            deadline: Instant::now() + CONNECTOR_CALL_TIMEOUT,
        };
        let reply = bridge
            .request(
                "connector_call",
                payload,
                &hooks,
                Duration::from_millis(200),
                // The hooks' deadline bounds the call already.
                None,
            )
            .map_err(|e| e.to_string())?;
        if reply.get("missing").and_then(Value::as_bool) == Some(true) {
            return Ok(None);
        }
        match crate::tools::reply_to_result(function, &reply) {
            Ok(value) => Ok(Some(value)),
            Err(error) => Err(error.to_string()),
        }
    }
}

impl Drop for PythonConnector {
    fn drop(&mut self) {
        self.bridge.shutdown(Duration::from_millis(200));
    }
}

impl Connector for PythonConnector {
    fn get_observation(&self) -> Result<Value, String> {
        self.call("get_observation")?
            .ok_or_else(|| format!("{} has no get_observation()", self.module_path.display()))
    }

    fn world_snapshot(&self) -> Result<Option<Value>, String> {
        self.call("world_snapshot")
    }
}

/// A connector call has no callbacks; it is abandoned at its deadline.
struct DeadlineHooks {
    deadline: Instant,
}

impl BridgeHooks for DeadlineHooks {
    fn tool_call(&self, tool: &str, _: Map<String, Value>) -> Result<Value, (String, String)> {
        Err((
            "RuntimeError".into(),
            format!("tool '{tool}' is not available to a connector"),
        ))
    }
    fn publish(&self, _: Value) {}
    fn log(&self, _: &str, _: &str) {}
    fn is_cancelled(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

/// A long-running program: each request is a line `{"id": N, "op": "get_observation" |
/// "world_snapshot"}` on its stdin, each answer a line `{"id": N, "value": …}`,
/// `{"id": N, "error": "…"}` or `{"id": N, "unsupported": true}` on its stdout.
pub struct CommandConnector {
    /// Dropping it kills the connector's whole process group.
    session: Session,
    stdin: Mutex<ChildStdin>,
    replies: Mutex<Receiver<Value>>,
    next_id: AtomicU64,
}

impl CommandConnector {
    /// Starts `argv` (program and arguments) through the process runner, in its own process
    /// group with this process's environment; its stderr lines go to this process's stderr.
    pub fn spawn(argv: &[String]) -> Result<Self, String> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| "the connector command is empty".to_string())?;
        let spec = ProcessSpec {
            program: program.clone(),
            args: args.to_vec(),
            cwd: std::env::current_dir().unwrap_or_default(),
            env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            ..ProcessSpec::default()
        };
        let (session, pipes) = Session::start(&spec, MAX_REPLY_BYTES)
            .map_err(|e| format!("cannot start connector {program}: {e}"))?;
        let (tx, rx) = mpsc::channel();
        let stdout = pipes.stdout;
        std::thread::spawn(move || {
            for line in stdout {
                // An over-long answer is dropped; its caller times out on it.
                if line.cut {
                    continue;
                }
                if let Ok(value) = serde_json::from_slice::<Value>(&line.bytes)
                    && tx.send(value).is_err()
                {
                    break;
                }
            }
        });
        let stderr = pipes.stderr;
        std::thread::spawn(move || {
            for line in stderr {
                eprintln!("connector: {}", String::from_utf8_lossy(&line.bytes));
            }
        });
        Ok(CommandConnector {
            session,
            stdin: Mutex::new(pipes.stdin),
            replies: Mutex::new(rx),
            next_id: AtomicU64::new(1),
        })
    }

    fn call(&self, op: &str) -> Result<Option<Value>, String> {
        // One request at a time: answers are read in order.
        let replies = lock(&self.replies);
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut stdin = lock(&self.stdin);
            writeln!(stdin, "{}", json!({"id": id, "op": op}))
                .and_then(|()| stdin.flush())
                .map_err(|e| format!("connector closed its input: {e}"))?;
        }
        let deadline = Instant::now() + CONNECTOR_CALL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = match replies.recv_timeout(left) {
                Ok(reply) => reply,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "connector did not answer {op} within {}s",
                        CONNECTOR_CALL_TIMEOUT.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => return Err("connector exited".into()),
            };
            // A late answer to an abandoned request is skipped.
            if reply.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if reply.get("unsupported").and_then(Value::as_bool) == Some(true) {
                return Ok(None);
            }
            if let Some(error) = reply.get("error") {
                return Err(error
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| error.to_string()));
            }
            return Ok(Some(reply.get("value").cloned().unwrap_or(Value::Null)));
        }
    }
}

impl Drop for CommandConnector {
    fn drop(&mut self) {
        self.session.stop(CONNECTOR_STOP_GRACE);
    }
}

/// How long a connector may take to exit once asked to stop.
const CONNECTOR_STOP_GRACE: Duration = Duration::from_millis(200);

impl Connector for CommandConnector {
    fn get_observation(&self) -> Result<Value, String> {
        self.call("get_observation")?
            .ok_or_else(|| "the connector does not provide observations".to_string())
    }

    fn world_snapshot(&self) -> Result<Option<Value>, String> {
        self.call("world_snapshot")
    }
}
