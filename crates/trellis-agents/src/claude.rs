//! The Claude Code adapter: `claude --print` with `stream-json` events, the reply schema as
//! `--json-schema`, and corrections through `--resume <session_id>`.

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

/// Tools a verifier may not use: it must not change the workspace.
const VERIFIER_DISALLOWED_TOOLS: &str = "Write,Edit,NotebookEdit";
const OPENROUTER_ANTHROPIC_BASE_URL: &str = "https://openrouter.ai/api";

pub(crate) struct ClaudeCli;

fn running_as_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl CliProtocol for ClaudeCli {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Claude
    }

    fn label(&self) -> &'static str {
        "Claude"
    }

    fn dialect(&self) -> SchemaDialect {
        SchemaDialect::Standard
    }

    fn usage_is_cumulative(&self) -> bool {
        // `result.usage` covers one invocation, also after `--resume`.
        false
    }

    fn reserved(&self, name: &str, provider: Provider) -> bool {
        matches!(name, "ANTHROPIC_AUTH_TOKEN" | "IS_SANDBOX")
            || name.starts_with("CLAUDE_CODE_")
            || (self.user_config(provider).is_empty()
                && matches!(name, "ANTHROPIC_BASE_URL" | "CLAUDE_CONFIG_DIR"))
    }

    fn user_config(&self, provider: Provider) -> &'static [&'static str] {
        // On the Anthropic lane the user's endpoint and configuration directory stay theirs;
        // the other lanes set the endpoint themselves.
        match provider {
            Provider::Anthropic => &["ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"],
            _ => &[],
        }
    }

    fn invocation(&self, launch: &Launch<'_>, turn: &Turn<'_>) -> Result<Invocation, String> {
        let mut args: Vec<String> = [
            "--print",
            "--input-format",
            "text",
            "--output-format",
            "stream-json",
            "--verbose",
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(model) = launch.model() {
            args.extend(["--model".into(), model.to_owned()]);
        }
        if let Some(effort) = launch.binding.effort {
            args.extend(["--effort".into(), effort.as_str().to_owned()]);
        }
        args.extend(["--json-schema".into(), launch.schema.to_string()]);
        // Print mode cannot ask for permission: the bypass inside a Trellis sandbox, or where
        // the user authored no permissions; otherwise their rules decide, edits accepted
        // unless their settings choose a mode. Verifiers keep Bash (to run tests) but lose the
        // editing tools.
        let bypass = launch.contained || launch.policy.claude_permissions.is_none();
        if bypass {
            args.push("--dangerously-skip-permissions".into());
        } else if !launch.policy.claude_default_mode {
            args.extend(["--permission-mode".into(), "acceptEdits".into()]);
        }
        if launch.is_verifier() {
            args.push(format!("--disallowed-tools={VERIFIER_DISALLOWED_TOOLS}"));
        }
        if let Some(session) = turn.resume {
            args.extend(["--resume".into(), session.to_owned()]);
        }

        let mut env = vec![(
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(),
            "1".to_owned(),
        )];
        if bypass && running_as_root() {
            // Claude Code refuses --dangerously-skip-permissions as root without it.
            env.push(("IS_SANDBOX".into(), "1".into()));
        }
        match (launch.provider, launch.access) {
            (Provider::Anthropic, LaneAccess::Native { api_key }) => {
                if let Some(key) = api_key {
                    env.push(("ANTHROPIC_API_KEY".into(), key.clone()));
                }
            }
            (Provider::Gateway, LaneAccess::Gateway { base_url, key, .. }) => {
                env.push(("ANTHROPIC_BASE_URL".into(), base_url.clone()));
                env.push(("ANTHROPIC_API_KEY".into(), key.clone()));
            }
            (Provider::Openrouter, LaneAccess::Openrouter { key, .. }) => {
                env.push((
                    "ANTHROPIC_BASE_URL".into(),
                    OPENROUTER_ANTHROPIC_BASE_URL.into(),
                ));
                env.push(("ANTHROPIC_AUTH_TOKEN".into(), key.clone()));
                env.push(("ANTHROPIC_API_KEY".into(), String::new()));
            }
            (Provider::Bedrock, LaneAccess::Bedrock { token, region }) => {
                env.push(("CLAUDE_CODE_USE_BEDROCK".into(), "1".into()));
                env.push(("AWS_BEARER_TOKEN_BEDROCK".into(), token.clone()));
                env.push(("AWS_REGION".into(), region.clone()));
            }
            (provider, _) => {
                return Err(format!(
                    "the claude harness cannot use the {} provider",
                    provider.as_str()
                ));
            }
        }
        Ok(Invocation { args, env })
    }

    fn summarize(&self, event: &Value) -> Option<(LogStream, String)> {
        match (text(event, "type"), text(event, "subtype")) {
            ("system", "init") => Some((
                LogStream::System,
                format!(
                    "claude session {} started (model {})",
                    text(event, "session_id"),
                    text(event, "model")
                ),
            )),
            ("system", "api_retry") => Some((
                LogStream::System,
                format!(
                    "API retry {}/{} after {} {}",
                    count(event, "attempt"),
                    count(event, "max_retries"),
                    count(event, "error_status"),
                    text(event, "error")
                ),
            )),
            ("assistant", _) => content_summary(event, "tool"),
            ("user", _) => content_summary(event, "tool result"),
            ("result", subtype) => Some((
                LogStream::System,
                format!(
                    "claude finished: {subtype}{}, {} turns",
                    if event.get("is_error") == Some(&Value::Bool(true)) {
                        " (error)"
                    } else {
                        ""
                    },
                    count(event, "num_turns")
                ),
            )),
            _ => None,
        }
    }

    fn parser(&self) -> Box<dyn TurnParser> {
        Box::new(ClaudeTurn::default())
    }
}

/// The facts of one `claude --print` run: the constant session id, and from the `result`
/// event the reply (`structured_output`, else `result` text), usage and any failure.
#[derive(Default)]
struct ClaudeTurn {
    transcript: Transcript,
}

impl TurnParser for ClaudeTurn {
    fn event(&mut self, event: &Value) {
        let transcript = &mut self.transcript;
        transcript.events += 1;
        if let Some(id) = event.get("session_id").and_then(Value::as_str) {
            transcript.note_session(id);
        }
        if let Some(kind) = ProviderFailureKind::of_event(HarnessKind::Claude, event) {
            transcript.failure_hint = Some(kind);
        }
        if text(event, "type") != "result" {
            return;
        }
        transcript.usage = Some(result_usage(event));
        // An API error still reports `subtype: success`; `is_error` is what tells.
        let failed = event.get("is_error") == Some(&Value::Bool(true))
            || text(event, "subtype") != "success";
        if failed {
            let error = result_error(event);
            // Observed when `--resume` names a session this home does not hold.
            if error.contains("No conversation found") {
                transcript.session_lost = Some(error);
            } else {
                transcript.provider_error = Some(error);
            }
            return;
        }
        transcript.reply = match event.get("structured_output") {
            Some(value) if !value.is_null() => Some(RawReply::Json(value.clone())),
            _ => match event.get("result") {
                Some(Value::String(text)) => Some(RawReply::Text(text.clone())),
                Some(value) if !value.is_null() => Some(RawReply::Json(value.clone())),
                _ => None,
            },
        };
    }

    fn finish(self: Box<Self>) -> Transcript {
        self.transcript
    }
}

/// Text blocks verbatim, tool calls and tool results as short excerpts, one line per event.
fn content_summary(event: &Value, tool_word: &str) -> Option<(LogStream, String)> {
    let blocks = event.pointer("/message/content")?.as_array()?;
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match text(block, "type") {
            "text" => Some(text(block, "text").to_owned()),
            "tool_use" => Some(format!(
                "{tool_word} {}: {}",
                text(block, "name"),
                excerpt(block.get("input").unwrap_or(&Value::Null))
            )),
            "tool_result" => Some(format!(
                "{tool_word}: {}",
                excerpt(block.get("content").unwrap_or(&Value::Null))
            )),
            _ => None,
        })
        .filter(|part| !part.trim().is_empty())
        .collect();
    (!parts.is_empty()).then(|| (LogStream::Output, parts.join("\n")))
}

fn result_usage(event: &Value) -> TokenUsage {
    let usage = event.get("usage").unwrap_or(&Value::Null);
    TokenUsage {
        input_tokens: count(usage, "input_tokens"),
        output_tokens: count(usage, "output_tokens"),
        cache_read_tokens: count(usage, "cache_read_input_tokens"),
        cache_write_tokens: count(usage, "cache_creation_input_tokens"),
        cost_usd: event.get("total_cost_usd").and_then(Value::as_f64),
    }
}

fn result_error(event: &Value) -> String {
    let result = text(event, "result");
    if !result.is_empty() {
        return result.to_owned();
    }
    match event.get("errors") {
        Some(Value::Array(errors)) if !errors.is_empty() => errors
            .iter()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("; "),
        _ => format!("result {}", text(event, "subtype")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_carry_the_reply_usage_and_failures() {
        let stdout = br#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}
{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]},"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"result":"{}","structured_output":{"response":1},"session_id":"s1","usage":{"input_tokens":10,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4},"total_cost_usd":0.5}
"#;
        let t = parse(stdout);
        assert_eq!(t.events, 3);
        assert_eq!(t.session_id.as_deref(), Some("s1"));
        assert_eq!(t.reply, Some(RawReply::Json(json!({"response": 1}))));
        assert_eq!(
            t.usage,
            Some(TokenUsage {
                input_tokens: 10,
                output_tokens: 2,
                cache_read_tokens: 3,
                cache_write_tokens: 4,
                cost_usd: Some(0.5)
            })
        );
        let failed = parse(
            br#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400 nope","session_id":"s1"}"#,
        );
        assert_eq!(
            failed.provider_error.as_deref(),
            Some("API Error: 400 nope")
        );
        assert_eq!(failed.reply, None);
        let lost = parse(
            br#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: s9"],"session_id":"s9"}"#,
        );
        assert_eq!(lost.provider_error, None);
        assert_eq!(
            lost.session_lost.as_deref(),
            Some("No conversation found with session ID: s9")
        );
        let text_only = parse(
            br#"{"type":"result","subtype":"success","is_error":false,"result":"not json","structured_output":null,"session_id":"s2"}"#,
        );
        assert_eq!(text_only.reply, Some(RawReply::Text("not json".into())));
    }

    fn parse(stdout: &[u8]) -> Transcript {
        crate::protocol::parse_all(ClaudeCli.parser(), stdout)
    }

    #[test]
    fn summaries_are_one_line_each() {
        let cli = ClaudeCli;
        let tool = json!({"type":"assistant","message":{"content":[{"type":"tool_use","name":"Write","input":{"file_path":"/w/a"}}]}});
        assert_eq!(
            cli.summarize(&tool),
            Some((
                LogStream::Output,
                "tool Write: {\"file_path\":\"/w/a\"}".into()
            ))
        );
        let retry = json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":529,"error":"overloaded"});
        assert_eq!(
            cli.summarize(&retry),
            Some((
                LogStream::System,
                "API retry 1/10 after 529 overloaded".into()
            ))
        );
        assert_eq!(cli.summarize(&json!({"type":"stream_event"})), None);
    }
}
