//! The exec harness: runs a command with `{"run","node","attempt","input"}` on stdin and reads
//! one JSON reply from stdout. Exit 75 is a refusal, any other non-zero exit a crash. Under
//! `--isolation sandbox` each command runs in a sandbox with a private home.

use std::path::Path;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_graph::{WorkerErrorCode, WorkerOutcome};
use trellis_process::{ProcessEnd, ProcessLimits, ProcessSpec, Sandbox, run_process};

use crate::binding::{Binding, CommandBinding};
use crate::containment::contain;
use crate::forward::LogForwarder;
pub use crate::forward::human_duration;
use crate::harness::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, TokenUsage,
};

/// A contained command's `HOME`: an empty directory in the sandbox's private `/tmp`, gone
/// with the step.
const SANDBOX_HOME: &str = "/tmp/home";

/// Exit code a command uses to refuse the work (BSD `EX_TEMPFAIL`).
pub const REFUSAL_EXIT_CODE: i32 = 75;

/// Runs `command` bindings, each in a sandbox of its own when given one.
#[derive(Debug, Default)]
pub struct ExecHarness {
    sandbox: Option<Sandbox>,
}

impl ExecHarness {
    /// Commands run as the invoking user (`--isolation none`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Commands run in `sandbox` (when given), each with an empty private home.
    pub fn contained(sandbox: Option<Sandbox>) -> Self {
        Self { sandbox }
    }
}

impl Harness for ExecHarness {
    fn name(&self) -> &str {
        "exec"
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(run_command(self.sandbox.as_ref(), request, events, cancel))
    }
}

/// The environment a command sees: `PATH`, `HOME`, the run identity, its literal `env` and the
/// connection variables it names; nothing else.
fn command_env(request: &ExecutionRequest, binding: &CommandBinding) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = request
        .base_env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "HOME")
        .cloned()
        .collect();
    env.push(("TRELLIS_RUN_ID".into(), request.run_id.clone()));
    env.push(("TRELLIS_NODE".into(), request.node.to_string()));
    env.extend(binding.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    for name in &binding.connections {
        if let Some(value) = request.environment.get(name) {
            env.push((name.clone(), value.to_owned()));
        }
    }
    env
}

async fn run_command(
    sandbox: Option<&Sandbox>,
    request: ExecutionRequest,
    events: EventSink,
    cancel: CancellationToken,
) -> ExecutionResult {
    let mut forwarder = LogForwarder::for_request(events, &request);
    let outcome = command_outcome(sandbox, &request, &mut forwarder, &cancel).await;
    // Every line reaches the supervisor before the outcome does.
    forwarder.flush().await;
    ExecutionResult {
        outcome,
        usage: TokenUsage::default(),
        killed_from_outside: forwarder.killed_from_outside,
        worker_lost: false,
    }
}

async fn command_outcome(
    sandbox: Option<&Sandbox>,
    request: &ExecutionRequest,
    forwarder: &mut LogForwarder,
    cancel: &CancellationToken,
) -> WorkerOutcome {
    let failure = WorkerOutcome::failure;
    let Binding::Command(binding) = &request.binding else {
        forwarder.system("exec harness received a non-command binding".into());
        return failure(WorkerErrorCode::Crash);
    };
    let Some((program, args)) = binding.command.split_first() else {
        forwarder.system("command binding has an empty command".into());
        return failure(WorkerErrorCode::Crash);
    };
    let cwd = match binding.working_directory(&request.workspace) {
        Ok(cwd) => cwd,
        Err(message) => {
            forwarder.system(message);
            return failure(WorkerErrorCode::Crash);
        }
    };
    let stdin = json!({
        "run": request.run_id,
        "node": request.node,
        "attempt": request.attempt,
        "input": request.input,
    });
    let spec = ProcessSpec {
        program: program.clone(),
        args: args.to_vec(),
        cwd,
        env: command_env(request, binding),
        stdin: format!("{stdin}\n").into_bytes(),
        redactor: forwarder.redactor.clone(),
    };
    let spec = match sandbox {
        None => spec,
        Some(sandbox) => {
            let mut spec = spec;
            spec.env.retain(|(name, _)| name != "HOME");
            spec.env.push(("HOME".into(), SANDBOX_HOME.into()));
            match contain(sandbox, spec, request, &[], &[Path::new(SANDBOX_HOME)]) {
                Ok(spec) => spec,
                Err(message) => {
                    forwarder.system(message);
                    return failure(WorkerErrorCode::Crash);
                }
            }
        }
    };
    let limits = ProcessLimits {
        deadline: request.deadline,
        idle: request.idle_timeout,
        ..ProcessLimits::default()
    };
    let report = run_process(&spec, &limits, cancel, forwarder).await;
    let code = match report.end {
        ProcessEnd::Exited { code: 0 } if report.stdout_truncated => {
            forwarder.system(format!(
                "reply exceeds {} bytes; settled malformed",
                limits.max_stdout_bytes
            ));
            WorkerErrorCode::Malformed
        }
        ProcessEnd::Exited { code: 0 } => {
            return match parse_reply(request, &report.stdout) {
                Ok(outcome) => outcome,
                Err(reason) => {
                    forwarder.system(format!("reply rejected: {reason}; settled malformed"));
                    failure(WorkerErrorCode::Malformed)
                }
            };
        }
        ProcessEnd::Exited {
            code: REFUSAL_EXIT_CODE,
        } => WorkerErrorCode::Refusal,
        ProcessEnd::KilledFromOutside { signal } => {
            forwarder.killed_from_outside = Some(signal);
            forwarder.system(format!(
                "command {program} {}; settled crash, and a resumed run runs it again",
                report.end.describe()
            ));
            WorkerErrorCode::Crash
        }
        ProcessEnd::Exited { .. } | ProcessEnd::Crashed { .. } => {
            forwarder.system(format!(
                "command {program} {}; settled crash",
                report.end.describe()
            ));
            WorkerErrorCode::Crash
        }
        ProcessEnd::DeadlineExceeded => {
            forwarder.system("deadline (timeoutMs) passed; command stopped".into());
            WorkerErrorCode::Timeout
        }
        ProcessEnd::IdleExceeded => {
            forwarder.system("idle limit (idleTimeoutMs) passed; command stopped".into());
            WorkerErrorCode::Timeout
        }
        ProcessEnd::Cancelled => WorkerErrorCode::Refusal,
        ProcessEnd::SpawnFailed(message) => {
            forwarder.system(message);
            WorkerErrorCode::Crash
        }
    };
    failure(code)
}

fn parse_reply(request: &ExecutionRequest, stdout: &[u8]) -> Result<WorkerOutcome, String> {
    let text = std::str::from_utf8(stdout).map_err(|_| "reply is not UTF-8".to_owned())?;
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("stdout is not one JSON object ({e})"))?;
    request.contract.accept_command_reply(&value)
}
