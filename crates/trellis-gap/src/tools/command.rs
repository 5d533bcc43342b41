//! Command tools declared in a JSON manifest: arguments as JSON on stdin, result as JSON on stdout.

use super::{Tool, ToolDescriptor, ToolError, ToolRegistry};
use crate::context::NodeContext;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Stream, run_blocking};

const DEFAULT_TIMEOUT_S: f64 = 300.0;
const STDERR_TAIL_CHARS: usize = 2000;
/// Most bytes a command tool may print as its result (the bridge's frame limit, so a tool
/// result fits wherever a script's does).
pub const MAX_TOOL_OUTPUT_BYTES: usize = crate::bridge::MAX_BRIDGE_FRAME_BYTES;

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
        let mut spec = ProcessSpec {
            program: self.argv[0].clone(),
            args: self.argv[1..].to_vec(),
            cwd: std::env::current_dir().unwrap_or_default(),
            // Tools are the user's own programs: they see the caller's environment.
            env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            stdin: serde_json::to_vec(&Value::Object(args)).unwrap_or_default(),
            ..ProcessSpec::default()
        };
        if let Some(containment) = ctx.run.bridge.containment() {
            spec = containment.contain(spec, &[]);
        }
        let limits = ProcessLimits {
            deadline: Some(self.timeout),
            max_stdout_bytes: MAX_TOOL_OUTPUT_BYTES,
            ..ProcessLimits::default()
        };
        let mut stderr_tail = StderrTail::default();
        let report = run_blocking(
            &spec,
            &limits,
            &|| ctx.is_cancelled(),
            &mut |stream, line| {
                if stream == Stream::Stderr {
                    ctx.log("stderr", line);
                    stderr_tail.push(line);
                }
            },
        );
        match report.end {
            ProcessEnd::Exited { code: 0 } => {}
            ProcessEnd::Cancelled => {
                return Err(ToolError::Cancelled {
                    message: format!("command tool '{}' cancelled", self.name),
                });
            }
            ProcessEnd::DeadlineExceeded => {
                return Err(fail(
                    "TimeoutError",
                    format!(
                        "command tool '{}' timed out after {:?}",
                        self.name, self.timeout
                    ),
                ));
            }
            ProcessEnd::SpawnFailed(message) => return Err(fail("OSError", message)),
            end => {
                return Err(fail(
                    "CommandFailed",
                    format!(
                        "command tool '{}' {}: {}",
                        self.name,
                        end.describe(),
                        stderr_tail.text().trim()
                    ),
                ));
            }
        }
        if report.stdout_truncated {
            return Err(fail(
                "ValueError",
                format!(
                    "command tool '{}' output exceeds {MAX_TOOL_OUTPUT_BYTES} bytes",
                    self.name
                ),
            ));
        }
        if report.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&report.stdout).map_err(|e| {
            fail(
                "ValueError",
                format!("command tool '{}' printed invalid JSON: {e}", self.name),
            )
        })
    }
}

/// The last characters a failing tool printed on stderr, for its error message.
#[derive(Default)]
struct StderrTail {
    lines: VecDeque<String>,
    chars: usize,
}

impl StderrTail {
    fn push(&mut self, line: &str) {
        self.chars += line.chars().count() + 1;
        self.lines.push_back(line.to_owned());
        while self.chars > STDERR_TAIL_CHARS && self.lines.len() > 1 {
            if let Some(old) = self.lines.pop_front() {
                self.chars -= old.chars().count() + 1;
            }
        }
    }

    fn text(&self) -> String {
        let joined = Vec::from_iter(self.lines.iter().map(String::as_str)).join("\n");
        let skip = joined.chars().count().saturating_sub(STDERR_TAIL_CHARS);
        joined.chars().skip(skip).collect()
    }
}
