//! The Codex adapter: `codex exec --json` with the strict reply schema in an `--output-schema`
//! file, the answer from the last `agent_message`, and corrections through
//! `codex exec resume <thread_id>`.

use std::path::Path;

use serde_json::Value;

use crate::access::{LaneAccess, base_value};
use crate::harness::{LogStream, TokenUsage};
use crate::lane::{HarnessKind, Provider};
use crate::protocol::{
    CliProtocol, Invocation, Launch, Transcript, Turn, TurnParser, count, excerpt, text,
    toml_string,
};
use crate::reply::RawReply;
use crate::schema::SchemaDialect;

const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";

pub(crate) struct CodexCli;

impl CliProtocol for CodexCli {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Codex
    }

    fn label(&self) -> &'static str {
        "Codex"
    }

    fn dialect(&self) -> SchemaDialect {
        SchemaDialect::OpenAiStrict
    }

    fn usage_is_cumulative(&self) -> bool {
        // `turn.completed.usage` is the running total of the thread.
        true
    }

    fn needs_schema_file(&self) -> bool {
        true
    }

    fn reserved(&self, name: &str, provider: Provider) -> bool {
        matches!(
            name,
            "CODEX_HOME" | "CODEX_API_KEY" | "CODEX_BASE_URL" | "OPENAI_API_BASE"
        ) || (provider == Provider::Openai && name == "OPENAI_API_KEY")
            || (provider != Provider::Openai && name == "OPENAI_BASE_URL")
    }

    fn user_config(&self, provider: Provider) -> &'static [&'static str] {
        // The Openai lane keeps the user's endpoint; `CODEX_HOME` is handled with the home
        // (the user's own, unless a session needs a private one).
        match provider {
            Provider::Openai => &["OPENAI_BASE_URL"],
            _ => &[],
        }
    }

    fn prepare_home(&self, home: &Path) -> std::io::Result<()> {
        // Codex refuses to start when CODEX_HOME does not exist.
        std::fs::create_dir_all(home.join(".codex"))
    }

    fn invocation(&self, launch: &Launch<'_>, turn: &Turn<'_>) -> Result<Invocation, String> {
        let mut args = vec!["exec".to_owned()];
        if turn.resume.is_some() {
            args.push("resume".into());
        }
        let mut config: Vec<String> = Vec::new();
        let mut env: Vec<(String, String)> = Vec::new();
        match (launch.provider, launch.access) {
            (Provider::Openai, LaneAccess::Native { api_key }) => {
                // The user's own Codex configuration and login; a declared key wins.
                if let Some(key) = api_key {
                    env.push(("CODEX_API_KEY".into(), key.clone()));
                }
            }
            (
                Provider::Gateway,
                LaneAccess::Gateway {
                    base_url,
                    key_name,
                    key,
                },
            ) => {
                config.extend(provider_entry("gateway", "Gateway", base_url, key_name));
                config.push("model_providers.gateway.requires_openai_auth=false".into());
                env.push((key_name.clone(), key.clone()));
            }
            (Provider::Openrouter, LaneAccess::Openrouter { key_name, key }) => {
                config.extend(provider_entry(
                    "openrouter",
                    "OpenRouter",
                    OPENROUTER_BASE_URL,
                    key_name,
                ));
                env.push((key_name.clone(), key.clone()));
            }
            (Provider::Bedrock, LaneAccess::Bedrock { token, region }) => {
                config.push(format!("model_provider={}", toml_string("amazon-bedrock")));
                env.push(("AWS_BEARER_TOKEN_BEDROCK".into(), token.clone()));
                env.push(("AWS_REGION".into(), region.clone()));
            }
            (provider, _) => {
                return Err(format!(
                    "the codex harness cannot use the {} provider",
                    provider.as_str()
                ));
            }
        }
        config.extend([
            format!("web_search={}", toml_string("disabled")),
            // Without these two Codex contacts chatgpt.com and github.com on every start.
            "analytics.enabled=false".to_owned(),
            "features.plugins=false".to_owned(),
        ]);
        // `exec resume` has no --sandbox flag; the config key works for both. Inside a Trellis
        // sandbox Codex's own is redundant (and cannot nest): full access there. Outside one,
        // a mode or policy the user set in their configuration stays theirs.
        let user_set = |key: &str| !launch.contained && launch.policy.codex_keys.contains(&key);
        if !user_set("sandbox_mode") {
            config.push(format!(
                "sandbox_mode={}",
                toml_string(if launch.contained {
                    "danger-full-access"
                } else if launch.is_verifier() {
                    "read-only"
                } else {
                    "workspace-write"
                })
            ));
        }
        if !user_set("approval_policy") {
            config.push(format!("approval_policy={}", toml_string("never")));
        }
        if !launch.is_verifier() && !launch.contained && !user_set("sandbox_mode") {
            config.push("sandbox_workspace_write.network_access=true".into());
        }
        if let Some(effort) = launch.binding.effort {
            config.push(format!(
                "model_reasoning_effort={}",
                toml_string(effort.as_str())
            ));
        }
        for entry in config {
            args.extend(["-c".to_owned(), entry]);
        }
        args.push("--json".into());
        if let Some(model) = launch.model() {
            args.extend(["--model".into(), model.to_owned()]);
        }
        args.push("--skip-git-repo-check".into());
        // The thread does not remember the schema: pass it on every turn.
        args.extend([
            "--output-schema".into(),
            launch.schema_file.display().to_string(),
        ]);
        if let Some(thread) = turn.resume {
            args.push(thread.to_owned());
        }
        args.push("-".into());

        if launch.private_home {
            env.push((
                "CODEX_HOME".into(),
                launch.home.join(".codex").display().to_string(),
            ));
        } else if let Some(codex_home) = base_value(launch.request, "CODEX_HOME") {
            env.push(("CODEX_HOME".into(), codex_home.to_owned()));
        }
        Ok(Invocation { args, env })
    }

    fn summarize(&self, event: &Value) -> Option<(LogStream, String)> {
        match text(event, "type") {
            "thread.started" => Some((
                LogStream::System,
                format!("codex thread {} started", text(event, "thread_id")),
            )),
            "item.completed" => item_summary(event.get("item")?),
            "turn.failed" => Some((
                LogStream::Error,
                format!(
                    "turn failed: {}",
                    event
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ),
            )),
            "error" => Some((LogStream::Error, text(event, "message").to_owned())),
            _ => None,
        }
    }

    fn parser(&self) -> Box<dyn TurnParser> {
        Box::new(CodexTurn::default())
    }
}

/// `-c` entries declaring a Responses-API provider and selecting it.
fn provider_entry(id: &str, name: &str, base_url: &str, key_name: &str) -> Vec<String> {
    vec![
        format!("model_provider={}", toml_string(id)),
        format!("model_providers.{id}.name={}", toml_string(name)),
        format!("model_providers.{id}.base_url={}", toml_string(base_url)),
        format!("model_providers.{id}.env_key={}", toml_string(key_name)),
        format!("model_providers.{id}.wire_api={}", toml_string("responses")),
    ]
}

fn item_summary(item: &Value) -> Option<(LogStream, String)> {
    let line = match text(item, "type") {
        "agent_message" => text(item, "text").to_owned(),
        "reasoning" => format!("thinking: {}", text(item, "text")),
        "command_execution" => format!(
            "$ {} (exit {})",
            text(item, "command"),
            item.get("exit_code")
                .map_or("?".to_owned(), Value::to_string)
        ),
        "file_change" => {
            let changes: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| format!("{} {}", text(c, "kind"), text(c, "path")))
                .collect();
            format!("files changed: {}", changes.join(", "))
        }
        "mcp_tool_call" => format!("tool {}.{}", text(item, "server"), text(item, "tool")),
        "web_search" => format!("web search: {}", text(item, "query")),
        "todo_list" => format!(
            "plan: {}",
            excerpt(item.get("items").unwrap_or(&Value::Null))
        ),
        "error" => {
            return Some((
                LogStream::System,
                format!("codex: {}", text(item, "message")),
            ));
        }
        _ => return None,
    };
    (!line.trim().is_empty()).then_some((LogStream::Output, line))
}

/// The facts of one `codex exec` run. An `error` event alone is not fatal (Codex reports
/// reconnect attempts that way); `turn.failed`, or an error without a completed turn, is.
#[derive(Default)]
struct CodexTurn {
    transcript: Transcript,
    completed: bool,
    failure: Option<String>,
    last_error: Option<String>,
}

impl TurnParser for CodexTurn {
    fn event(&mut self, event: &Value) {
        self.transcript.events += 1;
        match text(event, "type") {
            "thread.started" => self.transcript.note_session(text(event, "thread_id")),
            "item.completed" => {
                let item = event.get("item").unwrap_or(&Value::Null);
                if text(item, "type") == "agent_message" {
                    self.transcript.reply = Some(RawReply::Text(text(item, "text").to_owned()));
                }
            }
            "turn.completed" => {
                self.completed = true;
                let usage = event.get("usage").unwrap_or(&Value::Null);
                let input = count(usage, "input_tokens");
                let cached = count(usage, "cached_input_tokens");
                self.transcript.usage = Some(TokenUsage {
                    // OpenAI counts cached tokens inside input_tokens; Trellis keeps them apart.
                    input_tokens: input.saturating_sub(cached),
                    output_tokens: count(usage, "output_tokens"),
                    cache_read_tokens: cached,
                    cache_write_tokens: count(usage, "cache_write_input_tokens"),
                    cost_usd: None,
                });
            }
            "turn.failed" => {
                let message = event
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("turn failed");
                self.failure = Some(message.to_owned());
            }
            "error" => self.last_error = Some(text(event, "message").to_owned()),
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> Transcript {
        let CodexTurn {
            mut transcript,
            completed,
            failure,
            last_error,
        } = *self;
        transcript.provider_error = failure.or(if completed { None } else { last_error });
        // Only a completed, successful turn has a final reply.
        if transcript.provider_error.is_some() || !completed {
            transcript.reply = None;
        }
        transcript
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_stdout(stdout: &[u8]) -> Transcript {
        crate::protocol::parse_all(CodexCli.parser(), stdout)
    }

    #[test]
    fn the_last_agent_message_of_a_completed_turn_is_the_reply() {
        let t = parse_stdout(
            br#"{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"type":"agent_message","text":"first"}}
{"type":"error","message":"Reconnecting... 2/5"}
{"type":"item.completed","item":{"type":"agent_message","text":"{\"response\":1}"}}
{"type":"turn.completed","usage":{"input_tokens":300,"cached_input_tokens":40,"output_tokens":50}}
"#,
        );
        assert_eq!(t.session_id.as_deref(), Some("t1"));
        assert_eq!(t.reply, Some(RawReply::Text("{\"response\":1}".into())));
        assert_eq!(t.provider_error, None);
        assert_eq!(
            t.usage,
            Some(TokenUsage {
                input_tokens: 260,
                output_tokens: 50,
                cache_read_tokens: 40,
                cache_write_tokens: 0,
                cost_usd: None
            })
        );
    }

    #[test]
    fn failed_or_unfinished_turns_have_no_reply() {
        let failed = parse_stdout(
            br#"{"type":"thread.started","thread_id":"t1"}
{"type":"error","message":"bad request"}
{"type":"turn.failed","error":{"message":"bad request body"}}
"#,
        );
        assert_eq!(failed.provider_error.as_deref(), Some("bad request body"));
        let cut = parse_stdout(
            br#"{"type":"thread.started","thread_id":"t1"}
{"type":"item.completed","item":{"type":"agent_message","text":"x"}}
"#,
        );
        assert_eq!(cut.reply, None);
        assert_eq!(cut.provider_error, None);
    }
}
