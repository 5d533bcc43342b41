//! Runs Copilot's turns over one headless JSON-RPC connection kept for the whole execution:
//! the first turn starts the CLI, connects and opens (or resumes) the session; every turn is
//! one `session.send` read until `session.idle`.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trellis_process::{BoxFuture, ProcessEnd, ProcessObserver, ProcessSpec, Sandbox};

use crate::containment::contain;

use crate::access::LaneAccess;
use crate::copilot::{CopilotCli, CopilotTurn};
use crate::copilot_provider::declared_provider;
use crate::copilot_registry::{PROVIDERS_CONFIG_ENV, read_registry, run_token_command};
use crate::forward::LogForwarder;
use crate::harness::LogStream;
use crate::jsonrpc::{Incoming, RpcConnection};
use crate::protocol::{CliProtocol, Launch, Transcript, Turn, TurnParser, merge_env, text};
use crate::runner::{TurnEnd, TurnRunner};

/// The protocol version the pinned CLI speaks (`connect` answers it).
const PROTOCOL_VERSION: u64 = 3;
/// How long the CLI may take to answer `connect` and open the session.
const SETUP_LIMIT: Duration = Duration::from_secs(120);
/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// Copilot's turns for one execution.
pub(crate) struct CopilotHeadless<'a> {
    pub launch: &'a Launch<'a>,
    pub program: &'a str,
    pub env: &'a [(String, String)],
    /// The CLI runs in it, when given (`--isolation sandbox`).
    pub sandbox: Option<&'a Sandbox>,
    connection: Option<RpcConnection>,
    session_id: Option<String>,
    /// Registry provider name → its `apiKeyCommand`, run per `providerToken.getToken`.
    token_commands: Vec<(String, String)>,
}

impl<'a> CopilotHeadless<'a> {
    pub fn new(
        launch: &'a Launch<'a>,
        program: &'a str,
        env: &'a [(String, String)],
        sandbox: Option<&'a Sandbox>,
    ) -> Self {
        Self {
            launch,
            program,
            env,
            sandbox,
            connection: None,
            session_id: None,
            token_commands: Vec::new(),
        }
    }
}

/// Why waiting for the CLI stopped.
enum Wait {
    /// The awaited answer or event arrived.
    Done(Value),
    /// Trellis stopped the CLI (deadline, idle limit, cancellation).
    Stopped(ProcessEnd),
    /// The CLI closed the connection or answered with an error; why.
    Failed(String),
}

impl TurnRunner for CopilotHeadless<'_> {
    fn run<'b>(
        &'b mut self,
        turn: &'b Turn<'b>,
        remaining: Option<Duration>,
        forwarder: &'b mut LogForwarder,
        cancel: &'b CancellationToken,
    ) -> BoxFuture<'b, Result<TurnEnd, String>> {
        Box::pin(self.turn(turn, remaining, forwarder, cancel))
    }

    fn close<'b>(&'b mut self, _forwarder: &'b mut LogForwarder) -> BoxFuture<'b, ()> {
        Box::pin(async move {
            if let Some(mut connection) = self.connection.take() {
                if let Some(session) = &self.session_id {
                    // The session stays on disk for a later `session.resume`.
                    connection.request("session.detach", json!({"sessionId": session}));
                }
                connection.shut_down().await;
            }
        })
    }
}

impl CopilotHeadless<'_> {
    async fn turn(
        &mut self,
        turn: &Turn<'_>,
        remaining: Option<Duration>,
        forwarder: &mut LogForwarder,
        cancel: &CancellationToken,
    ) -> Result<TurnEnd, String> {
        let deadline = remaining.map(|left| Instant::now() + left);
        if self.connection.is_none() {
            match self.open(turn, deadline, forwarder, cancel).await? {
                Ok(()) => {}
                Err(end) => return Ok(end),
            }
        }
        let Some(session) = self.session_id.clone() else {
            return Err("copilot opened no session".to_owned());
        };
        let mut params = json!({"sessionId": session, "prompt": turn.prompt,
            "responseFormat": {"type": "json_schema", "jsonSchema":
                {"name": "trellis_response", "strict": true, "schema": self.launch.schema}}});
        if let Some(effort) = self.launch.binding.effort {
            params["reasoningEffort"] = json!(effort.as_str());
        }
        let mut parser = CopilotTurn::default();
        let sent = self.call(
            "session.send",
            params,
            deadline,
            forwarder,
            cancel,
            &mut parser,
        );
        let message_id = match sent.await {
            Wait::Done(result) => text(&result, "messageId").to_owned(),
            Wait::Stopped(end) => return Ok(self.stopped(end).await),
            Wait::Failed(why) => return Ok(self.lost(parser, why, forwarder).await),
        };
        let _ = message_id;
        loop {
            if parser.finished {
                let mut transcript = Box::new(parser).finish();
                transcript.session_id = Some(session);
                return Ok(TurnEnd::Ran {
                    transcript: Box::new(transcript),
                    end: ProcessEnd::Exited { code: 0 },
                });
            }
            match self
                .wait(None, deadline, forwarder, cancel, &mut parser)
                .await
            {
                Wait::Done(_) => {}
                Wait::Stopped(end) => return Ok(self.stopped(end).await),
                Wait::Failed(why) => return Ok(self.lost(parser, why, forwarder).await),
            }
        }
    }

    /// Starts the CLI, connects and opens the session. The inner `Err` is a turn that ended
    /// before the session opened.
    async fn open(
        &mut self,
        turn: &Turn<'_>,
        deadline: Option<Instant>,
        forwarder: &mut LogForwarder,
        cancel: &CancellationToken,
    ) -> Result<Result<(), TurnEnd>, String> {
        let invocation = CopilotCli.invocation(self.launch, turn)?;
        let spec = ProcessSpec {
            program: self.program.to_owned(),
            args: invocation.args,
            cwd: self.launch.request.workspace.clone(),
            env: merge_env([self.env.to_vec(), Vec::new(), invocation.env]),
            stdin: Vec::new(),
            redactor: forwarder.redactor.clone(),
        };
        let spec = match self.sandbox {
            None => spec,
            Some(sandbox) => {
                let request = self.launch.request;
                let bound: [&std::path::Path; 2] = [&request.scratch, &self.launch.home];
                contain(sandbox, spec, request, &bound, &[])?
            }
        };
        let connection = match RpcConnection::start(&spec) {
            Ok(connection) => connection,
            Err(why) => return Ok(Err(TurnEnd::Stopped(ProcessEnd::SpawnFailed(why)))),
        };
        forwarder.started(connection.pgid());
        self.connection = Some(connection);
        let setup = Some(Instant::now() + SETUP_LIMIT);
        let setup = match (setup, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut parser = CopilotTurn::default();
        let connect = json!({"clientInfo": {"extensionName": "trellis"}});
        let version = match self
            .call("connect", connect, setup, forwarder, cancel, &mut parser)
            .await
        {
            Wait::Done(result) => result.get("protocolVersion").and_then(Value::as_u64),
            Wait::Stopped(end) => return Ok(Err(self.stopped(end).await)),
            Wait::Failed(why) => return Ok(Err(self.lost(parser, why, forwarder).await)),
        };
        if version != Some(PROTOCOL_VERSION) {
            self.stopped(ProcessEnd::Cancelled).await;
            return Err(format!(
                "copilot speaks protocol version {} where Trellis speaks {PROTOCOL_VERSION}; \
                 install the pinned CLI (scripts/install-agent-clis.sh)",
                version.map_or("(none)".to_owned(), |v| v.to_string())
            ));
        }
        let (method, params) = self.session_params(turn)?;
        match self
            .call(method, params, setup, forwarder, cancel, &mut parser)
            .await
        {
            Wait::Done(result) => {
                let id = text(&result, "sessionId");
                let id = if id.is_empty() {
                    turn.resume.unwrap_or_default()
                } else {
                    id
                };
                if id.is_empty() {
                    return Err(format!("copilot answered {method} without a session id"));
                }
                self.session_id = Some(id.to_owned());
                Ok(Ok(()))
            }
            Wait::Stopped(end) => Ok(Err(self.stopped(end).await)),
            Wait::Failed(why) if turn.resume.is_some() => {
                self.stopped(ProcessEnd::Cancelled).await;
                let transcript = Transcript {
                    session_lost: Some(why),
                    ..Transcript::default()
                };
                Ok(Err(TurnEnd::Ran {
                    transcript: Box::new(transcript),
                    end: ProcessEnd::Exited { code: 0 },
                }))
            }
            Wait::Failed(why) => Ok(Err(self.lost(parser, why, forwarder).await)),
        }
    }

    /// `session.create` for a new session, `session.resume` to continue one.
    fn session_params(&mut self, turn: &Turn<'_>) -> Result<(&'static str, Value), String> {
        let launch = self.launch;
        let mut params = Map::new();
        params.insert(
            "workingDirectory".into(),
            json!(launch.request.workspace.display().to_string()),
        );
        params.insert("clientName".into(), json!("trellis"));
        params.insert("requestPermission".into(), json!(true));
        params.insert("requestUserInput".into(), json!(false));
        params.insert("mcpServers".into(), json!({}));
        params.insert("excludedTools".into(), json!(["ask_user"]));
        params.insert("enableConfigDiscovery".into(), json!(false));
        params.insert("streaming".into(), json!(false));
        if let Some(model) = launch.model() {
            params.insert("model".into(), json!(model));
        }
        if let Some(effort) = launch.binding.effort {
            params.insert("reasoningEffort".into(), json!(effort.as_str()));
        }
        if let LaneAccess::Gateway { base_url, key, .. } = launch.access {
            if launch.model().is_none() {
                return Err("the copilot gateway lane needs a non-empty model id".to_owned());
            }
            params.insert(
                "provider".into(),
                json!({"type": "openai", "wireApi": "responses", "baseUrl": base_url,
                       "apiKey": key}),
            );
        } else if let Some(provider) = declared_provider(launch)? {
            if read_registry(launch)?.is_some() {
                return Err(format!(
                    "declare either COPILOT_PROVIDER_* fields or {PROVIDERS_CONFIG_ENV}, not both"
                ));
            }
            params.insert("provider".into(), provider);
        } else if let Some(registry) = read_registry(launch)? {
            params.insert("providers".into(), registry.providers);
            params.insert("models".into(), registry.models);
            self.token_commands = registry.token_commands;
        }
        Ok(match turn.resume {
            Some(session) => {
                params.insert("sessionId".into(), json!(session));
                ("session.resume", Value::Object(params))
            }
            None => ("session.create", Value::Object(params)),
        })
    }

    /// Sends a request and waits for its answer, serving the CLI meanwhile.
    async fn call(
        &mut self,
        method: &str,
        params: Value,
        deadline: Option<Instant>,
        forwarder: &mut LogForwarder,
        cancel: &CancellationToken,
        parser: &mut CopilotTurn,
    ) -> Wait {
        let Some(connection) = self.connection.as_mut() else {
            return Wait::Failed("the connection is gone".to_owned());
        };
        let id = connection.request(method, params);
        match self
            .wait(Some((id, method)), deadline, forwarder, cancel, parser)
            .await
        {
            Wait::Done(answer) => match answer.get("error") {
                Some(error) => Wait::Failed(format!(
                    "{method} failed: {}",
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                )),
                None => Wait::Done(answer.get("result").cloned().unwrap_or(Value::Null)),
            },
            other => other,
        }
    }

    /// Handles what the CLI sends until the answer to `awaited` arrives (or, without one,
    /// until one session event was read).
    async fn wait(
        &mut self,
        awaited: Option<(u64, &str)>,
        deadline: Option<Instant>,
        forwarder: &mut LogForwarder,
        cancel: &CancellationToken,
        parser: &mut CopilotTurn,
    ) -> Wait {
        let idle = self.launch.request.idle_timeout;
        loop {
            let Some(connection) = self.connection.as_mut() else {
                return Wait::Failed("the connection is gone".to_owned());
            };
            let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
            let idle_at = idle.map_or(far, |limit| Instant::now() + limit);
            let deadline_at = deadline.unwrap_or(far);
            let incoming = tokio::select! {
                incoming = connection.next() => incoming,
                () = cancel.cancelled() => return Wait::Stopped(ProcessEnd::Cancelled),
                () = tokio::time::sleep_until(deadline_at) => {
                    return Wait::Stopped(ProcessEnd::DeadlineExceeded)
                }
                () = tokio::time::sleep_until(idle_at) => {
                    return Wait::Stopped(ProcessEnd::IdleExceeded)
                }
            };
            let message = match incoming {
                Incoming::Message(message) => message,
                Incoming::Stderr(line) => {
                    forwarder.line(trellis_process::Stream::Stderr, &line);
                    forwarder.flush().await;
                    continue;
                }
                Incoming::Garbled(why) => {
                    forwarder.system(format!("copilot sent {why}"));
                    continue;
                }
                Incoming::Closed => {
                    return Wait::Failed("copilot closed the connection".to_owned());
                }
            };
            let method = text(&message, "method").to_owned();
            match (message.get("id"), method.as_str()) {
                (Some(id), "") => {
                    if awaited.is_some_and(|(want, _)| id.as_u64() == Some(want)) {
                        return Wait::Done(message);
                    }
                }
                (Some(id), request) => {
                    let id = id.clone();
                    let params = message.get("params").cloned().unwrap_or(Value::Null);
                    self.serve(&id, request, &params, forwarder).await;
                }
                (None, "session.event") => {
                    let event = message.pointer("/params/event").unwrap_or(&Value::Null);
                    let ours = self.session_id.as_deref().is_none_or(|session| {
                        message.pointer("/params/sessionId").and_then(Value::as_str)
                            == Some(session)
                    });
                    if ours {
                        if let Some((stream, line)) = CopilotCli.summarize(event) {
                            forwarder.emit(stream, &line);
                        }
                        self.permission(event);
                        parser.event(event);
                    }
                    forwarder.flush().await;
                    if awaited.is_none() {
                        return Wait::Done(Value::Null);
                    }
                }
                (None, _) => {}
            }
        }
    }

    /// Answers a request the CLI made.
    async fn serve(
        &mut self,
        id: &Value,
        method: &str,
        params: &Value,
        forwarder: &mut LogForwarder,
    ) {
        if method == "providerToken.getToken" {
            let provider = text(params, "providerName");
            let command = self
                .token_commands
                .iter()
                .find(|(name, _)| name == provider)
                .map(|(_, command)| command.clone());
            let answer = match command {
                Some(command) => {
                    let cwd = self.launch.request.workspace.clone();
                    run_token_command(&command, self.env, &cwd).await
                }
                None => Err(format!("no apiKeyCommand for provider {provider:?}")),
            };
            let Some(connection) = self.connection.as_mut() else {
                return;
            };
            match answer {
                Ok(token) => connection.respond(id, json!({"token": token})),
                Err(why) => {
                    forwarder.system(format!("copilot asked a token for {provider}: {why}"));
                    connection.refuse(id, -32603, &why);
                }
            }
            return;
        }
        let token = match self.launch.access {
            LaneAccess::Native { api_key } => api_key.clone(),
            _ => None,
        };
        let Some(connection) = self.connection.as_mut() else {
            return;
        };
        match (method, token) {
            // Asked whenever the CLI needs a token: an expired one is replaced by the value
            // the execution holds now.
            ("gitHubToken.getToken", Some(token)) => {
                connection.respond(id, json!({"token": token}));
            }
            ("gitHubToken.getToken", None) => {
                connection.refuse(id, METHOD_NOT_FOUND, "no GitHub token was declared");
            }
            (other, _) => {
                forwarder.emit(
                    LogStream::System,
                    &format!("copilot asked {other}, which Trellis does not serve"),
                );
                connection.refuse(id, METHOD_NOT_FOUND, "not served by Trellis");
            }
        }
    }

    /// Answers a permission request: a verifier may not write; everything else is allowed
    /// (no one is there to ask).
    fn permission(&mut self, event: &Value) {
        if text(event, "type") != "permission.requested" {
            return;
        }
        let data = event.get("data").unwrap_or(&Value::Null);
        if data.get("resolvedByHook") == Some(&Value::Bool(true)) {
            return;
        }
        let kind = data
            .pointer("/permissionRequest/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let refused = self.launch.is_verifier() && kind == "write";
        let result = if refused {
            json!({"kind": "reject", "feedback": "a verifier does not change the workspace"})
        } else {
            json!({"kind": "approve-once"})
        };
        let (Some(connection), Some(session)) = (self.connection.as_mut(), &self.session_id) else {
            return;
        };
        connection.request(
            "session.permissions.handlePendingPermissionRequest",
            json!({"sessionId": session, "requestId": data.get("requestId"), "result": result}),
        );
    }

    /// Stops the CLI after Trellis ended the turn.
    async fn stopped(&mut self, end: ProcessEnd) -> TurnEnd {
        if let Some(connection) = self.connection.take() {
            connection.stop().await;
        }
        TurnEnd::Stopped(end)
    }

    /// The CLI went away (or refused) mid-turn: what it said so far, and how it ended.
    async fn lost(
        &mut self,
        parser: CopilotTurn,
        why: String,
        forwarder: &mut LogForwarder,
    ) -> TurnEnd {
        forwarder.system(why.clone());
        let end = match self.connection.take() {
            Some(connection) => match connection.end() {
                Some(end) => end,
                None => {
                    connection.stop().await;
                    ProcessEnd::Exited { code: 1 }
                }
            },
            None => ProcessEnd::Exited { code: 1 },
        };
        let mut transcript = Box::new(parser).finish();
        transcript.session_id = self.session_id.clone();
        if transcript.provider_error.is_none() && end.success() {
            transcript.provider_error = Some(why);
        }
        TurnEnd::Ran {
            transcript: Box::new(transcript),
            end: match end {
                ProcessEnd::Exited { code: 0 } => ProcessEnd::Exited { code: 1 },
                other => other,
            },
        }
    }
}
