//! Reads the parts of an incoming model request that matching, recording and replies depend on.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::script::Api;

/// The name Claude Code gives the tool that carries the `--json-schema` reply.
pub const STRUCTURED_OUTPUT_TOOL: &str = "StructuredOutput";

/// A model request reduced to what the fake model needs.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestView {
    pub model: Option<String>,
    pub stream: bool,
    /// Client-side conversation id (Claude session id, Codex thread id) when the CLI sends one.
    pub session: Option<String>,
    /// All user-authored text of the conversation so far, joined by newlines.
    pub user_text: String,
    /// The newest user input: the last user message and any tool results after the last
    /// assistant output.
    pub latest_input: String,
    /// Names of offered tools, in the order offered.
    pub tools: Vec<String>,
    /// Names of offered freeform (OpenAI `custom`) tools.
    pub freeform_tools: Vec<String>,
    /// The JSON schema the reply must follow, if the client gave one.
    pub reply_schema: Option<Value>,
    /// The working directory the client reports to the model.
    pub workdir: Option<String>,
}

/// How pi's system prompt names its working directory.
const PI_WORKDIR_PREFIX: &str = "Current working directory: ";

/// Parses an Anthropic Messages request body.
pub(crate) fn anthropic_view(headers: &BTreeMap<String, String>, body: &Value) -> RequestView {
    let session = headers
        .get("x-claude-code-session-id")
        .cloned()
        .or_else(|| {
            let user_id = body.pointer("/metadata/user_id")?.as_str()?;
            let parsed: Value = serde_json::from_str(user_id).ok()?;
            Some(parsed.get("session_id")?.as_str()?.to_owned())
        })
        .filter(|id| !id.is_empty());

    let messages = array(body.get("messages"));
    let mut user_parts = Vec::new();
    for message in messages.iter().filter(|m| role(m) == Some("user")) {
        collect_anthropic_text(message.get("content"), &mut user_parts, false);
    }
    let mut latest = Vec::new();
    if let Some(last) = messages.last().filter(|m| role(m) == Some("user")) {
        collect_anthropic_text(last.get("content"), &mut latest, true);
    }

    let tools = array(body.get("tools"));
    let tool_names: Vec<String> = tools.iter().filter_map(tool_name).collect();
    let reply_schema = tools
        .iter()
        .find(|tool| tool.get("name").and_then(Value::as_str) == Some(STRUCTURED_OUTPUT_TOOL))
        .and_then(|tool| tool.get("input_schema").cloned());

    let user_text = user_parts.join("\n");
    let mut system_text = Vec::new();
    collect_anthropic_text(body.get("system"), &mut system_text, false);
    let system_text = system_text.join("\n");
    let workdir = find_after(&user_text, "Primary working directory: ")
        .or_else(|| find_after(&system_text, "Primary working directory: "))
        .or_else(|| find_after(&system_text, PI_WORKDIR_PREFIX));

    RequestView {
        model: string(body.get("model")),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        session,
        user_text,
        latest_input: latest.join("\n"),
        tools: tool_names,
        freeform_tools: Vec::new(),
        reply_schema,
        workdir,
    }
}

/// Parses an OpenAI Responses request body.
pub(crate) fn openai_view(headers: &BTreeMap<String, String>, body: &Value) -> RequestView {
    let session = headers
        .get("session-id")
        .or_else(|| headers.get("thread-id"))
        .cloned()
        .or_else(|| string(body.get("prompt_cache_key")))
        .filter(|id| !id.is_empty());

    let input = match body.get("input") {
        Some(Value::String(text)) => vec![serde_json::json!({"role": "user", "content": text})],
        other => array(other).to_vec(),
    };
    let mut user_parts = Vec::new();
    for item in input.iter().filter(|item| role(item) == Some("user")) {
        collect_openai_text(item.get("content"), &mut user_parts);
    }
    let last_assistant = input.iter().rposition(is_openai_model_output);
    let mut latest = Vec::new();
    for item in &input[last_assistant.map_or(0, |at| at + 1)..] {
        match item.get("type").and_then(Value::as_str) {
            Some("function_call_output" | "custom_tool_call_output") => {
                collect_openai_text(item.get("output"), &mut latest);
            }
            _ if role(item) == Some("user") => {
                collect_openai_text(item.get("content"), &mut latest)
            }
            _ => {}
        }
    }

    let tools = array(body.get("tools"));
    let tool_names = tools
        .iter()
        .filter_map(|tool| tool_name(tool).or_else(|| string(tool.get("type"))))
        .collect();
    let freeform_tools = tools
        .iter()
        .filter(|tool| tool.get("type").and_then(Value::as_str) == Some("custom"))
        .filter_map(tool_name)
        .collect();
    let reply_schema = body
        .pointer("/text/format")
        .filter(|format| format.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|format| format.get("schema").cloned());

    let user_text = user_parts.join("\n");
    // Pi states its directory in the system prompt (a `system`/`developer` input item, or
    // `instructions`).
    let mut system_text: Vec<String> = string(body.get("instructions")).into_iter().collect();
    for item in input
        .iter()
        .filter(|item| matches!(role(item), Some("system" | "developer")))
    {
        collect_openai_text(item.get("content"), &mut system_text);
    }
    let workdir = find_between(&user_text, "<cwd>", "</cwd>")
        .or_else(|| find_after(&system_text.join("\n"), PI_WORKDIR_PREFIX));
    RequestView {
        model: string(body.get("model")),
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        session,
        user_text,
        latest_input: latest.join("\n"),
        tools: tool_names,
        freeform_tools,
        reply_schema,
        workdir,
    }
}

/// Parses a body for the given protocol.
pub(crate) fn view(api: Api, headers: &BTreeMap<String, String>, body: &Value) -> RequestView {
    match api {
        Api::Anthropic => anthropic_view(headers, body),
        Api::Openai => openai_view(headers, body),
    }
}

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn string(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_owned)
}

fn role(value: &Value) -> Option<&str> {
    value.get("role").and_then(Value::as_str)
}

fn tool_name(tool: &Value) -> Option<String> {
    string(tool.get("name"))
}

/// Collects text from Anthropic content (a string or content blocks); tool results only when
/// `with_tool_results` is set.
fn collect_anthropic_text(content: Option<&Value>, out: &mut Vec<String>, with_tool_results: bool) {
    match content {
        Some(Value::String(text)) => out.push(text.clone()),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => out.extend(string(block.get("text"))),
                    Some("tool_result") if with_tool_results => {
                        collect_anthropic_text(block.get("content"), out, false);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Collects text from OpenAI content (a string or `input_text`/`output_text` parts).
fn collect_openai_text(content: Option<&Value>, out: &mut Vec<String>) {
    match content {
        Some(Value::String(text)) => out.push(text.clone()),
        Some(Value::Array(parts)) => {
            for part in parts {
                out.extend(string(part.get("text")));
            }
        }
        _ => {}
    }
}

fn is_openai_model_output(item: &Value) -> bool {
    role(item) == Some("assistant")
        || matches!(
            item.get("type").and_then(Value::as_str),
            Some("function_call" | "custom_tool_call" | "reasoning")
        )
}

fn find_after(text: &str, prefix: &str) -> Option<String> {
    let start = text.find(prefix)? + prefix.len();
    let rest = &text[start..];
    let line = rest.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

fn find_between(text: &str, open: &str, close: &str) -> Option<String> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    let found = text[start..end].trim();
    (!found.is_empty()).then(|| found.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anthropic_view_reads_session_prompt_tools_schema_and_workdir() {
        let headers = BTreeMap::from([("x-claude-code-session-id".to_owned(), "s-1".to_owned())]);
        let body = json!({
            "model": "claude-x", "stream": true,
            "system": [{"type": "text", "text": "sys"}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "env\n - Primary working directory: /w/ws\n - x"},
                    {"type": "text", "text": "NODE=alpha do it"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "File created"}]}
            ],
            "tools": [{"name": "Write"}, {"name": "StructuredOutput", "input_schema": {"type": "object"}}]
        });
        let view = anthropic_view(&headers, &body);
        assert_eq!(view.session.as_deref(), Some("s-1"));
        assert!(view.user_text.contains("NODE=alpha"));
        assert_eq!(view.latest_input, "File created");
        assert_eq!(view.tools, ["Write", "StructuredOutput"]);
        assert_eq!(view.reply_schema, Some(json!({"type": "object"})));
        assert_eq!(view.workdir.as_deref(), Some("/w/ws"));
        assert!(view.stream);
    }

    #[test]
    fn anthropic_session_falls_back_to_metadata() {
        let body = json!({"metadata": {"user_id": "{\"session_id\":\"abc\"}"}, "messages": []});
        assert_eq!(
            anthropic_view(&BTreeMap::new(), &body).session.as_deref(),
            Some("abc")
        );
    }

    #[test]
    fn openai_view_reads_latest_tool_output_and_schema() {
        let headers = BTreeMap::from([("session-id".to_owned(), "th-1".to_owned())]);
        let body = json!({
            "model": "gpt", "stream": true,
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<cwd>/w/ws</cwd>"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "NODE=beta"}]},
                {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "p"},
                {"type": "custom_tool_call_output", "call_id": "c", "output": "Success"}
            ],
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "custom", "name": "apply_patch"}, {"type": "tool_search"}],
            "text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}
        });
        let view = openai_view(&headers, &body);
        assert_eq!(view.session.as_deref(), Some("th-1"));
        assert!(view.user_text.contains("NODE=beta") && !view.user_text.contains("dev"));
        assert_eq!(view.latest_input, "Success");
        assert_eq!(view.tools, ["exec_command", "apply_patch", "tool_search"]);
        assert_eq!(view.freeform_tools, ["apply_patch"]);
        assert_eq!(view.reply_schema, Some(json!({"type": "object"})));
        assert_eq!(view.workdir.as_deref(), Some("/w/ws"));
    }
}
