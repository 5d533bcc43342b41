//! The script format: which conversations the fake model holds and what it answers on each turn.
//!
//! A [`Script`] is plain serde JSON (see `docs/agent-clis.md` and the crate docs for the format).
//! Each [`Conversation`] is an ordered list of [`Turn`]s; one turn answers exactly one HTTP model
//! request. A turn either replies with content [`Block`]s, hangs, or fails with an HTTP error.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which wire protocol a conversation may be served over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// Anthropic Messages API (`POST /v1/messages`), as spoken by Claude Code.
    Anthropic,
    /// OpenAI Responses API (`POST /v1/responses`), as spoken by Codex.
    Openai,
}

impl Api {
    /// The lowercase name used in scripts and recordings.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::Openai => "openai",
        }
    }
}

/// A whole script: every conversation the server may hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Conversations, in priority order for binding new sessions.
    pub conversations: Vec<Conversation>,
}

/// One scripted conversation: the turns of one agent (one node), matched to CLI sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    /// Unique name, reported in recordings (e.g. the node name).
    pub name: String,
    /// Restrict this conversation to one protocol; `None` serves either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Marker text that must occur in the user text of a session's first request for that
    /// session to be bound to this conversation. Without a marker the conversation binds to the
    /// first otherwise unmatched session and to that one only.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
    /// The turns, answered in order.
    pub turns: Vec<Turn>,
}

/// What the model does for one request. Exactly one of `reply`, `hang`, `http_error` is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Content blocks of the reply, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Vec<Block>>,
    /// Never answer (or stop answering mid-stream), to exercise timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hang: Option<Hang>,
    /// Answer with an HTTP error instead of a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error: Option<HttpError>,
    /// Token usage reported for this response.
    #[serde(default)]
    pub usage: Usage,
    /// Text that must occur in the request's newest user input (its last user message or tool
    /// results); when absent the request is refused with HTTP 400 so the test fails loudly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// How a hanging turn behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hang {
    /// Accept the request and never send a status line.
    NoResponse,
    /// Send the status, headers and the opening stream event, then nothing more.
    MidStream,
}

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpError {
    /// HTTP status, 400..=599.
    pub status: u16,
    /// Provider error type (e.g. `overloaded_error`); a default is derived from the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
}

/// Token usage numbers for one response, put on the wire as given (no arithmetic): Anthropic
/// `input_tokens`, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`;
/// OpenAI `input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens`,
/// `output_tokens_details.reasoning_tokens` (OpenAI counts cached tokens inside `input_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic only).
    pub cache_creation_tokens: u64,
    /// Reasoning tokens included in the output (OpenAI only).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Usage with the given input and output token counts.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }
}

/// One piece of a scripted reply. Strings may contain `{{workdir}}`, replaced by the working
/// directory the CLI reports in its request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    /// Assistant text.
    Text {
        /// The text.
        text: String,
    },
    /// The final structured reply: Claude's `StructuredOutput` tool call, or for Codex the
    /// assistant message whose text is this value as compact JSON.
    Structured {
        /// The value.
        value: Value,
    },
    /// Create (or overwrite) a file, relative paths being relative to the working directory:
    /// Claude's `Write` tool; for Codex `apply_patch` when offered, else a shell command.
    WriteFile {
        /// File path, absolute or relative to the working directory.
        path: String,
        /// Full file content.
        content: String,
    },
    /// Run a shell command: Claude's `Bash` tool; Codex's `exec_command` (or `shell`).
    Shell {
        /// The command line, run by a shell in the working directory.
        command: String,
    },
    /// A JSON tool call by exact name (Anthropic `tool_use`, OpenAI `function_call`).
    ToolCall {
        /// Tool name as offered by the CLI.
        name: String,
        /// Tool input object.
        input: Value,
    },
    /// An OpenAI freeform (custom) tool call such as Codex's `apply_patch`.
    CustomToolCall {
        /// Tool name as offered by the CLI.
        name: String,
        /// Raw tool input text.
        input: String,
    },
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text { text: text.into() }
    }

    /// A structured final reply.
    pub fn structured(value: Value) -> Self {
        Block::Structured { value }
    }

    /// A file write.
    pub fn write_file(path: impl Into<String>, content: impl Into<String>) -> Self {
        Block::WriteFile {
            path: path.into(),
            content: content.into(),
        }
    }

    /// A shell command.
    pub fn shell(command: impl Into<String>) -> Self {
        Block::Shell {
            command: command.into(),
        }
    }

    /// A JSON tool call by name.
    pub fn tool_call(name: impl Into<String>, input: Value) -> Self {
        Block::ToolCall {
            name: name.into(),
            input,
        }
    }

    /// A freeform tool call by name.
    pub fn custom_tool_call(name: impl Into<String>, input: impl Into<String>) -> Self {
        Block::CustomToolCall {
            name: name.into(),
            input: input.into(),
        }
    }

    /// True when the block asks the client to run a tool (and so to call the model again).
    pub fn is_tool_use(&self) -> bool {
        !matches!(self, Block::Text { .. })
    }
}

impl Turn {
    /// A turn replying with the given blocks.
    pub fn reply(blocks: Vec<Block>) -> Self {
        Turn {
            reply: Some(blocks),
            ..Turn::default()
        }
    }

    /// A turn that hangs.
    pub fn hang(hang: Hang) -> Self {
        Turn {
            hang: Some(hang),
            ..Turn::default()
        }
    }

    /// A turn answering with an HTTP error.
    pub fn http_error(status: u16, message: impl Into<String>) -> Self {
        Turn {
            http_error: Some(HttpError {
                status,
                error_type: None,
                message: message.into(),
            }),
            ..Turn::default()
        }
    }

    /// Sets the reported token usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Requires the newest user input of the request to contain `text`.
    pub fn expecting(mut self, text: impl Into<String>) -> Self {
        self.expect = Some(text.into());
        self
    }

    /// Delays the answer.
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = Some(delay_ms);
        self
    }
}

impl Conversation {
    /// An empty conversation with the given name.
    pub fn new(name: impl Into<String>) -> Self {
        Conversation {
            name: name.into(),
            api: None,
            marker: None,
            turns: Vec::new(),
        }
    }

    /// Binds only sessions whose first request contains `marker`.
    pub fn matching(mut self, marker: impl Into<String>) -> Self {
        self.marker = Some(marker.into());
        self
    }

    /// Restricts the conversation to one protocol.
    pub fn on_api(mut self, api: Api) -> Self {
        self.api = Some(api);
        self
    }

    /// Appends a turn.
    pub fn turn(mut self, turn: Turn) -> Self {
        self.turns.push(turn);
        self
    }
}

/// Why a script was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The JSON does not have the script shape.
    #[error("script is not valid JSON of the expected shape: {0}")]
    Parse(#[from] serde_json::Error),
    /// The shape is right but the content is inconsistent.
    #[error("invalid script: {0}")]
    Invalid(String),
}

impl Script {
    /// A script with the given conversations.
    pub fn new(conversations: Vec<Conversation>) -> Self {
        Script { conversations }
    }

    /// Parses and validates a script from JSON text.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let script: Script = serde_json::from_str(text)?;
        script.validate()?;
        Ok(script)
    }

    /// Reads, parses and validates a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Script::from_json(&text)
    }

    /// Checks the rules serde cannot express.
    pub fn validate(&self) -> Result<(), ScriptError> {
        let mut names = BTreeSet::new();
        for conversation in &self.conversations {
            let name = &conversation.name;
            if name.is_empty() {
                return Err(ScriptError::Invalid(
                    "a conversation has an empty name".into(),
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(ScriptError::Invalid(format!(
                    "duplicate conversation {name:?}"
                )));
            }
            if conversation.marker.as_deref() == Some("") {
                return Err(ScriptError::Invalid(format!(
                    "conversation {name:?}: empty match"
                )));
            }
            if conversation.turns.is_empty() {
                return Err(ScriptError::Invalid(format!(
                    "conversation {name:?} has no turns"
                )));
            }
            for (index, turn) in conversation.turns.iter().enumerate() {
                validate_turn(turn).map_err(|why| {
                    ScriptError::Invalid(format!("conversation {name:?} turn {index}: {why}"))
                })?;
            }
        }
        Ok(())
    }
}

fn validate_turn(turn: &Turn) -> Result<(), String> {
    let kinds = [
        turn.reply.is_some(),
        turn.hang.is_some(),
        turn.http_error.is_some(),
    ];
    if kinds.iter().filter(|set| **set).count() != 1 {
        return Err("exactly one of reply, hang, http_error must be given".into());
    }
    if let Some(blocks) = &turn.reply {
        if blocks.is_empty() {
            return Err("reply has no blocks".into());
        }
        for block in blocks {
            match block {
                Block::ToolCall { input, .. } if !input.is_object() => {
                    return Err("tool_call input must be a JSON object".into());
                }
                Block::ToolCall { name, .. } | Block::CustomToolCall { name, .. }
                    if name.is_empty() =>
                {
                    return Err("tool name is empty".into());
                }
                Block::WriteFile { path, .. } if path.is_empty() => {
                    return Err("write_file path is empty".into());
                }
                _ => {}
            }
        }
    }
    if let Some(error) = &turn.http_error
        && !(400..=599).contains(&error.status)
    {
        return Err(format!(
            "http_error status {} is not 400..=599",
            error.status
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_documented_shape() {
        let text = r#"{
          "conversations": [
            {"name": "writer", "api": "anthropic", "match": "node: writer", "turns": [
              {"reply": [{"type": "write_file", "path": "out.txt", "content": "hi\n"}],
               "usage": {"input_tokens": 100, "output_tokens": 20}},
              {"reply": [{"type": "structured", "value": {"response": 1}}], "expect": "File created"},
              {"hang": "mid_stream"},
              {"http_error": {"status": 529, "message": "busy"}, "delay_ms": 10}
            ]}
          ]
        }"#;
        let script = Script::from_json(text).unwrap();
        let writer = &script.conversations[0];
        assert_eq!(writer.api, Some(Api::Anthropic));
        assert_eq!(writer.marker.as_deref(), Some("node: writer"));
        assert_eq!(writer.turns[0].usage, Usage::new(100, 20));
        assert_eq!(
            writer.turns[1].reply,
            Some(vec![Block::structured(json!({"response": 1}))])
        );
        assert_eq!(writer.turns[2].hang, Some(Hang::MidStream));
        assert_eq!(
            writer.turns[3].http_error.as_ref().map(|e| e.status),
            Some(529)
        );
        let round_trip = serde_json::to_string(&script).unwrap();
        assert_eq!(Script::from_json(&round_trip).unwrap(), script);
    }

    #[test]
    fn rejects_unknown_fields_and_inconsistent_turns() {
        let unknown = r#"{"conversations": [{"name": "a", "turns": [{"reply": [{"type": "text", "text": "x", "extra": 1}]}]}]}"#;
        assert!(matches!(
            Script::from_json(unknown),
            Err(ScriptError::Parse(_))
        ));
        let both = r#"{"conversations": [{"name": "a", "turns": [{"reply": [{"type": "text", "text": "x"}], "hang": "no_response"}]}]}"#;
        assert!(matches!(
            Script::from_json(both),
            Err(ScriptError::Invalid(_))
        ));
        let duplicate = Script::new(vec![
            Conversation::new("a").turn(Turn::hang(Hang::NoResponse)),
            Conversation::new("a").turn(Turn::hang(Hang::NoResponse)),
        ]);
        assert!(duplicate.validate().is_err());
        let bad_status = Script::new(vec![
            Conversation::new("a").turn(Turn::http_error(200, "x")),
        ]);
        assert!(bad_status.validate().is_err());
        let no_turns = Script::new(vec![Conversation::new("a")]);
        assert!(no_turns.validate().is_err());
    }
}
