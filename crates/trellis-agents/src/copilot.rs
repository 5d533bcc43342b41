//! The GitHub Copilot CLI adapter, in its non-interactive prompt mode: the prompt piped on
//! stdin, `--output-format json` events, usage from `--usage-output-file`, and corrections
//! through `--resume=<sessionId>`.
//!
//! Copilot's prompt mode has no structured-output option, so the strict reply schema is only
//! described in the prompt (as the contract) and enforced by the mechanical check and
//! correction turns. The gateway lane uses Copilot's "bring your own key" provider variables.

use std::path::PathBuf;

use serde_json::Value;

use crate::access::{LaneAccess, base_value};
use crate::failure::ProviderFailureKind;
use crate::harness::{LogStream, TokenUsage};
use crate::lane::{HarnessKind, Provider};
use crate::protocol::{
    CliProtocol, Invocation, Launch, Transcript, Turn, TurnParser, count, excerpt, text,
};
use crate::reply::RawReply;
use crate::schema::SchemaDialect;

pub(crate) struct CopilotCli;

/// Where a turn's usage statistics are written.
fn usage_file(launch: &Launch<'_>, turn: &Turn<'_>) -> PathBuf {
    launch
        .request
        .scratch
        .join(format!("copilot-usage-{}.json", turn.index))
}

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
        // The usage file sums the whole session, resumed turns included.
        true
    }

    fn reserved(&self, name: &str, _provider: Provider) -> bool {
        matches!(
            name,
            "COPILOT_HOME"
                | "COPILOT_OFFLINE"
                | "COPILOT_AUTO_UPDATE"
                | "COPILOT_ALLOW_ALL"
                | "COPILOT_MODEL"
        ) || name.starts_with("COPILOT_PROVIDER_")
    }

    fn invocation(&self, launch: &Launch<'_>, turn: &Turn<'_>) -> Result<Invocation, String> {
        let mut args: Vec<String> = [
            "--output-format",
            "json",
            "--no-auto-update",
            "--no-ask-user",
            "--disable-builtin-mcps",
            "--allow-all",
        ]
        .map(str::to_owned)
        .to_vec();
        if launch.is_verifier() {
            // Denying the `write` permission kind removes every file-editing tool.
            args.push("--deny-tool=write".into());
        }
        if let Some(model) = launch.model() {
            args.extend(["--model".into(), model.to_owned()]);
        }
        if let Some(effort) = launch.binding.effort {
            args.extend(["--reasoning-effort".into(), effort.as_str().to_owned()]);
        }
        args.extend([
            "--usage-output-file".into(),
            usage_file(launch, turn).display().to_string(),
        ]);
        if let Some(session) = turn.resume {
            args.push(format!("--resume={session}"));
        }

        let mut env = vec![("COPILOT_AUTO_UPDATE".to_owned(), "false".to_owned())];
        match (launch.provider, launch.access) {
            (Provider::Github, LaneAccess::Native { api_key }) => {
                if let Some(token) = api_key {
                    env.push(("COPILOT_GITHUB_TOKEN".into(), token.clone()));
                }
                if let Some(home) = base_value(launch.request, "COPILOT_HOME") {
                    env.push(("COPILOT_HOME".into(), home.to_owned()));
                }
            }
            (Provider::Gateway, LaneAccess::Gateway { base_url, key, .. }) => {
                env.extend([
                    ("COPILOT_OFFLINE".to_owned(), "true".to_owned()),
                    ("COPILOT_PROVIDER_BASE_URL".to_owned(), base_url.clone()),
                    ("COPILOT_PROVIDER_API_KEY".to_owned(), key.clone()),
                    ("COPILOT_PROVIDER_TYPE".to_owned(), "openai".to_owned()),
                    (
                        "COPILOT_PROVIDER_WIRE_API".to_owned(),
                        "responses".to_owned(),
                    ),
                ]);
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
            "result" => Some((
                LogStream::System,
                format!(
                    "copilot session {} finished with exit code {}",
                    text(event, "sessionId"),
                    count(event, "exitCode")
                ),
            )),
            _ => None,
        }
    }

    fn parser(&self) -> Box<dyn TurnParser> {
        Box::new(CopilotTurn::default())
    }

    fn complete(&self, launch: &Launch<'_>, turn: &Turn<'_>, transcript: &mut Transcript) {
        if let Ok(bytes) = std::fs::read(usage_file(launch, turn)) {
            transcript.usage = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .map(|stats| session_usage(&stats));
        }
    }
}

/// The facts of one prompt-mode run: the last non-empty assistant message, the session id of
/// the `result` event, and `session.error` as a provider failure.
#[derive(Default)]
struct CopilotTurn {
    transcript: Transcript,
    finished: bool,
    failure: Option<String>,
}

impl TurnParser for CopilotTurn {
    fn event(&mut self, event: &Value) {
        self.transcript.events += 1;
        let data = event.get("data").unwrap_or(&Value::Null);
        match text(event, "type") {
            "assistant.message" => {
                let content = text(data, "content");
                if !content.trim().is_empty() {
                    self.transcript.reply = Some(RawReply::Text(content.to_owned()));
                }
            }
            "session.error" => {
                self.failure = Some(text(data, "message").to_owned());
                self.transcript.failure_hint =
                    ProviderFailureKind::of_event(HarnessKind::Copilot, event);
            }
            "result" => {
                self.finished = true;
                self.transcript.note_session(text(event, "sessionId"));
                let exit_code = count(event, "exitCode");
                if self.failure.is_none() && exit_code != 0 {
                    self.failure = Some(format!("exit code {exit_code}"));
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> Transcript {
        let CopilotTurn {
            mut transcript,
            finished,
            failure,
        } = *self;
        if failure.is_some() || !finished {
            transcript.reply = None;
        }
        transcript.provider_error = failure;
        transcript
    }
}

/// Sums the per-model usage of a `--usage-output-file` report.
fn session_usage(stats: &Value) -> TokenUsage {
    let mut total = TokenUsage::default();
    for metrics in stats
        .get("modelMetrics")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.values())
    {
        let usage = metrics.get("usage").unwrap_or(&Value::Null);
        let cache_read = count(usage, "cacheReadTokens");
        total.add(&TokenUsage {
            // Observed: inputTokens includes the cache reads (OpenAI's convention); Trellis
            // keeps them apart.
            input_tokens: count(usage, "inputTokens").saturating_sub(cache_read),
            output_tokens: count(usage, "outputTokens"),
            cache_read_tokens: cache_read,
            cache_write_tokens: count(usage, "cacheWriteTokens"),
            cost_usd: None,
        });
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_stdout(stdout: &[u8]) -> Transcript {
        crate::protocol::parse_all(CopilotCli.parser(), stdout)
    }

    #[test]
    fn replies_sessions_and_failures_come_from_the_events() {
        let ok = parse_stdout(
            br#"{"type":"assistant.message","data":{"content":"","toolRequests":[{"name":"apply_patch"}]}}
{"type":"assistant.message","data":{"content":"{\"response\":true}","toolRequests":[]}}
{"type":"result","sessionId":"s1","exitCode":0}
"#,
        );
        assert_eq!(ok.session_id.as_deref(), Some("s1"));
        assert_eq!(ok.reply, Some(RawReply::Text("{\"response\":true}".into())));
        let failed = parse_stdout(
            br#"{"type":"session.error","data":{"message":"400 bad things"}}
{"type":"result","sessionId":"s1","exitCode":1}
"#,
        );
        assert_eq!(failed.provider_error.as_deref(), Some("400 bad things"));
        assert_eq!(failed.reply, None);
    }

    #[test]
    fn usage_sums_every_model() {
        let stats = json!({"modelMetrics": {
            "a": {"usage": {"inputTokens": 300, "outputTokens": 50, "cacheReadTokens": 7, "cacheWriteTokens": 1}},
            "b": {"usage": {"inputTokens": 10, "outputTokens": 5}}
        }});
        assert_eq!(
            session_usage(&stats),
            TokenUsage {
                input_tokens: 303,
                output_tokens: 55,
                cache_read_tokens: 7,
                cache_write_tokens: 1,
                cost_usd: None
            }
        );
    }
}
