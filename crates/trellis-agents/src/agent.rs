//! The agent harness: one turn loop shared by the Claude, Codex and Copilot adapters — sessions,
//! the lane's environment, reply checking with up to two corrections, one retry after a
//! provider failure, usage accounting and the mapping of every ending to an outcome.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};

use crate::access::{base_value, declared_env, is_base_reserved, resolve_access};
use crate::binding::{Binding, SessionScope};
use crate::claude::ClaudeCli;
use crate::codex::CodexCli;
use crate::copilot::CopilotCli;
use crate::forward::LogForwarder;
use crate::harness::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, HarnessEvent, LogStream,
    TokenUsage,
};
use crate::lane::{AgentLane, HarnessKind, find_program};
use crate::process::{ProcessEnd, ProcessLimits, ProcessSpec, run_process};
use crate::prompt::{CONTINUE_PROMPT, PromptInput, render_correction, render_prompt};
use crate::protocol::{CliProtocol, Launch, Turn, TurnObserver, merge_env, usage_increment};
use crate::reply::{ReplyVerdict, judge_reply};
use crate::schema::reply_schema;
use crate::session::{Checkout, SessionKey, SessionRecord, SessionStore};

/// Most correction turns after a rejected reply; the next rejection settles `malformed`.
pub const MAX_CORRECTIONS: u32 = 2;

/// How an agent harness finds its CLI and keeps long-lived sessions.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The CLI executable; by default its name is looked up on the `PATH` the CLI is given.
    pub program: Option<PathBuf>,
    /// Where private homes of `node_instance` sessions live (they must outlive the
    /// execution's scratch directory); default `$TMPDIR/trellis-agent-sessions`.
    pub session_root: Option<PathBuf>,
}

/// Runs `agent` bindings through one CLI on one provider lane.
pub struct AgentHarness {
    lane: AgentLane,
    protocol: Box<dyn CliProtocol>,
    options: AgentOptions,
    sessions: SessionStore,
}

/// The harness for a plan's agent lane.
pub fn agent_harness(lane: AgentLane, options: AgentOptions) -> Box<dyn Harness> {
    Box::new(AgentHarness::new(lane, options))
}

impl AgentHarness {
    pub fn new(lane: AgentLane, options: AgentOptions) -> Self {
        let protocol: Box<dyn CliProtocol> = match lane.harness {
            HarnessKind::Claude => Box::new(ClaudeCli),
            HarnessKind::Codex => Box::new(CodexCli),
            HarnessKind::Copilot => Box::new(CopilotCli),
        };
        Self {
            lane,
            protocol,
            options,
            sessions: SessionStore::default(),
        }
    }

    pub fn lane(&self) -> AgentLane {
        self.lane
    }

    fn session_root(&self) -> PathBuf {
        self.options
            .session_root
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("trellis-agent-sessions"))
    }
}

impl Harness for AgentHarness {
    fn name(&self) -> &str {
        self.lane.harness.as_str()
    }

    fn execute<'a>(
        &'a self,
        request: ExecutionRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ExecutionResult> {
        Box::pin(execute(self, request, events, cancel))
    }

    fn close_run(&self, run_id: &str) {
        for home in self.sessions.close_run(run_id) {
            // Best effort: a leftover transcript directory is harmless.
            let _ = std::fs::remove_dir_all(home);
        }
    }
}

/// An outcome plus the usage spent reaching it.
struct Settled {
    outcome: WorkerOutcome,
    usage: TokenUsage,
}

fn failure(code: WorkerErrorCode) -> WorkerOutcome {
    WorkerOutcome::failure(code)
}

async fn execute(
    harness: &AgentHarness,
    request: ExecutionRequest,
    events: EventSink,
    cancel: CancellationToken,
) -> ExecutionResult {
    let mut forwarder = LogForwarder::new(
        events,
        request.environment.redactor(),
        request.node.to_string(),
    );
    let settled = run(harness, &request, &mut forwarder, &cancel).await;
    ExecutionResult {
        outcome: settled.outcome,
        usage: settled.usage,
    }
}

/// Where the session of this execution lives and what it continues.
struct SessionPlan {
    key: SessionKey,
    scope: SessionScope,
    resume: Option<SessionRecord>,
    home: PathBuf,
    private_home: bool,
}

fn plan_session(
    harness: &AgentHarness,
    request: &ExecutionRequest,
    scope: SessionScope,
) -> Result<SessionPlan, String> {
    let key = SessionKey {
        run_id: request.run_id.clone(),
        node: request.node.to_string(),
        node_instance: request.node_instance,
    };
    let resume = match scope {
        SessionScope::Execution => None,
        SessionScope::NodeInstance => match harness.sessions.checkout(&key) {
            Checkout::Fresh => None,
            Checkout::Resume(record) => Some(record),
            Checkout::Lost => {
                return Err(format!(
                    "the session of node instance {} was lost when an earlier execution failed; \
                     it is not silently replaced",
                    request.node_instance
                ));
            }
        },
    };
    let native_home = base_value(request, "HOME").filter(|_| harness.lane.provider.is_native());
    let (home, private_home) = match (&resume, native_home) {
        (
            Some(SessionRecord {
                home: Some(home), ..
            }),
            _,
        ) => (home.clone(), true),
        (_, Some(real)) => (PathBuf::from(real), false),
        (None, None) if scope == SessionScope::NodeInstance => {
            let dir = format!(
                "{}.{}",
                sanitize(request.node.as_str()),
                request.node_instance
            );
            let home = harness
                .session_root()
                .join(sanitize(&request.run_id))
                .join(dir)
                .join("home");
            // A fresh session never inherits a stale transcript.
            let _ = std::fs::remove_dir_all(&home);
            (home, true)
        }
        _ => (request.scratch.join("home"), true),
    };
    Ok(SessionPlan {
        key,
        scope,
        resume,
        home,
        private_home,
    })
}

/// Keeps a path segment to `[A-Za-z0-9._-]`.
fn sanitize(segment: &str) -> String {
    segment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

async fn run(
    harness: &AgentHarness,
    request: &ExecutionRequest,
    forwarder: &mut LogForwarder,
    cancel: &CancellationToken,
) -> Settled {
    let mut usage = TokenUsage::default();
    let protocol = harness.protocol.as_ref();
    let Binding::Agent(binding) = &request.binding else {
        forwarder.system(format!(
            "{} harness received a {} binding",
            harness.name(),
            request.binding.kind_name()
        ));
        return Settled {
            outcome: failure(WorkerErrorCode::Crash),
            usage,
        };
    };
    let access = match resolve_access(harness.lane.provider, binding, request) {
        Ok(access) => access,
        Err(error) => {
            forwarder.system(format!("cannot start {}: {error}", harness.name()));
            let outcome = if error.is_missing_credentials() {
                WorkerOutcome::Error {
                    code: WorkerErrorCode::Refusal,
                    reason: FailureReason::AuthenticationRequired,
                }
            } else {
                failure(WorkerErrorCode::Crash)
            };
            return Settled { outcome, usage };
        }
    };
    let session = match plan_session(harness, request, binding.session_scope) {
        Ok(plan) => plan,
        Err(message) => {
            forwarder.system(message);
            return Settled {
                outcome: failure(WorkerErrorCode::Crash),
                usage,
            };
        }
    };
    let schema = reply_schema(&request.contract, protocol.dialect());
    let launch = Launch {
        request,
        binding,
        provider: harness.lane.provider,
        access: &access,
        home: session.home.clone(),
        private_home: session.private_home,
        schema: &schema,
        schema_file: request.scratch.join("reply-schema.json"),
    };
    let prepared = prepare_files(protocol, &launch);
    let spec_base = prepared.and_then(|()| base_spec(harness, protocol, &launch, forwarder));
    let (program, env_base) = match spec_base {
        Ok(found) => found,
        Err(message) => {
            forwarder.system(message);
            return Settled {
                outcome: failure(WorkerErrorCode::Crash),
                usage,
            };
        }
    };

    let first_prompt = render_prompt(&PromptInput {
        node: request.node.as_str(),
        workspace: &request.workspace,
        instructions: request.instructions.as_deref(),
        input: &request.input,
        contract: &request.contract,
    });
    let mut session_id = session.resume.as_ref().map(|r| r.id.clone());
    let mut reported_total = session
        .resume
        .as_ref()
        .map(|r| r.reported_total)
        .unwrap_or_default();
    let mut prompt = first_prompt.clone();
    let mut corrections = 0;
    let mut retried_provider_failure = false;
    let started = Instant::now();
    let mut index = 0;
    let outcome = loop {
        let remaining = request
            .deadline
            .map(|deadline| deadline.saturating_sub(started.elapsed()));
        if remaining == Some(Duration::ZERO) {
            forwarder.system("deadline (timeoutMs) passed; agent stopped".into());
            break failure(WorkerErrorCode::Timeout);
        }
        let turn = Turn {
            index,
            prompt: &prompt,
            resume: session_id.as_deref(),
        };
        index += 1;
        let invocation = match protocol.invocation(&launch, &turn) {
            Ok(invocation) => invocation,
            Err(message) => {
                forwarder.system(message);
                break failure(WorkerErrorCode::Crash);
            }
        };
        let spec = ProcessSpec {
            program: program.clone(),
            args: invocation.args,
            cwd: request.workspace.clone(),
            env: merge_env([env_base.clone(), Vec::new(), invocation.env]),
            stdin: turn.prompt.as_bytes().to_vec(),
        };
        let limits = ProcessLimits {
            deadline: remaining,
            idle: request.idle_timeout,
            ..ProcessLimits::default()
        };
        let report = {
            let mut observer = TurnObserver {
                forwarder: &mut *forwarder,
                protocol,
            };
            run_process(&spec, &limits, cancel, &mut observer).await
        };
        let (code, signal) = match report.end {
            ProcessEnd::Exited { code, signal } => (code, signal),
            ProcessEnd::DeadlineExceeded => {
                forwarder.system("deadline (timeoutMs) passed; agent stopped".into());
                break failure(WorkerErrorCode::Timeout);
            }
            ProcessEnd::IdleExceeded => {
                forwarder.system("idle limit (idleTimeoutMs) passed; agent stopped".into());
                break failure(WorkerErrorCode::Timeout);
            }
            ProcessEnd::Cancelled => {
                forwarder.system("execution cancelled; agent stopped".into());
                break failure(WorkerErrorCode::Refusal);
            }
            ProcessEnd::SpawnFailed(message) => {
                forwarder.system(message);
                break failure(WorkerErrorCode::Crash);
            }
        };
        if report.stdout_truncated {
            forwarder.system(format!(
                "{} printed more than {} bytes; agent output abandoned",
                harness.name(),
                limits.max_stdout_bytes
            ));
            break failure(WorkerErrorCode::Crash);
        }
        let transcript = protocol.transcript(&launch, &turn, &report.stdout);
        if let Some(seen) = &transcript.session_id {
            match &session_id {
                Some(known) if known != seen => {
                    forwarder.system(format!(
                        "{} answered in session {seen} instead of {known}; the session is lost",
                        harness.name()
                    ));
                    break failure(WorkerErrorCode::Crash);
                }
                _ => session_id = Some(seen.clone()),
            }
        }
        if let Some(other) = &transcript.conflicting_session {
            forwarder.system(format!(
                "{} switched to session {other} mid-turn; the session is lost",
                harness.name()
            ));
            break failure(WorkerErrorCode::Crash);
        }
        if let Some(reported) = transcript.usage {
            let increment = if protocol.usage_is_cumulative() {
                let increment = usage_increment(&reported, &reported_total);
                reported_total = reported;
                increment
            } else {
                reported
            };
            usage.add(&increment);
            forwarder.event(HarnessEvent::Usage(increment));
        }
        if let Some(error) = &transcript.provider_error {
            forwarder.emit(
                LogStream::Error,
                &format!("{} provider failure: {error}", protocol.label()),
            );
            if retried_provider_failure {
                forwarder.system("second provider failure; settled crash".into());
                break failure(WorkerErrorCode::Crash);
            }
            retried_provider_failure = true;
            forwarder.system("retrying once after the provider failure".into());
            prompt = if session_id.is_some() {
                CONTINUE_PROMPT.to_owned()
            } else {
                first_prompt.clone()
            };
            continue;
        }
        if let Some(ending) = abnormal_ending(code, signal, transcript.events) {
            forwarder.system(format!("{} {ending}; settled crash", harness.name()));
            break failure(WorkerErrorCode::Crash);
        }
        let Some(reply) = transcript.reply else {
            forwarder.system(format!(
                "{} finished without a final reply; settled crash",
                harness.name()
            ));
            break failure(WorkerErrorCode::Crash);
        };
        match judge_reply(&request.contract, protocol.dialect(), reply) {
            ReplyVerdict::Accepted(outcome) => break outcome,
            ReplyVerdict::Refused(reason) => {
                forwarder.system(format!("the agent refused the task: {reason}"));
                break failure(WorkerErrorCode::Refusal);
            }
            ReplyVerdict::Rejected(reason) if corrections >= MAX_CORRECTIONS => {
                forwarder.system(format!(
                    "reply rejected after {MAX_CORRECTIONS} corrections: {reason}; settled malformed"
                ));
                break WorkerOutcome::Error {
                    code: WorkerErrorCode::Malformed,
                    reason: FailureReason::MalformedResult,
                };
            }
            ReplyVerdict::Rejected(reason) if session_id.is_none() => {
                forwarder.system(format!(
                    "reply rejected ({reason}) but {} reported no session to correct it in; \
                     settled crash",
                    harness.name()
                ));
                break failure(WorkerErrorCode::Crash);
            }
            ReplyVerdict::Rejected(reason) => {
                corrections += 1;
                forwarder.system(format!(
                    "reply rejected: {reason}; asking for correction {corrections} of {MAX_CORRECTIONS}"
                ));
                prompt = render_correction(&request.contract, &reason);
            }
        }
    };

    if session.scope == SessionScope::NodeInstance {
        match (&outcome, &session_id) {
            (WorkerOutcome::Error { .. }, Some(_)) => harness.sessions.invalidate(session.key),
            (WorkerOutcome::Error { .. }, None) => {}
            (_, Some(id)) => harness.sessions.keep(
                session.key,
                SessionRecord {
                    id: id.clone(),
                    home: session.private_home.then(|| session.home.clone()),
                    reported_total,
                },
            ),
            (_, None) => {}
        }
    }
    Settled { outcome, usage }
}

/// Describes an exit that cannot carry a usable reply, or `None` for a clean exit.
fn abnormal_ending(code: Option<i32>, signal: Option<i32>, events: usize) -> Option<String> {
    match (code, signal) {
        (Some(0), _) => None,
        (_, Some(signal)) => Some(format!("was killed by signal {signal}")),
        (Some(code), None) if events == 0 => Some(format!(
            "exited with code {code} before printing any event (startup failure)"
        )),
        (Some(code), None) => Some(format!("exited with code {code}")),
        (None, None) => Some("ended without an exit status".to_owned()),
    }
}

/// Creates the home, its temporary directory and the schema file.
fn prepare_files(protocol: &dyn CliProtocol, launch: &Launch<'_>) -> Result<(), String> {
    let io = |what: &str, path: &Path, error: std::io::Error| {
        format!("cannot prepare {what} {}: {error}", path.display())
    };
    let scratch = &launch.request.scratch;
    std::fs::create_dir_all(scratch).map_err(|e| io("scratch directory", scratch, e))?;
    let tmp = tmp_dir(launch);
    std::fs::create_dir_all(&tmp).map_err(|e| io("temporary directory", &tmp, e))?;
    if launch.private_home {
        protocol
            .prepare_home(&launch.home)
            .map_err(|e| io("home", &launch.home, e))?;
    }
    if protocol.needs_schema_file() {
        let schema = launch.schema.to_string();
        std::fs::write(&launch.schema_file, schema)
            .map_err(|e| io("schema file", &launch.schema_file, e))?;
    }
    Ok(())
}

/// `TMPDIR` for the CLI: inside a private home, else in the execution's scratch directory.
fn tmp_dir(launch: &Launch<'_>) -> PathBuf {
    if launch.private_home {
        launch.home.join("tmp")
    } else {
        launch.request.scratch.join("tmp")
    }
}

/// The program path and the environment shared by every turn: declared connections (minus
/// reserved names) under `PATH`, `HOME`, `LANG` and `TMPDIR`.
fn base_spec(
    harness: &AgentHarness,
    protocol: &dyn CliProtocol,
    launch: &Launch<'_>,
    forwarder: &LogForwarder,
) -> Result<(String, Vec<(String, String)>), String> {
    let request = launch.request;
    let path = base_value(request, "PATH")
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .to_owned();
    let program = match &harness.options.program {
        Some(program) => program.clone(),
        None => find_program(protocol.kind().program_name(), path.as_ref()).ok_or_else(|| {
            format!(
                "{} is not installed: no executable named {} on PATH",
                harness.name(),
                protocol.kind().program_name()
            )
        })?,
    };
    let provider = launch.provider;
    let reserved = |name: &str| is_base_reserved(name) || protocol.reserved(name, provider);
    let (declared, skipped) = declared_env(launch.binding, request, &reserved);
    if !skipped.is_empty() {
        forwarder.system(format!(
            "connection variables {} are controlled by the {} harness and were not passed",
            skipped.join(", "),
            harness.name()
        ));
    }
    let base = vec![
        ("PATH".to_owned(), path),
        ("HOME".to_owned(), launch.home.display().to_string()),
        (
            "LANG".to_owned(),
            base_value(request, "LANG").unwrap_or("C.UTF-8").to_owned(),
        ),
        ("TMPDIR".to_owned(), tmp_dir(launch).display().to_string()),
    ];
    Ok((
        program.display().to_string(),
        merge_env([declared, base, Vec::new()]),
    ))
}
