//! What every agent CLI adapter provides to the shared turn loop: its invocation for one turn,
//! a one-line summary of each event it prints, and the facts of a finished turn.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use trellis_process::{BoxFuture, LINE_CUT_MARKER, ProcessObserver, Stream};

use crate::access::LaneAccess;
use crate::binding::AgentBinding;
use crate::failure::ProviderFailureKind;
use crate::forward::{LogForwarder, truncate};
use crate::harness::{ExecutionRequest, LogStream, TokenUsage};
use crate::lane::{HarnessKind, Provider};
use crate::policy::UserPolicy;
use crate::reply::RawReply;
use crate::schema::SchemaDialect;

/// Longest stdout event read whole; the rest of a longer line is dropped.
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// Longest excerpt of tool input or output shown in a progress line.
pub(crate) const EXCERPT_BYTES: usize = 300;

/// Everything fixed for one execution.
pub(crate) struct Launch<'a> {
    pub request: &'a ExecutionRequest,
    pub binding: &'a AgentBinding,
    pub provider: Provider,
    pub access: &'a LaneAccess,
    /// `HOME` for the CLI.
    pub home: PathBuf,
    /// Whether `home` is private to this session (else it is the user's real home).
    pub private_home: bool,
    /// The reply schema, in the CLI's dialect.
    pub schema: &'a Value,
    /// Where the schema was written, for CLIs that take a file.
    pub schema_file: PathBuf,
    /// Whether every turn runs in a Trellis sandbox, which makes the CLI's own sandbox and
    /// approvals redundant (Trellis is the boundary).
    pub contained: bool,
    /// The user's own permission policy for the CLI (empty when contained): respected.
    pub policy: UserPolicy,
}

impl Launch<'_> {
    pub fn is_verifier(&self) -> bool {
        self.request.contract.is_verifier()
    }

    /// The model, or `None` for the CLI's default.
    pub fn model(&self) -> Option<&str> {
        Some(self.binding.model.as_str()).filter(|m| !m.is_empty())
    }
}

/// One turn: a prompt, in a new session or continuing one.
pub(crate) struct Turn<'a> {
    pub prompt: &'a str,
    pub resume: Option<&'a str>,
}

/// Arguments and lane variables of one CLI run.
pub(crate) struct Invocation {
    pub args: Vec<String>,
    /// Variables the CLI needs beyond the common base; they win over declared connections.
    pub env: Vec<(String, String)>,
}

/// What a finished turn printed.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// JSON events parsed from stdout.
    pub events: usize,
    pub session_id: Option<String>,
    /// A second, different session id in the same turn.
    pub conflicting_session: Option<String>,
    pub reply: Option<RawReply>,
    /// Per-turn usage, or the session's running total when the CLI reports it cumulatively.
    pub usage: Option<TokenUsage>,
    /// A failure the CLI reported from the provider.
    pub provider_error: Option<String>,
    /// What kind of failure the CLI's structured fields said it was (an error kind, a status).
    pub failure_hint: Option<ProviderFailureKind>,
    /// The CLI could not find the session it was asked to resume; why.
    pub session_lost: Option<String>,
}

impl Transcript {
    pub fn note_session(&mut self, id: &str) {
        match &self.session_id {
            None => self.session_id = Some(id.to_owned()),
            Some(known) if known != id => self.conflicting_session = Some(id.to_owned()),
            Some(_) => {}
        }
    }
}

/// One agent CLI's side of the turn loop.
pub(crate) trait CliProtocol: Send + Sync {
    fn kind(&self) -> HarnessKind;
    /// The name used in provider-failure diagnostics ("Claude provider failure: …").
    fn label(&self) -> &'static str;
    fn dialect(&self) -> SchemaDialect;
    /// Whether usage figures are running totals of the session rather than per turn.
    fn usage_is_cumulative(&self) -> bool;
    /// Whether the reply schema must be written to `Launch::schema_file`.
    fn needs_schema_file(&self) -> bool {
        false
    }
    /// Names the lane controls, which declared connections may not set.
    fn reserved(&self, name: &str, provider: Provider) -> bool;
    /// Declared connections the adapter reads itself instead of passing them to the CLI.
    fn consumes(&self, _name: &str) -> bool {
        false
    }
    /// The user's own configuration variables (of [`crate::access::AGENT_CONFIG_ENV`]) this
    /// CLI keeps on `provider`'s lane, from the execution's base environment.
    fn user_config(&self, _provider: Provider) -> &'static [&'static str] {
        &[]
    }
    /// Creates whatever the CLI needs inside a private home.
    fn prepare_home(&self, _home: &Path) -> std::io::Result<()> {
        Ok(())
    }
    fn invocation(&self, launch: &Launch<'_>, turn: &Turn<'_>) -> Result<Invocation, String>;
    /// A one-line summary of one stdout event, if it is worth showing.
    fn summarize(&self, event: &Value) -> Option<(LogStream, String)>;
    /// A fresh reader of one turn's events.
    fn parser(&self) -> Box<dyn TurnParser>;
    /// Adds what the CLI left outside its event stream (files) to a finished turn.
    fn complete(&self, _launch: &Launch<'_>, _turn: &Turn<'_>, _transcript: &mut Transcript) {}
}

/// Reads one turn's stdout events as they arrive.
pub(crate) trait TurnParser: Send {
    fn event(&mut self, event: &Value);
    /// The facts of the finished turn.
    fn finish(self: Box<Self>) -> Transcript;
}

/// Feeds every JSON line of `stdout` to `parser` (for tests of the parsers).
#[cfg(test)]
pub(crate) fn parse_all(mut parser: Box<dyn TurnParser>, stdout: &[u8]) -> Transcript {
    for event in json_lines(stdout) {
        parser.event(&event);
    }
    parser.finish()
}

/// Parses each non-empty stdout line that is a JSON object.
#[cfg(test)]
pub(crate) fn json_lines(stdout: &[u8]) -> impl Iterator<Item = Value> + '_ {
    stdout
        .split(|&b| b == b'\n')
        .filter(|line| line.iter().any(|b| !b.is_ascii_whitespace()))
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter(Value::is_object)
}

/// A string field, or "".
pub(crate) fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An unsigned counter field, or 0.
pub(crate) fn count(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Compact JSON of `value`, cut to [`EXCERPT_BYTES`].
pub(crate) fn excerpt(value: &Value) -> String {
    match value {
        Value::String(s) => truncate(s, EXCERPT_BYTES),
        other => truncate(&other.to_string(), EXCERPT_BYTES),
    }
}

/// A TOML string for a `-c key=value` override (JSON string syntax is valid TOML).
pub(crate) fn toml_string(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
}

/// The child environment: declared connections, then the base, then the lane's variables; a
/// later source replaces an earlier one of the same name.
pub(crate) fn merge_env(layers: [Vec<(String, String)>; 3]) -> Vec<(String, String)> {
    let mut env = BTreeMap::new();
    for layer in layers {
        env.extend(layer);
    }
    env.into_iter().collect()
}

/// Forwards a running turn — stdout events as summaries, stderr as errors, silence
/// warnings — and feeds every event to the turn's parser.
pub(crate) struct TurnObserver<'a> {
    pub forwarder: &'a mut LogForwarder,
    pub protocol: &'a dyn CliProtocol,
    pub parser: Box<dyn TurnParser>,
}

impl ProcessObserver for TurnObserver<'_> {
    fn started(&mut self, pid: u32) {
        self.forwarder.started(pid);
    }

    fn line(&mut self, stream: Stream, line: &str) {
        if stream == Stream::Stderr {
            self.forwarder.line(stream, line);
            return;
        }
        if line.trim().is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(event) if event.is_object() => {
                if let Some((stream, message)) = self.protocol.summarize(&event) {
                    self.forwarder.emit(stream, &message);
                }
                self.parser.event(&event);
            }
            _ if line.starts_with('{') && line.ends_with(LINE_CUT_MARKER) => {
                self.forwarder.system(format!(
                    "an event longer than {} bytes was skipped",
                    MAX_EVENT_BYTES
                ));
            }
            // Plain text is shown as it is.
            _ => self.forwarder.emit(LogStream::Output, line),
        }
    }

    fn silent(&mut self, quiet_for: Duration) {
        self.forwarder.silent(quiet_for);
    }

    fn delivered(&mut self) -> BoxFuture<'_, ()> {
        self.forwarder.delivered()
    }
}

/// Field-wise `current - previous`, for CLIs reporting running totals.
pub(crate) fn usage_increment(current: &TokenUsage, previous: &TokenUsage) -> TokenUsage {
    TokenUsage {
        input_tokens: current.input_tokens.saturating_sub(previous.input_tokens),
        output_tokens: current.output_tokens.saturating_sub(previous.output_tokens),
        cache_read_tokens: current
            .cache_read_tokens
            .saturating_sub(previous.cache_read_tokens),
        cache_write_tokens: current
            .cache_write_tokens
            .saturating_sub(previous.cache_write_tokens),
        cost_usd: match (current.cost_usd, previous.cost_usd) {
            (Some(now), before) => Some((now - before.unwrap_or(0.0)).max(0.0)),
            (None, _) => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_totals_become_increments() {
        let before = TokenUsage {
            input_tokens: 300,
            output_tokens: 50,
            cache_read_tokens: 40,
            cache_write_tokens: 0,
            cost_usd: None,
        };
        let now = TokenUsage {
            input_tokens: 1300,
            output_tokens: 80,
            cache_read_tokens: 40,
            cache_write_tokens: 5,
            cost_usd: None,
        };
        assert_eq!(
            usage_increment(&now, &before),
            TokenUsage {
                input_tokens: 1000,
                output_tokens: 30,
                cache_read_tokens: 0,
                cache_write_tokens: 5,
                cost_usd: None
            }
        );
    }

    #[test]
    fn later_env_layers_win() {
        let env = merge_env([
            vec![("A".into(), "declared".into()), ("B".into(), "b".into())],
            vec![("A".into(), "base".into())],
            vec![("C".into(), "lane".into())],
        ]);
        assert_eq!(
            env,
            vec![
                ("A".to_owned(), "base".to_owned()),
                ("B".to_owned(), "b".to_owned()),
                ("C".to_owned(), "lane".to_owned())
            ]
        );
    }

    #[test]
    fn json_lines_skip_noise() {
        let events: Vec<Value> = json_lines(b"{\"a\":1}\n\nnot json\n[1]\n{\"b\":2}").collect();
        assert_eq!(events.len(), 2);
    }
}
