//! Encodes scripted outputs as OpenAI Responses API responses (streamed or whole).

use serde_json::{Value, json};

use crate::resolve::Output;
use crate::script::Usage;
use crate::sse::{SseEvent, chunks};

/// Identity of one response; ids derive from the request sequence number.
pub(crate) struct Reply<'a> {
    pub seq: u64,
    pub model: &'a str,
    pub outputs: &'a [Output],
    pub usage: Usage,
    pub created_at: u64,
}

impl Reply<'_> {
    fn response(&self, status: &str, output: Vec<Value>, usage: Option<Value>) -> Value {
        json!({
            "id": format!("resp_tk_{:06}", self.seq),
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
        })
    }

    fn usage_json(&self) -> Value {
        let usage = self.usage;
        json!({
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        })
    }

    /// The finished output item for one output.
    fn item(&self, index: usize, output: &Output) -> Value {
        let suffix = format!("{:06}_{index}", self.seq);
        match output {
            Output::Text(text) => json!({
                "id": format!("msg_tk_{suffix}"),
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }),
            Output::Call { name, input } => json!({
                "id": format!("fc_tk_{suffix}"),
                "type": "function_call",
                "status": "completed",
                "call_id": format!("call_tk_{suffix}"),
                "name": name,
                "arguments": input.to_string(),
            }),
            Output::Custom { name, input } => json!({
                "id": format!("ctc_tk_{suffix}"),
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": format!("call_tk_{suffix}"),
                "name": name,
                "input": input,
            }),
        }
    }

    /// `response.created`, also the only event a mid-stream hang sends.
    pub(crate) fn opening(&self) -> Vec<SseEvent> {
        let response = self.response("in_progress", Vec::new(), None);
        vec![SseEvent::new(
            "response.created",
            json!({"type": "response.created", "response": response}),
        )]
    }

    /// The whole event stream for the reply.
    pub(crate) fn events(&self) -> Vec<SseEvent> {
        let mut events = self.opening();
        let in_progress = self.response("in_progress", Vec::new(), None);
        events.push(SseEvent::new(
            "response.in_progress",
            json!({"type": "response.in_progress", "response": in_progress}),
        ));
        let mut done_items = Vec::new();
        for (index, output) in self.outputs.iter().enumerate() {
            let done = self.item(index, output);
            let item_id = done["id"].clone();
            let mut added = done.clone();
            added["status"] = json!("in_progress");
            match output {
                Output::Text(_) => added["content"] = json!([]),
                Output::Call { .. } => added["arguments"] = json!(""),
                Output::Custom { .. } => added["input"] = json!(""),
            }
            events.push(SseEvent::new(
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            ));
            self.push_deltas(&mut events, index, &item_id, output);
            events.push(SseEvent::new(
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": index, "item": done}),
            ));
            done_items.push(done);
        }
        let completed = self.response("completed", done_items, Some(self.usage_json()));
        events.push(SseEvent::new(
            "response.completed",
            json!({"type": "response.completed", "response": completed}),
        ));
        for (number, event) in events.iter_mut().enumerate() {
            event.data["sequence_number"] = json!(number);
        }
        events
    }

    fn push_deltas(
        &self,
        events: &mut Vec<SseEvent>,
        index: usize,
        item_id: &Value,
        output: &Output,
    ) {
        let at = |extra: Value| {
            let mut data = json!({"item_id": item_id, "output_index": index});
            if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
                data.extend(extra.clone());
            }
            data
        };
        match output {
            Output::Text(text) => {
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                events.push(SseEvent::new(
                    "response.content_part.added",
                    at(json!({"type": "response.content_part.added", "content_index": 0, "part": part})),
                ));
                for piece in chunks(text, 3) {
                    events.push(SseEvent::new(
                        "response.output_text.delta",
                        at(json!({"type": "response.output_text.delta", "content_index": 0, "delta": piece})),
                    ));
                }
                events.push(SseEvent::new(
                    "response.output_text.done",
                    at(json!({"type": "response.output_text.done", "content_index": 0, "text": text})),
                ));
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                events.push(SseEvent::new(
                    "response.content_part.done",
                    at(json!({"type": "response.content_part.done", "content_index": 0, "part": part})),
                ));
            }
            Output::Call { input, .. } => {
                let arguments = input.to_string();
                for piece in chunks(&arguments, 2) {
                    events.push(SseEvent::new(
                        "response.function_call_arguments.delta",
                        at(json!({"type": "response.function_call_arguments.delta", "delta": piece})),
                    ));
                }
                events.push(SseEvent::new(
                    "response.function_call_arguments.done",
                    at(json!({"type": "response.function_call_arguments.done", "arguments": arguments})),
                ));
            }
            Output::Custom { input, .. } => {
                for piece in chunks(input, 2) {
                    events.push(SseEvent::new(
                        "response.custom_tool_call_input.delta",
                        at(json!({"type": "response.custom_tool_call_input.delta", "delta": piece})),
                    ));
                }
                events.push(SseEvent::new(
                    "response.custom_tool_call_input.done",
                    at(json!({"type": "response.custom_tool_call_input.done", "input": input})),
                ));
            }
        }
    }

    /// The whole response for a non-streaming request.
    pub(crate) fn whole(&self) -> Value {
        let items = self
            .outputs
            .iter()
            .enumerate()
            .map(|(index, output)| self.item(index, output))
            .collect();
        self.response("completed", items, Some(self.usage_json()))
    }
}

/// An OpenAI error body.
pub(crate) fn error_body(status: u16, error_type: Option<&str>, message: &str) -> Value {
    let default_type = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_exceeded",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    };
    json!({
        "error": {
            "message": message,
            "type": error_type.unwrap_or(default_type),
            "param": null,
            "code": null,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_has_items_deltas_and_usage() {
        let outputs = [
            Output::Custom {
                name: "apply_patch".into(),
                input: "*** Begin Patch\n".into(),
            },
            Output::Text("{\"ok\":true}".into()),
        ];
        let reply = Reply {
            seq: 3,
            model: "m",
            outputs: &outputs,
            usage: Usage {
                cache_read_tokens: 2,
                ..Usage::new(10, 5)
            },
            created_at: 0,
        };
        let events = reply.events();
        let names: Vec<_> = events.iter().map(|e| e.name).collect();
        assert_eq!(names[0], "response.created");
        assert_eq!(names.last(), Some(&"response.completed"));
        let text: String = events
            .iter()
            .filter(|e| e.name == "response.output_text.delta")
            .filter_map(|e| e.data["delta"].as_str())
            .collect();
        assert_eq!(text, "{\"ok\":true}");
        let done: Vec<_> = events
            .iter()
            .filter(|e| e.name == "response.output_item.done")
            .map(|e| e.data["item"]["type"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(done, ["custom_tool_call", "message"]);
        let completed = &events.last().unwrap().data["response"];
        assert_eq!(completed["usage"]["input_tokens"], 10);
        assert_eq!(
            completed["usage"]["input_tokens_details"]["cached_tokens"],
            2
        );
        assert_eq!(completed["output"].as_array().map(Vec::len), Some(2));
        let numbers: Vec<_> = events
            .iter()
            .map(|e| e.data["sequence_number"].clone())
            .collect();
        assert_eq!(numbers[1], json!(1));
    }

    #[test]
    fn function_call_item_has_json_arguments() {
        let outputs = [Output::Call {
            name: "exec_command".into(),
            input: json!({"cmd": "ls"}),
        }];
        let reply = Reply {
            seq: 1,
            model: "m",
            outputs: &outputs,
            usage: Usage::default(),
            created_at: 0,
        };
        let whole = reply.whole();
        assert_eq!(whole["output"][0]["arguments"], "{\"cmd\":\"ls\"}");
        assert_eq!(whole["output"][0]["call_id"], "call_tk_000001_0");
        assert_eq!(error_body(503, None, "x")["error"]["type"], "server_error");
    }
}
