//! The agent harness shared by the Claude, Codex, Copilot and pi adapters: lane credentials,
//! sessions and homes, the child environment, then the turn loop (`turns`).

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;
use trellis_graph::{FailureReason, WorkerErrorCode, WorkerOutcome};
use trellis_process::Sandbox;

use crate::access::{base_value, declared_env, is_base_reserved, resolve_access};
use crate::binding::{Binding, SessionScope};
use crate::claude::ClaudeCli;
use crate::codex::CodexCli;
use crate::copilot::CopilotCli;
use crate::copilot_headless::CopilotHeadless;
use crate::forward::LogForwarder;
use crate::harness::{
    BoxFuture, EventSink, ExecutionRequest, ExecutionResult, Harness, LogStream, TokenUsage,
};
use crate::lane::{AgentLane, HarnessKind, find_program};
use crate::pi::PiCli;
use crate::policy::{UserPolicy, probe as probe_policy};
use crate::prompt::{PromptInput, render_prompt};
use crate::protocol::{CliProtocol, Launch, merge_env};
use crate::runner::{ProcessTurns, TurnRunner};
use crate::schema::reply_schema;
use crate::session::{Checkout, SessionKey, SessionRecord, SessionStore};
use crate::turns::{SessionState, TurnLoop};

/// How an agent harness finds its CLI and keeps long-lived sessions.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The CLI executable; by default its name is looked up on the `PATH` the CLI is given.
    pub program: Option<PathBuf>,
    /// Where private homes of `node_instance` sessions live (they must outlive the
    /// execution's scratch directory); default `$TMPDIR/trellis-agent-sessions`.
    pub session_root: Option<PathBuf>,
    /// Runs every turn in this sandbox (`--isolation sandbox`): always with a private home
    /// (a native lane's login copied in), and the CLI's own sandbox and approvals off.
    pub sandbox: Option<Sandbox>,
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
            HarnessKind::Pi => Box::new(PiCli),
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

impl Settled {
    /// An execution that ended before any CLI ran.
    fn before_start(outcome: WorkerOutcome) -> Self {
        Self {
            outcome,
            usage: TokenUsage::default(),
        }
    }
}

async fn execute(
    harness: &AgentHarness,
    request: ExecutionRequest,
    events: EventSink,
    cancel: CancellationToken,
) -> ExecutionResult {
    let mut forwarder = LogForwarder::for_request(events, &request);
    let settled = run(harness, &request, &mut forwarder, &cancel).await;
    // Every line reaches the supervisor before the outcome does.
    forwarder.flush().await;
    ExecutionResult {
        outcome: settled.outcome,
        usage: settled.usage,
        killed_from_outside: forwarder.killed_from_outside,
        worker_lost: false,
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
) -> SessionPlan {
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
        },
    };
    // A contained session never sees the real home: its login is copied into a private one.
    let native_home = base_value(request, "HOME")
        .filter(|_| harness.lane.provider.is_native() && harness.options.sandbox.is_none());
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
    SessionPlan {
        key,
        scope,
        resume,
        home,
        private_home,
    }
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
    let protocol = harness.protocol.as_ref();
    let Binding::Agent(binding) = &request.binding else {
        forwarder.system(format!(
            "{} harness received a {} binding",
            harness.name(),
            request.binding.kind_name()
        ));
        return Settled::before_start(WorkerOutcome::failure(WorkerErrorCode::Crash));
    };
    let access = match resolve_access(harness.lane.provider, binding, request) {
        Ok(access) => access,
        Err(error) => {
            forwarder.system(format!("cannot start {}: {error}", harness.name()));
            let outcome = if error.is_missing_credentials() {
                // The error names variables only, never values; it is what the user must set.
                forwarder.emit(
                    LogStream::Error,
                    &format!("{} cannot start: {error}", harness.lane.harness.as_str()),
                );
                WorkerOutcome::Error {
                    code: WorkerErrorCode::Refusal,
                    reason: FailureReason::AuthenticationRequired,
                }
            } else {
                WorkerOutcome::failure(WorkerErrorCode::Crash)
            };
            return Settled::before_start(outcome);
        }
    };
    let session = plan_session(harness, request, binding.session_scope);
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
        contained: harness.options.sandbox.is_some(),
        policy: if harness.options.sandbox.is_some() {
            UserPolicy::default()
        } else {
            probe_policy(
                protocol.kind(),
                request,
                &session.home,
                !session.private_home,
            )
        },
    };
    if let Some(file) = &launch.policy.claude_permissions {
        forwarder.system(format!(
            "respecting the Claude Code permissions in {} (no permission bypass outside a sandbox)",
            file.display()
        ));
    }
    if !launch.policy.codex_keys.is_empty() {
        forwarder.system(format!(
            "respecting {} from your Codex configuration",
            launch.policy.codex_keys.join(" and ")
        ));
    }
    let prepared = prepare_files(protocol, &launch).and_then(|()| {
        if launch.contained && harness.lane.provider.is_native() && session.resume.is_none() {
            copy_login(protocol.kind(), request, &launch.home)
        } else {
            Ok(())
        }
    });
    let spec_base = prepared.and_then(|()| base_spec(harness, protocol, &launch, forwarder));
    let (program, env_base) = match spec_base {
        Ok(found) => found,
        Err(message) => {
            forwarder.system(message);
            return Settled::before_start(WorkerOutcome::failure(WorkerErrorCode::Crash));
        }
    };

    let first_prompt = render_prompt(&PromptInput {
        node: request.node.as_str(),
        workspace: &request.workspace,
        instructions: request.instructions.as_deref(),
        input: &request.input,
        contract: &request.contract,
    });
    let mut state = SessionState::continuing(
        session.resume.as_ref().map(|r| r.id.clone()),
        session
            .resume
            .as_ref()
            .map(|r| r.reported_total)
            .unwrap_or_default(),
    );
    let sandbox = harness.options.sandbox.as_ref();
    let turns = TurnLoop {
        protocol,
        launch: &launch,
        first_prompt,
    };
    // Copilot keeps one headless connection for the execution; the others run a process per
    // turn.
    let mut runner: Box<dyn TurnRunner + '_> = match harness.lane.harness {
        HarnessKind::Copilot => {
            Box::new(CopilotHeadless::new(&launch, &program, &env_base, sandbox))
        }
        _ => Box::new(ProcessTurns {
            protocol,
            launch: &launch,
            program: &program,
            env: &env_base,
            sandbox,
        }),
    };
    let outcome = turns
        .run(runner.as_mut(), &mut state, forwarder, cancel)
        .await;
    runner.close(forwarder).await;

    // As in the reference: a node-instance session carries over from a successful execution
    // and from a malformed reply (the conversation is intact, only its answer was refused);
    // after any other failure the next execution starts a fresh session.
    if session.scope == SessionScope::NodeInstance {
        let kept = match outcome {
            WorkerOutcome::Error { code, .. } => code == WorkerErrorCode::Malformed,
            _ => true,
        };
        match &state.session_id {
            Some(id) if kept => harness.sessions.keep(
                session.key,
                SessionRecord {
                    id: id.clone(),
                    home: session.private_home.then(|| session.home.clone()),
                    reported_total: state.reported_total,
                },
            ),
            _ => harness.sessions.forget(&session.key),
        }
    }
    Settled {
        outcome,
        usage: state.usage,
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
    forwarder: &mut LogForwarder,
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
    // Names the adapter reads itself are neither passed nor reported as withheld.
    let reserved = |name: &str| {
        !protocol.consumes(name) && (is_base_reserved(name) || protocol.reserved(name, provider))
    };
    let (mut declared, skipped) = declared_env(launch.binding, request, &reserved);
    declared.retain(|(name, _)| !protocol.consumes(name));
    if !skipped.is_empty() {
        forwarder.system(format!(
            "connection variables {} are controlled by the {} harness and were not passed",
            skipped.join(", "),
            harness.name()
        ));
    }
    // The user's own configuration first: a declared connection of the same name wins.
    let config: Vec<(String, String)> = protocol
        .user_config(provider)
        .iter()
        // The user's configuration directories are not inside a sandbox; their login is.
        .filter(|name| !(launch.contained && name.ends_with("_DIR")))
        .filter_map(|name| base_value(request, name).map(|v| ((*name).to_owned(), v.to_owned())))
        .collect();
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
        merge_env([config, declared, base]),
    ))
}

/// Copies a native lane's login state from the user's real home (or configuration directory)
/// into the private home of a contained session: the files the CLI signs in with, never the
/// rest of the home. The real files are never written.
fn copy_login(kind: HarnessKind, request: &ExecutionRequest, home: &Path) -> Result<(), String> {
    let real_home = base_value(request, "HOME").map(PathBuf::from);
    let files: Vec<(PathBuf, PathBuf)> = match kind {
        HarnessKind::Claude => {
            let config = base_value(request, "CLAUDE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| real_home.as_ref().map(|h| h.join(".claude")));
            let mut files = Vec::new();
            if let Some(config) = config {
                files.push((
                    config.join(".credentials.json"),
                    home.join(".claude/.credentials.json"),
                ));
            }
            if let Some(real) = &real_home {
                files.push((real.join(".claude.json"), home.join(".claude.json")));
            }
            files
        }
        HarnessKind::Codex => {
            let codex_home = base_value(request, "CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| real_home.as_ref().map(|h| h.join(".codex")));
            codex_home
                .map(|dir| {
                    ["auth.json", "config.toml"]
                        .map(|name| (dir.join(name), home.join(".codex").join(name)))
                        .to_vec()
                })
                .unwrap_or_default()
        }
        HarnessKind::Copilot => real_home
            .map(|real| {
                vec![(
                    real.join(".copilot/config.json"),
                    home.join(".copilot/config.json"),
                )]
            })
            .unwrap_or_default(),
        // pi's login (an OAuth sign-in) lives in its agent directory.
        HarnessKind::Pi => {
            let agent_dir = base_value(request, "PI_CODING_AGENT_DIR")
                .map(PathBuf::from)
                .or_else(|| real_home.as_ref().map(|h| h.join(".pi/agent")));
            agent_dir
                .map(|dir| vec![(dir.join("auth.json"), home.join(".pi/agent/auth.json"))])
                .unwrap_or_default()
        }
    };
    for (from, to) in files.into_iter().filter(|(from, _)| from.is_file()) {
        let copied = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::copy(&from, &to).map(|_| ()));
        copied.map_err(|e| {
            format!(
                "cannot copy the login in {} into the sandbox: {e}",
                from.display()
            )
        })?;
    }
    Ok(())
}
