//! Turning process activity into redacted, bounded, one-line log events.

use std::time::Duration;

use crate::harness::{EventSink, ExecutionRequest, HarnessEvent, LogLevel, LogStream};
use crate::process::{ProcessObserver, Stream};
use crate::redact::Redactor;

/// Longest log message a harness emits: the run vocabulary's one bound.
pub use trellis_run_model::MAX_LOG_MESSAGE_BYTES;

/// Forwards process activity to the event sink as redacted log lines.
pub(crate) struct LogForwarder {
    pub events: EventSink,
    pub redactor: Redactor,
    pub node: String,
    pub forward_stdout: bool,
}

impl LogForwarder {
    /// A forwarder for one execution: redacts the request's secret values, names its node.
    pub fn for_request(events: EventSink, request: &ExecutionRequest) -> Self {
        Self {
            events,
            redactor: request.environment.redactor(),
            node: request.node.to_string(),
            forward_stdout: false,
        }
    }

    pub fn system(&self, message: String) {
        self.emit(LogStream::System, &message);
    }

    /// Sends one redacted, single-line, bounded message at its stream's usual level.
    pub fn emit(&self, stream: LogStream, message: &str) {
        self.emit_at(stream, stream.default_level(), message);
    }

    /// Sends one redacted, single-line, bounded message at `level`.
    pub fn emit_at(&self, stream: LogStream, level: LogLevel, message: &str) {
        let message = self.redactor.apply(&one_line(message));
        // A full queue drops lines rather than stalling the worker; the count is bounded anyway.
        let _ = self.events.try_send(HarnessEvent::Log {
            stream,
            level,
            message,
        });
    }

    pub fn event(&self, event: HarnessEvent) {
        let _ = self.events.try_send(event);
    }
}

impl ProcessObserver for LogForwarder {
    fn started(&mut self, pid: u32) {
        self.event(HarnessEvent::Started { process_group: pid });
    }

    fn line(&mut self, stream: Stream, line: &str) {
        let stream = match stream {
            Stream::Stdout if !self.forward_stdout => return,
            Stream::Stdout => LogStream::Output,
            Stream::Stderr => LogStream::Error,
        };
        self.emit(stream, line);
    }

    fn silent(&mut self, quiet_for: Duration) {
        let message = format!(
            "no output for {} from node {}",
            human_duration(quiet_for),
            self.node
        );
        self.emit_at(LogStream::System, LogLevel::Warn, &message);
    }
}

/// Folds line breaks into ` ⏎ ` so one event stays one line, and bounds the length.
pub fn one_line(text: &str) -> String {
    let trimmed = text.trim_end_matches(['\n', '\r']);
    let folded = if trimmed.contains(['\n', '\r']) {
        trimmed.replace("\r\n", "\n").replace(['\n', '\r'], " ⏎ ")
    } else {
        trimmed.to_owned()
    };
    trellis_run_model::bound_log_message(folded)
}

/// Cuts an excerpt (of a reply, of a validation error) to at most `max` bytes on a character
/// boundary, marking the cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [truncated]", &text[..cut])
}

/// `90s` → `1m30s`, `300s` → `5m`.
pub fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_secs(300)), "5m");
        assert_eq!(human_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(human_duration(Duration::from_secs(7)), "7s");
    }

    #[test]
    fn messages_become_single_bounded_lines() {
        assert_eq!(one_line("a\nb\r\nc\n"), "a ⏎ b ⏎ c");
        let long = "é".repeat(MAX_LOG_MESSAGE_BYTES);
        let cut = one_line(&long);
        assert!(cut.len() <= MAX_LOG_MESSAGE_BYTES);
        assert!(cut.ends_with(&format!("[truncated, over {MAX_LOG_MESSAGE_BYTES} bytes]")));
    }
}
