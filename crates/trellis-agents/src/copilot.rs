//! The GitHub Copilot CLI adapter, through the pinned CLI's headless JSON-RPC protocol
//! (`copilot --headless --stdio`): `connect`, `session.create` (or `session.resume`), then one
//! `session.send` per turn carrying the strict reply schema as `responseFormat`, each turn read
//! from `session.event` notifications until `session.idle`.
//!
//! The CLI's own requests are answered here: permission requests (a verifier's writes are
//! refused), `gitHubToken.getToken` with the lane's token, asked again whenever the CLI needs
//! one (so a token that expired is replaced by the current value), and anything else with
//! JSON-RPC error -32601. The gateway lane hands the endpoint and key to the session as a
//! BYOK `provider`; a declared `COPILOT_PROVIDERS_CONFIG` registry adds named providers and
//! models (`copilot_registry`).

use serde_json::Value;

use crate::access::LaneAccess;
use crate::failure::ProviderFailureKind;
use crate::harness::{LogStream, TokenUsage};
use crate::lane::{HarnessKind, Provider};
use crate::protocol::{
    CliProtocol, Invocation, Launch, Transcript, Turn, TurnParser, count, excerpt, text,
};
use crate::reply::RawReply;
use crate::schema::SchemaDialect;

pub(crate) struct CopilotCli;

impl CliProtocol for CopilotCli {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Copilot
    }

    fn label(&self) -> &'static str {
        "Copilot"
    }

    fn dialect(&self) -> SchemaDialect {
        SchemaDialect::OpenAiStrict
    }

    fn usage_is_cumulative(&self) -> bool {
        // `assistant.usage` reports one model call.
        false
    }

    fn reserved(&self, name: &str, _provider: Provider) -> bool {
        matches!(
            name,
            "COPILOT_HOME"
                | "COPILOT_OFFLINE"
                | "COPILOT_AUTO_UPDATE"
                | "COPILOT_ALLOW_ALL"
                | "COPILOT_MODEL"
                | "COPILOT_DISABLE_KEYTAR"
        ) || name.starts_with("COPILOT_PROVIDER_")
    }

    fn consumes(&self, name: &str) -> bool {
        // The registry and the provider fields travel in `session.create`.
        name == crate::copilot_registry::PROVIDERS_CONFIG_ENV
            || name.starts_with(crate::copilot_provider::PROVIDER_PREFIX)
    }

    fn invocation(&self, launch: &Launch<'_>, _turn: &Turn<'_>) -> Result<Invocation, String> {
        let mut args: Vec<String> = [
            "--headless",
            "--stdio",
            "--no-auto-update",
            "--disable-builtin-mcps",
            "--no-ask-user",
            "--no-remote-export",
            "--log-level",
            "error",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut env = vec![("COPILOT_AUTO_UPDATE".to_owned(), "false".to_owned())];
        if launch.private_home {
            env.extend([
                (
                    "COPILOT_HOME".to_owned(),
                    launch.home.join(".copilot").display().to_string(),
                ),
                ("COPILOT_DISABLE_KEYTAR".to_owned(), "1".to_owned()),
            ]);
        } else if let Some(home) = crate::access::base_value(launch.request, "COPILOT_HOME") {
            env.push(("COPILOT_HOME".into(), home.to_owned()));
        }
        match (launch.provider, launch.access) {
            (Provider::Github, LaneAccess::Native { api_key }) => {
                if let Some(token) = api_key {
                    env.push(("COPILOT_GITHUB_TOKEN".into(), token.clone()));
                }
            }
            (Provider::Gateway, LaneAccess::Gateway { .. }) => {
                // The session's BYOK provider carries the endpoint; never a stored login.
                args.push("--no-auto-login".into());
            }
            (provider, _) => {
                return Err(format!(
                    "the copilot harness cannot use the {} provider",
                    provider.as_str()
                ));
            }
        }
        Ok(Invocation { args, env })
    }

    fn summarize(&self, event: &Value) -> Option<(LogStream, String)> {
        let data = event.get("data").unwrap_or(&Value::Null);
        match text(event, "type") {
            "session.start" => Some((
                LogStream::System,
                format!(
                    "copilot session {} started (model {})",
                    text(data, "sessionId"),
                    text(data, "selectedModel")
                ),
            )),
            "assistant.message" => {
                let mut parts = vec![text(data, "content").to_owned()];
                for request in data
                    .get("toolRequests")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    parts.push(format!(
                        "tool {}: {}",
                        text(request, "name"),
                        excerpt(request.get("arguments").unwrap_or(&Value::Null))
                    ));
                }
                parts.retain(|p| !p.trim().is_empty());
                (!parts.is_empty()).then(|| (LogStream::Output, parts.join("\n")))
            }
            "tool.execution_complete" => Some((
                LogStream::Output,
                format!(
                    "tool result: {}",
                    excerpt(data.pointer("/result/content").unwrap_or(&Value::Null))
                ),
            )),
            "session.error" => Some((LogStream::Error, text(data, "message").to_owned())),
            "session.warning" | "session.info" => {
                Some((LogStream::System, text(data, "message").to_owned()))
            }
            _ => None,
        }
    }

    fn parser(&self) -> Box<dyn TurnParser> {
        Box::new(CopilotTurn::default())
    }
}

/// The facts of one `session.send`: the last assistant message with content, the usage of
/// every model call, and `session.error` as a provider failure.
#[derive(Default)]
pub(crate) struct CopilotTurn {
    transcript: Transcript,
    usage: TokenUsage,
    saw_usage: bool,
    /// `session.idle` arrived: the turn is over.
    pub finished: bool,
    failure: Option<String>,
}

impl TurnParser for CopilotTurn {
    fn event(&mut self, event: &Value) {
        self.transcript.events += 1;
        let data = event.get("data").unwrap_or(&Value::Null);
        // Sub-agents talk in the same session; only the main agent answers the node.
        if event.get("agentId").is_some_and(|id| !id.is_null()) {
            return;
        }
        match text(event, "type") {
            "assistant.message" => {
                let content = text(data, "content");
                if !content.trim().is_empty() {
                    self.transcript.reply = Some(RawReply::Text(content.to_owned()));
                }
            }
            "assistant.usage" => {
                self.saw_usage = true;
                self.usage.add(&call_usage(data));
            }
            "session.error" => {
                self.failure = Some(text(data, "message").to_owned());
                self.transcript.failure_hint =
                    ProviderFailureKind::of_event(HarnessKind::Copilot, event);
            }
            "session.idle" => {
                self.finished = true;
                if data.get("aborted") == Some(&Value::Bool(true)) && self.failure.is_none() {
                    self.failure = Some("the turn was aborted".to_owned());
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> Transcript {
        let CopilotTurn {
            mut transcript,
            usage,
            saw_usage,
            finished,
            failure,
        } = *self;
        if saw_usage {
            transcript.usage = Some(usage);
        }
        if failure.is_some() || !finished {
            transcript.reply = None;
        }
        transcript.provider_error = failure;
        transcript
    }
}

/// One model call's usage; Copilot counts cache reads inside `inputTokens` (OpenAI's
/// convention), Trellis keeps them apart.
fn call_usage(data: &Value) -> TokenUsage {
    let cache_read = count(data, "cacheReadTokens");
    TokenUsage {
        input_tokens: count(data, "inputTokens").saturating_sub(cache_read),
        output_tokens: count(data, "outputTokens"),
        cache_read_tokens: cache_read,
        cache_write_tokens: count(data, "cacheWriteTokens"),
        cost_usd: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(events: &[Value]) -> Transcript {
        let mut parser = CopilotCli.parser();
        for event in events {
            parser.event(event);
        }
        parser.finish()
    }

    #[test]
    fn replies_usage_and_failures_come_from_session_events() {
        let ok = parse(&[
            json!({"type":"assistant.message","data":{"content":"","toolRequests":[{"name":"apply_patch"}]}}),
            json!({"type":"assistant.usage","data":{"inputTokens":300,"outputTokens":50,"cacheReadTokens":40}}),
            json!({"type":"assistant.message","agentId":"sub","data":{"content":"not mine"}}),
            json!({"type":"assistant.message","data":{"content":"{\"response\":true}"}}),
            json!({"type":"session.idle","data":{"mode":"interactive"}}),
        ]);
        assert_eq!(ok.reply, Some(RawReply::Text("{\"response\":true}".into())));
        assert_eq!(
            ok.usage,
            Some(TokenUsage {
                input_tokens: 260,
                output_tokens: 50,
                cache_read_tokens: 40,
                cache_write_tokens: 0,
                cost_usd: None
            })
        );
        let failed = parse(&[
            json!({"type":"session.error","data":{"message":"401 bad key","statusCode":401}}),
            json!({"type":"session.idle","data":{}}),
        ]);
        assert_eq!(failed.provider_error.as_deref(), Some("401 bad key"));
        assert_eq!(
            failed.failure_hint,
            Some(ProviderFailureKind::AuthenticationRequired)
        );
        assert_eq!(failed.reply, None);
        let unfinished = parse(&[json!({"type":"assistant.message","data":{"content":"{}"}})]);
        assert_eq!(unfinished.reply, None);
    }
}
