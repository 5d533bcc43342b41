//! What the server remembers about every request, so tests can assert what a CLI sent.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::script::Api;

/// One request as received, with the parts tests usually assert on already extracted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    /// Arrival order, starting at 0.
    pub seq: u64,
    /// Milliseconds since the server started.
    pub elapsed_ms: u64,
    /// HTTP method.
    pub method: String,
    /// Path and query as received (e.g. `/v1/messages?beta=true`).
    pub path: String,
    /// Request headers, names lowercased. Repeated headers are joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON; a JSON string when it was not JSON; `null` when empty.
    pub body: Value,
    /// The model protocol, for model requests.
    pub api: Option<Api>,
    /// The `model` field of a model request.
    pub model: Option<String>,
    /// The client's conversation id (Claude session id, Codex thread id), when sent.
    pub session: Option<String>,
    /// All user-authored text of the conversation so far (system reminders included).
    pub user_text: String,
    /// The newest user input: the last user message and tool results after the last assistant
    /// output (e.g. a correction prompt, or `File created successfully…`).
    pub latest_input: String,
    /// Names of the tools offered to the model, in order.
    pub tools: Vec<String>,
    /// The JSON schema the reply must follow (Claude: `StructuredOutput` tool input schema;
    /// Codex: `text.format.schema`).
    pub reply_schema: Option<Value>,
    /// The working directory the client told the model about.
    pub workdir: Option<String>,
    /// The script conversation that answered.
    pub conversation: Option<String>,
    /// The index of the turn that answered, within its conversation.
    pub turn: Option<usize>,
    /// What the server did with the request.
    pub outcome: Outcome,
}

/// What the server did with a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Outcome {
    /// Answered by a scripted reply.
    Replied,
    /// A scripted hang: the request got no (complete) answer.
    Hung,
    /// Answered with a scripted HTTP error status.
    HttpError(u16),
    /// A model request the script could not answer (no matching conversation, no turn left,
    /// failed `expect`, unresolvable block); answered with HTTP 400 and this reason.
    Refused(String),
    /// A known auxiliary endpoint (model list, token counting, health probe, WebSocket upgrade).
    Probe,
    /// An endpoint the server does not know; answered with 404.
    Unknown,
}

impl RecordedRequest {
    /// True when `name` was among the offered tools.
    pub fn offers_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|tool| tool == name)
    }

    /// True for model requests (Messages or Responses calls).
    pub fn is_model_request(&self) -> bool {
        self.api.is_some()
    }

    /// One line describing the request, for logs.
    pub fn summary(&self) -> String {
        let outcome = match &self.outcome {
            Outcome::Replied => "replied".to_owned(),
            Outcome::Hung => "hung".to_owned(),
            Outcome::HttpError(status) => format!("http error {status}"),
            Outcome::Refused(reason) => format!("refused: {reason}"),
            Outcome::Probe => "probe".to_owned(),
            Outcome::Unknown => "unknown endpoint".to_owned(),
        };
        let conversation = match (&self.conversation, self.turn) {
            (Some(name), Some(turn)) => format!(" [{name} #{turn}]"),
            _ => String::new(),
        };
        format!(
            "#{} {} {}{} -> {}",
            self.seq, self.method, self.path, conversation, outcome
        )
    }
}
