//! Command tools declared in a JSON manifest: arguments as JSON on stdin, result as JSON on stdout.

use super::{Tool, ToolDescriptor, ToolError, ToolRegistry};
use crate::context::NodeContext;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEFAULT_TIMEOUT_S: f64 = 300.0;
const POLL_INTERVAL: Duration = Duration::from_millis(5);
const STDERR_TAIL_CHARS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    tools: indexmap::IndexMap<String, ManifestEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestEntry {
    command: Vec<String>,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    params: Option<Vec<String>>,
    #[serde(default)]
    timeout_s: Option<f64>,
}

#[derive(Debug, Clone)]
struct CommandTool {
    name: String,
    argv: Vec<String>,
    timeout: Duration,
}

/// Registers every tool of the manifest at `path` (`{"tools": {name: {command: [...], ...}}}`).
///
/// A program given with a `/` resolves against the manifest's directory.
pub fn load_command_manifest(registry: &mut ToolRegistry, path: &Path) -> Result<(), ToolError> {
    let manifest_error = |message: String| ToolError::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| manifest_error(e.to_string()))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| manifest_error(e.to_string()))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    for (name, entry) in manifest.tools {
        let Some(program) = entry.command.first() else {
            return Err(manifest_error(format!(
                "tool '{name}' has an empty command"
            )));
        };
        let mut argv = entry.command.clone();
        if program.contains('/') && Path::new(program).is_relative() {
            argv[0] = base.join(program).to_string_lossy().into_owned();
        }
        let timeout_s = entry.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if !(timeout_s.is_finite() && timeout_s > 0.0) {
            return Err(manifest_error(format!(
                "tool '{name}' has an invalid timeout_s"
            )));
        }
        let descriptor = ToolDescriptor {
            name: name.clone(),
            summary: entry.summary,
            tags: entry.tags,
            params: entry.params,
        };
        let body = CommandTool {
            name,
            argv,
            timeout: Duration::from_secs_f64(timeout_s),
        };
        registry.register(descriptor, Arc::new(body))?;
    }
    Ok(())
}

impl Tool for CommandTool {
    fn call(&self, ctx: &NodeContext<'_>, args: Map<String, Value>) -> Result<Value, ToolError> {
        let fail =
            |error_type: &str, message: String| ToolError::failed(&self.name, error_type, message);
        let mut child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail("OSError", format!("cannot start {}: {e}", self.argv[0])))?;
        let input = serde_json::to_vec(&Value::Object(args)).unwrap_or_default();
        let stdin = child.stdin.take();
        let writer = std::thread::spawn(move || {
            if let Some(mut stdin) = stdin {
                // A program that exits without reading its stdin is not an error.
                let _ = stdin.write_all(&input);
            }
        });
        let stdout_reader = child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let _ = out.read_to_end(&mut buffer);
                buffer
            })
        });
        let stderr_reader = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut buffer = String::new();
                let _ = err.read_to_string(&mut buffer);
                buffer
            })
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(fail("OSError", e.to_string())),
            }
            if ctx.is_cancelled() {
                let _ = child.kill();
                let _ = child.wait();
                break Err(ToolError::Cancelled {
                    message: format!("command tool '{}' cancelled", self.name),
                });
            }
            if started.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                break Err(fail(
                    "TimeoutError",
                    format!(
                        "command tool '{}' timed out after {:?}",
                        self.name, self.timeout
                    ),
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        let _ = writer.join();
        let stdout = stdout_reader
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let stderr = stderr_reader
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        for line in stderr.lines() {
            ctx.log("stderr", line);
        }
        let status = status?;
        if !status.success() {
            let tail: String = stderr
                .chars()
                .rev()
                .take(STDERR_TAIL_CHARS)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Err(fail(
                "CommandFailed",
                format!(
                    "command tool '{}' exited with {status}: {}",
                    self.name,
                    tail.trim()
                ),
            ));
        }
        if stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&stdout).map_err(|e| {
            fail(
                "ValueError",
                format!("command tool '{}' printed invalid JSON: {e}", self.name),
            )
        })
    }
}
