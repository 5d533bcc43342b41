//! Server-sent event framing shared by both protocols.

use serde_json::Value;

/// One server-sent event: a name and a JSON payload.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    pub name: &'static str,
    pub data: Value,
}

impl SseEvent {
    pub(crate) fn new(name: &'static str, data: Value) -> Self {
        SseEvent { name, data }
    }

    /// The wire form: `event:` and `data:` lines followed by a blank line.
    pub(crate) fn encode(&self) -> String {
        format!("event: {}\ndata: {}\n\n", self.name, self.data)
    }
}

/// Encodes a sequence of events into one body.
pub(crate) fn encode_all(events: &[SseEvent]) -> String {
    events.iter().map(SseEvent::encode).collect()
}

/// Splits text into up to `parts` non-empty pieces on character boundaries, so clients see
/// more than one delta and must concatenate them. Empty text yields no pieces.
pub(crate) fn chunks(text: &str, parts: usize) -> Vec<&str> {
    let count = text.chars().count();
    if count == 0 {
        return Vec::new();
    }
    let size = count.div_ceil(parts.max(1));
    let mut pieces = Vec::new();
    let mut start = 0;
    for (seen, (offset, _)) in text.char_indices().enumerate() {
        if seen > 0 && seen % size == 0 {
            pieces.push(&text[start..offset]);
            start = offset;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_text_on_char_boundaries() {
        assert_eq!(chunks("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(chunks("héllo", 2), ["hél", "lo"]);
        assert_eq!(chunks("a", 3), ["a"]);
        assert!(chunks("", 3).is_empty());
    }

    #[test]
    fn events_are_framed_with_name_and_data() {
        let event = SseEvent::new("ping", serde_json::json!({"type": "ping"}));
        assert_eq!(event.encode(), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }
}
