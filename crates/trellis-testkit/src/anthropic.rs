//! Encodes scripted outputs as Anthropic Messages API responses (streamed or whole).

use serde_json::{Value, json};

use crate::resolve::Output;
use crate::script::Usage;
use crate::sse::{SseEvent, chunks};

/// Identity of one response: ids are derived from the request sequence number so they are
/// unique per server and deterministic per run.
pub(crate) struct Reply<'a> {
    pub seq: u64,
    pub model: &'a str,
    pub outputs: &'a [Output],
    pub usage: Usage,
}

impl Reply<'_> {
    fn message_id(&self) -> String {
        format!("msg_tk_{:06}", self.seq)
    }

    fn tool_id(&self, index: usize) -> String {
        format!("toolu_tk_{:06}_{index}", self.seq)
    }

    fn stop_reason(&self) -> &'static str {
        if self.outputs.iter().any(Output::is_tool_call) {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn usage_json(&self, output_tokens: u64) -> Value {
        json!({
            "input_tokens": self.usage.input_tokens,
            "cache_creation_input_tokens": self.usage.cache_creation_tokens,
            "cache_read_input_tokens": self.usage.cache_read_tokens,
            "output_tokens": output_tokens,
        })
    }

    /// The `message_start` event, also the only event a mid-stream hang sends.
    pub(crate) fn opening(&self) -> Vec<SseEvent> {
        let message = json!({
            "id": self.message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": self.usage_json(0),
        });
        vec![
            SseEvent::new(
                "message_start",
                json!({"type": "message_start", "message": message}),
            ),
            SseEvent::new("ping", json!({"type": "ping"})),
        ]
    }

    /// The whole event stream for the reply.
    pub(crate) fn events(&self) -> Vec<SseEvent> {
        let mut events = self.opening();
        for (index, output) in self.outputs.iter().enumerate() {
            let (start, deltas) = match output {
                Output::Text(text) => (
                    json!({"type": "text", "text": ""}),
                    chunks(text, 3)
                        .into_iter()
                        .map(|piece| json!({"type": "text_delta", "text": piece}))
                        .collect::<Vec<_>>(),
                ),
                Output::Call { name, input } => (
                    json!({"type": "tool_use", "id": self.tool_id(index), "name": name, "input": {}}),
                    chunks(&input.to_string(), 2)
                        .into_iter()
                        .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
                        .collect(),
                ),
                // Resolution never produces freeform calls for this protocol.
                Output::Custom { .. } => continue,
            };
            events.push(SseEvent::new(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            for delta in deltas {
                events.push(SseEvent::new(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            events.push(SseEvent::new(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.push(SseEvent::new(
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                "usage": self.usage_json(self.usage.output_tokens),
            }),
        ));
        events.push(SseEvent::new(
            "message_stop",
            json!({"type": "message_stop"}),
        ));
        events
    }

    /// The whole response for a non-streaming request.
    pub(crate) fn message(&self) -> Value {
        let content: Vec<Value> = self
            .outputs
            .iter()
            .enumerate()
            .filter_map(|(index, output)| match output {
                Output::Text(text) => Some(json!({"type": "text", "text": text})),
                Output::Call { name, input } => Some(
                    json!({"type": "tool_use", "id": self.tool_id(index), "name": name, "input": input}),
                ),
                Output::Custom { .. } => None,
            })
            .collect();
        json!({
            "id": self.message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": self.usage_json(self.usage.output_tokens),
        })
    }
}

/// An Anthropic error body.
pub(crate) fn error_body(status: u16, error_type: Option<&str>, message: &str) -> Value {
    let default_type = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({
        "type": "error",
        "error": {"type": error_type.unwrap_or(default_type), "message": message},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_carries_text_and_tool_json_in_deltas() {
        let outputs = [
            Output::Text("hello".into()),
            Output::Call {
                name: "Write".into(),
                input: json!({"file_path": "/a"}),
            },
        ];
        let reply = Reply {
            seq: 7,
            model: "m",
            outputs: &outputs,
            usage: Usage::new(10, 4),
        };
        let events = reply.events();
        let names: Vec<_> = events.iter().map(|e| e.name).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let text: String = events
            .iter()
            .filter_map(|e| e.data.pointer("/delta/text").and_then(Value::as_str))
            .collect();
        assert_eq!(text, "hello");
        let json_text: String = events
            .iter()
            .filter_map(|e| {
                e.data
                    .pointer("/delta/partial_json")
                    .and_then(Value::as_str)
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&json_text).unwrap(),
            json!({"file_path": "/a"})
        );
        let delta = events.iter().find(|e| e.name == "message_delta").unwrap();
        assert_eq!(delta.data["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta.data["usage"]["output_tokens"], 4);
        assert_eq!(events[0].data["message"]["usage"]["input_tokens"], 10);
        assert_eq!(events[0].data["message"]["id"], "msg_tk_000007");
    }

    #[test]
    fn whole_message_and_errors() {
        let outputs = [Output::Text("hi".into())];
        let reply = Reply {
            seq: 1,
            model: "m",
            outputs: &outputs,
            usage: Usage::default(),
        };
        assert_eq!(
            reply.message()["content"],
            json!([{"type": "text", "text": "hi"}])
        );
        assert_eq!(reply.message()["stop_reason"], "end_turn");
        assert_eq!(
            error_body(529, None, "x")["error"]["type"],
            "overloaded_error"
        );
    }
}
