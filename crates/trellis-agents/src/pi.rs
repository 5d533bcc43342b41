//! The pi adapter (`@mariozechner/pi-coding-agent`): `pi --mode json -p` with the prompt on
//! stdin, the reply from the last assistant message, usage from every assistant
//! `message_end`, and corrections through `--session <id>`.
//!
//! Pi has no structured-output option, so the reply schema is only described in the prompt
//! (as the contract) and enforced by the mechanical check and correction turns. The gateway
//! lane declares a provider in the private home's `models.json` whose `apiKey` names the key
//! variable, so the key itself only ever travels in the environment.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::access::LaneAccess;
use crate::harness::{LogStream, TokenUsage};
use crate::lane::{HarnessKind, Provider};
use crate::protocol::{
    CliProtocol, Invocation, Launch, Transcript, Turn, TurnParser, count, excerpt, text,
};
use crate::reply::RawReply;
use crate::schema::SchemaDialect;

/// The provider id the gateway lane declares in `models.json`.
const GATEWAY_PROVIDER_ID: &str = "trellis-gateway";
/// Wire protocols a pi gateway may speak (the value of `GATEWAY_API`).
pub const PI_GATEWAY_APIS: [&str; 3] = [
    "openai-responses",
    "openai-completions",
    "anthropic-messages",
];
/// The wire protocol when the plan declares none.
const DEFAULT_GATEWAY_API: &str = "openai-responses";
/// Tools a verifier keeps: everything that reads, nothing that writes.
const VERIFIER_TOOLS: &str = "read,bash,grep,find,ls";

pub(crate) struct PiCli;

/// Pi's configuration directory inside `home`.
fn agent_dir(home: &Path) -> PathBuf {
    home.join(".pi").join("agent")
}

/// The gateway's wire protocol: the value of the declared `*_API` gateway field, else the
/// default. An unknown value is refused before pi starts.
fn gateway_api(launch: &Launch<'_>) -> Result<String, String> {
    let name = launch
        .binding
        .connections
        .get("gateway")
        .into_iter()
        .flatten()
        .find(|name| crate::access::is_wire_api_name(name));
    let Some(name) = name else {
        return Ok(DEFAULT_GATEWAY_API.to_owned());
    };
    let value = launch
        .request
        .environment
        .get(name)
        .unwrap_or(DEFAULT_GATEWAY_API);
    if PI_GATEWAY_APIS.contains(&value) {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "{name} must name one of {} for the pi gateway lane",
            PI_GATEWAY_APIS.join(", ")
        ))
    }
}

/// Pi's thinking level for an effort (`max` has no pi level above `xhigh`).
fn thinking_level(effort: crate::binding::Effort) -> &'static str {
    match effort {
        crate::binding::Effort::Max => "xhigh",
        other => other.as_str(),
    }
}

impl CliProtocol for PiCli {
    fn kind(&self) -> HarnessKind {
        HarnessKind::Pi
    }

    fn label(&self) -> &'static str {
        "Pi"
    }

    fn dialect(&self) -> SchemaDialect {
        SchemaDialect::Standard
    }

    fn usage_is_cumulative(&self) -> bool {
        // Each assistant `message_end` carries that one model call's usage.
        false
    }

    fn reserved(&self, name: &str, _provider: Provider) -> bool {
        name.starts_with("PI_")
    }

    fn prepare_home(&self, home: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(agent_dir(home))
    }

    fn invocation(&self, launch: &Launch<'_>, turn: &Turn<'_>) -> Result<Invocation, String> {
        let mut args: Vec<String> = [
            "--mode",
            "json",
            "--print",
            "--no-extensions",
            "--no-skills",
            "--no-prompt-templates",
            "--no-themes",
            "--offline",
        ]
        .map(str::to_owned)
        .to_vec();
        let mut env = vec![
            ("PI_OFFLINE".to_owned(), "1".to_owned()),
            ("PI_TELEMETRY".to_owned(), "0".to_owned()),
        ];
        if launch.private_home {
            env.push((
                "PI_CODING_AGENT_DIR".into(),
                agent_dir(&launch.home).display().to_string(),
            ));
        }
        let provider = match (launch.provider, launch.access) {
            (Provider::Anthropic, LaneAccess::Native { api_key }) => {
                if let Some(key) = api_key {
                    env.push(("ANTHROPIC_API_KEY".into(), key.clone()));
                }
                if let Some(base_url) = declared_value(launch, "ANTHROPIC_BASE_URL") {
                    // As in the reference: a declared endpoint sends the lane to a
                    // caller-owned Anthropic Messages server.
                    let dir = write_anthropic_endpoint(launch, base_url)?;
                    if !launch.private_home {
                        env.push(("PI_CODING_AGENT_DIR".into(), dir.display().to_string()));
                        args.extend([
                            "--session-dir".into(),
                            agent_dir(&launch.home)
                                .join("trellis-sessions")
                                .display()
                                .to_string(),
                        ]);
                    }
                }
                "anthropic"
            }
            (Provider::Openai, LaneAccess::Native { api_key }) => {
                if let Some(key) = api_key {
                    env.push(("OPENAI_API_KEY".into(), key.clone()));
                }
                "openai"
            }
            (Provider::Openrouter, LaneAccess::Openrouter { key, .. }) => {
                env.push(("OPENROUTER_API_KEY".into(), key.clone()));
                "openrouter"
            }
            (Provider::Bedrock, LaneAccess::Bedrock { token, region }) => {
                env.push(("AWS_BEARER_TOKEN_BEDROCK".into(), token.clone()));
                env.push(("AWS_REGION".into(), region.clone()));
                "amazon-bedrock"
            }
            (
                Provider::Gateway,
                LaneAccess::Gateway {
                    base_url,
                    key_name,
                    key,
                },
            ) => {
                let model = launch
                    .model()
                    .ok_or("the pi gateway lane needs a non-empty model id")?;
                write_gateway_models(launch, base_url, key_name, model, &gateway_api(launch)?)?;
                env.push((key_name.clone(), key.clone()));
                GATEWAY_PROVIDER_ID
            }
            (provider, _) => {
                return Err(format!(
                    "the pi harness cannot use the {} provider",
                    provider.as_str()
                ));
            }
        };
        args.extend(["--provider".into(), provider.to_owned()]);
        if let Some(model) = launch.model() {
            args.extend(["--model".into(), model.to_owned()]);
        }
        if let Some(effort) = launch.binding.effort {
            args.extend(["--thinking".into(), thinking_level(effort).to_owned()]);
        }
        if launch.is_verifier() {
            // Pi has no permission control of its own: a verifier simply gets no writing tool.
            args.extend(["--tools".into(), VERIFIER_TOOLS.to_owned()]);
        }
        if let Some(session) = turn.resume {
            args.extend(["--session".into(), session.to_owned()]);
        }
        Ok(Invocation { args, env })
    }

    fn summarize(&self, event: &Value) -> Option<(LogStream, String)> {
        match text(event, "type") {
            "session" => Some((
                LogStream::System,
                format!("pi session {} started", text(event, "id")),
            )),
            "message_end" => {
                let message = event.get("message")?;
                if text(message, "role") != "assistant" {
                    return None;
                }
                if text(message, "stopReason") == "error" {
                    return Some((LogStream::Error, text(message, "errorMessage").to_owned()));
                }
                let parts: Vec<String> = blocks(message)
                    .filter_map(|block| match text(block, "type") {
                        "text" => Some(text(block, "text").to_owned()),
                        "toolCall" => Some(format!(
                            "tool {}: {}",
                            text(block, "name"),
                            excerpt(block.get("arguments").unwrap_or(&Value::Null))
                        )),
                        _ => None,
                    })
                    .filter(|part| !part.trim().is_empty())
                    .collect();
                (!parts.is_empty()).then(|| (LogStream::Output, parts.join("\n")))
            }
            "tool_execution_end" => Some((
                LogStream::Output,
                format!(
                    "tool result{}: {}",
                    if event.get("isError") == Some(&Value::Bool(true)) {
                        " (error)"
                    } else {
                        ""
                    },
                    excerpt(&tool_result_text(
                        event.get("result").unwrap_or(&Value::Null)
                    ))
                ),
            )),
            "auto_retry_start" => Some((
                LogStream::System,
                format!(
                    "API retry {}/{}: {}",
                    count(event, "attempt"),
                    count(event, "maxAttempts"),
                    text(event, "errorMessage")
                ),
            )),
            _ => None,
        }
    }

    fn parser(&self) -> Box<dyn TurnParser> {
        Box::new(PiTurn::default())
    }
}

/// Writes the gateway provider into the private home's `models.json`: the endpoint, its wire
/// protocol, the model, and the *name* of the key variable (pi reads the value from there).
fn write_gateway_models(
    launch: &Launch<'_>,
    base_url: &str,
    key_name: &str,
    model: &str,
    api: &str,
) -> Result<(), String> {
    let models = json!({"providers": {GATEWAY_PROVIDER_ID: {
        "baseUrl": base_url,
        "api": api,
        "apiKey": key_name,
        "models": [{"id": model}],
    }}});
    let path = agent_dir(&launch.home).join("models.json");
    std::fs::create_dir_all(agent_dir(&launch.home))
        .and_then(|()| std::fs::write(&path, models.to_string()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The value of a variable the binding declares.
fn declared_value<'a>(launch: &'a Launch<'_>, name: &str) -> Option<&'a str> {
    let declared = launch
        .binding
        .connections
        .values()
        .flatten()
        .any(|declared| declared == name);
    declared
        .then(|| launch.request.environment.get(name))
        .flatten()
}

/// Points pi's built-in `anthropic` provider at `base_url` in a `models.json`: the private
/// home's, or (on the user's real home, which Trellis does not edit) one in the execution's
/// scratch directory. Returns the configuration directory used.
fn write_anthropic_endpoint(launch: &Launch<'_>, base_url: &str) -> Result<PathBuf, String> {
    let dir = if launch.private_home {
        agent_dir(&launch.home)
    } else {
        launch.request.scratch.join("pi-agent")
    };
    let models = json!({"providers": {"anthropic": {"baseUrl": base_url}}});
    let path = dir.join("models.json");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, models.to_string()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(dir)
}

/// The content blocks of a pi message.
fn blocks(message: &Value) -> impl Iterator<Item = &Value> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The text of a tool result (`{content: [{type: text, text}]}`), else its JSON.
fn tool_result_text(result: &Value) -> Value {
    let texts: Vec<&str> = blocks(result)
        .filter(|block| text(block, "type") == "text")
        .map(|block| text(block, "text"))
        .collect();
    if texts.is_empty() {
        result.clone()
    } else {
        Value::String(texts.join("\n"))
    }
}

/// The facts of one `pi -p` run: the session id of its header, the text of the last assistant
/// message, the usage of every model call, and an assistant message that ended in error as a
/// provider failure.
#[derive(Default)]
struct PiTurn {
    transcript: Transcript,
    usage: TokenUsage,
    saw_usage: bool,
    last_text: Option<String>,
    finished: bool,
    failure: Option<String>,
}

impl TurnParser for PiTurn {
    fn event(&mut self, event: &Value) {
        self.transcript.events += 1;
        match text(event, "type") {
            "session" => self.transcript.note_session(text(event, "id")),
            "message_end" => {
                let Some(message) = event.get("message") else {
                    return;
                };
                if text(message, "role") != "assistant" {
                    return;
                }
                if let Some(usage) = message.get("usage") {
                    self.saw_usage = true;
                    self.usage.add(&message_usage(usage));
                }
                match text(message, "stopReason") {
                    "error" | "aborted" => {
                        let why = text(message, "errorMessage");
                        self.failure = Some(if why.is_empty() {
                            format!("the model call ended: {}", text(message, "stopReason"))
                        } else {
                            why.to_owned()
                        });
                    }
                    _ => {
                        let reply: String = blocks(message)
                            .filter(|block| text(block, "type") == "text")
                            .map(|block| text(block, "text"))
                            .collect();
                        self.last_text = Some(reply);
                        // A later successful call (pi retried) clears an earlier failure.
                        self.failure = None;
                    }
                }
            }
            "agent_end" => self.finished = true,
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> Transcript {
        let PiTurn {
            mut transcript,
            usage,
            saw_usage,
            last_text,
            finished,
            failure,
        } = *self;
        if saw_usage {
            transcript.usage = Some(usage);
        }
        if failure.is_none() && finished {
            transcript.reply = last_text
                .filter(|text| !text.trim().is_empty())
                .map(RawReply::Text);
        }
        transcript.provider_error = failure;
        transcript
    }
}

/// One model call's usage; pi already keeps cache reads out of `input`.
fn message_usage(usage: &Value) -> TokenUsage {
    TokenUsage {
        input_tokens: count(usage, "input"),
        output_tokens: count(usage, "output"),
        cache_read_tokens: count(usage, "cacheRead"),
        cache_write_tokens: count(usage, "cacheWrite"),
        cost_usd: usage
            .pointer("/cost/total")
            .and_then(Value::as_f64)
            .filter(|cost| *cost > 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(stdout: &[u8]) -> Transcript {
        crate::protocol::parse_all(PiCli.parser(), stdout)
    }

    #[test]
    fn the_last_assistant_text_is_the_reply_and_usage_is_summed() {
        let t = parse(
            br#"{"type":"session","version":3,"id":"s1","cwd":"/w"}
{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","name":"write","arguments":{"path":"a"}}],"usage":{"input":100,"output":20,"cacheRead":40,"cacheWrite":0,"cost":{"total":0}},"stopReason":"toolUse"}}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"{\"response\":1}"}],"usage":{"input":200,"output":30,"cacheRead":0,"cacheWrite":5,"cost":{"total":0.25}},"stopReason":"stop"}}
{"type":"agent_end","messages":[]}
"#,
        );
        assert_eq!(t.session_id.as_deref(), Some("s1"));
        assert_eq!(t.reply, Some(RawReply::Text("{\"response\":1}".into())));
        assert_eq!(
            t.usage,
            Some(TokenUsage {
                input_tokens: 300,
                output_tokens: 50,
                cache_read_tokens: 40,
                cache_write_tokens: 5,
                cost_usd: Some(0.25)
            })
        );
        assert_eq!(t.provider_error, None);
    }

    #[test]
    fn an_errored_call_is_a_provider_failure_with_its_kind() {
        let t = parse(
            br#"{"type":"session","id":"s1"}
{"type":"message_end","message":{"role":"assistant","content":[],"usage":{"input":0,"output":0},"stopReason":"error","errorMessage":"401 invalid x-api-key"}}
{"type":"agent_end","messages":[]}
"#,
        );
        assert_eq!(t.provider_error.as_deref(), Some("401 invalid x-api-key"));
        assert_eq!(t.reply, None);
        let unfinished = parse(br#"{"type":"session","id":"s1"}"#);
        assert_eq!(unfinished.reply, None);
        assert_eq!(unfinished.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn summaries_show_calls_results_and_retries() {
        let call = json!({"type":"message_end","message":{"role":"assistant","content":[
            {"type":"text","text":"writing"},{"type":"toolCall","name":"bash","arguments":{"command":"ls"}}]}});
        assert_eq!(
            PiCli.summarize(&call),
            Some((
                LogStream::Output,
                "writing\ntool bash: {\"command\":\"ls\"}".into()
            ))
        );
        let result = json!({"type":"tool_execution_end","result":{"content":[{"type":"text","text":"ok"}]},"isError":false});
        assert_eq!(
            PiCli.summarize(&result),
            Some((LogStream::Output, "tool result: ok".into()))
        );
        let retry = json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"errorMessage":"overloaded"});
        assert_eq!(
            PiCli.summarize(&retry),
            Some((LogStream::System, "API retry 1/3: overloaded".into()))
        );
    }
}
