//! Log lines: which stream they come from, how severe they are, and the one bounding policy
//! every writer applies (control characters become visible escapes, text longer than
//! [`MAX_LOG_MESSAGE_BYTES`] is cut with a marker).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Longest log message in UTF-8 bytes, after escaping; longer ones are truncated.
pub const MAX_LOG_MESSAGE_BYTES: usize = 16 * 1024;

/// Which stream a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    /// A worker's ordinary output.
    Output,
    /// A worker's error stream.
    Error,
    /// A note by Trellis itself.
    System,
}

impl LogStream {
    /// The level a line of this stream gets unless the caller knows better.
    pub fn default_level(self) -> LogLevel {
        match self {
            Self::Output => LogLevel::Info,
            Self::Error => LogLevel::Error,
            Self::System => LogLevel::Debug,
        }
    }
}

/// Severity of a log line, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    /// Whether this level is at least as severe as `threshold`.
    pub fn at_least(self, threshold: LogLevel) -> bool {
        self.rank() >= threshold.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Self::Error => 3,
            Self::Warn => 2,
            Self::Info => 1,
            Self::Debug => 0,
        }
    }
}

/// Rewrites `text` so it is safe to store and print: control characters and bidirectional
/// overrides become visible escapes (`\n`, `\t`, `\u{1b}`, …) and text longer than
/// [`MAX_LOG_MESSAGE_BYTES`] is cut at a character boundary and ends with a truncation marker.
///
/// The function is idempotent, so already-clean messages pass through unchanged.
pub fn sanitize_log_message(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len().min(MAX_LOG_MESSAGE_BYTES));
    for c in text.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
            }
            c => escaped.push(c),
        }
        // Escaping can only grow the text, so stop early on enormous inputs; the marker below
        // reports the size of what we saw, which is at least the limit.
        if escaped.len() > MAX_LOG_MESSAGE_BYTES.saturating_mul(2) {
            break;
        }
    }
    bound_log_message(escaped)
}

/// Cuts `text` to at most [`MAX_LOG_MESSAGE_BYTES`] at a character boundary, ending it with a
/// truncation marker when anything was cut. Every writer of log lines bounds them with this.
pub fn bound_log_message(mut text: String) -> String {
    if text.len() <= MAX_LOG_MESSAGE_BYTES {
        return text;
    }
    let marker = format!(" …[truncated, over {MAX_LOG_MESSAGE_BYTES} bytes]");
    let mut cut = MAX_LOG_MESSAGE_BYTES.saturating_sub(marker.len());
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&marker);
    text
}

/// Control characters plus the invisible bidirectional controls that can reorder a terminal line.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(sanitize_log_message("a\nb\tc\r"), "a\\nb\\tc\\r");
        assert_eq!(sanitize_log_message("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(sanitize_log_message("nul\0"), "nul\\u{0}");
        assert_eq!(sanitize_log_message("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(sanitize_log_message("plain ünïcode ✓"), "plain ünïcode ✓");
    }

    #[test]
    fn long_messages_are_truncated_with_a_marker_at_a_char_boundary() {
        let long = "é".repeat(MAX_LOG_MESSAGE_BYTES);
        let clean = sanitize_log_message(&long);
        assert!(clean.len() <= MAX_LOG_MESSAGE_BYTES);
        assert!(clean.ends_with(&format!("[truncated, over {MAX_LOG_MESSAGE_BYTES} bytes]")));
        assert!(clean.starts_with("éé"));
    }

    #[test]
    fn sanitizing_is_idempotent() {
        for text in [
            "a\nb",
            &"\u{7}".repeat(MAX_LOG_MESSAGE_BYTES),
            &"z".repeat(40_000),
        ] {
            let once = sanitize_log_message(text);
            assert_eq!(sanitize_log_message(&once), once);
        }
    }

    #[test]
    fn messages_at_the_limit_are_kept_whole() {
        let exact = "a".repeat(MAX_LOG_MESSAGE_BYTES);
        assert_eq!(sanitize_log_message(&exact), exact);
    }
}
