//! Turning process activity into redacted, bounded, one-line log events that reach the
//! supervisor in order and complete: a slow consumer slows the worker, never drops a line.

use std::collections::VecDeque;
use std::time::Duration;

use trellis_process::{BoxFuture, ProcessObserver, Stream};
use trellis_run_model::declared_level;

use crate::harness::{EventSink, ExecutionRequest, HarnessEvent, LogLevel, LogStream};
use crate::redact::Redactor;

/// Longest log message a harness emits: the run vocabulary's one bound.
pub use trellis_run_model::MAX_LOG_MESSAGE_BYTES;

/// Forwards process activity to the event sink as redacted log lines.
pub(crate) struct LogForwarder {
    pub events: EventSink,
    pub redactor: Redactor,
    pub node: String,
    pub forward_stdout: bool,
    /// Events not yet taken by the sink, oldest first; sent by [`LogForwarder::flush`].
    pending: VecDeque<HarnessEvent>,
    /// The signal that killed the worker, when it came from outside Trellis.
    pub killed_from_outside: Option<i32>,
}

impl LogForwarder {
    /// A forwarder for one execution: redacts the request's secret values, names its node.
    pub fn for_request(events: EventSink, request: &ExecutionRequest) -> Self {
        Self {
            events,
            redactor: request.environment.redactor(),
            node: request.node.to_string(),
            forward_stdout: false,
            pending: VecDeque::new(),
            killed_from_outside: None,
        }
    }

    pub fn system(&mut self, message: String) {
        self.emit(LogStream::System, &message);
    }

    /// Queues one redacted, single-line, bounded message at its stream's usual level.
    pub fn emit(&mut self, stream: LogStream, message: &str) {
        self.emit_at(stream, stream.default_level(), message);
    }

    /// Queues one redacted, single-line, bounded message at `level`. Secrets are masked
    /// before the message is folded or cut, so neither a line break nor the cut can split one.
    pub fn emit_at(&mut self, stream: LogStream, level: LogLevel, message: &str) {
        let message = one_line(&self.redactor.apply(message));
        self.event(HarnessEvent::Log {
            stream,
            level,
            message,
        });
    }

    /// Queues an event; it is sent at once when the sink has room and nothing waits before it.
    pub fn event(&mut self, event: HarnessEvent) {
        if self.pending.is_empty() {
            // A closed sink means nobody listens any more; the event has nowhere to go.
            if let Err(tokio::sync::mpsc::error::TrySendError::Full(event)) =
                self.events.try_send(event)
            {
                self.pending.push_back(event);
            }
        } else {
            self.pending.push_back(event);
        }
    }

    /// Sends every queued event, waiting for the sink as long as it takes. Cancel-safe: an
    /// interrupted flush loses nothing.
    pub async fn flush(&mut self) {
        while !self.pending.is_empty() {
            let Ok(permit) = self.events.reserve().await else {
                self.pending.clear();
                return;
            };
            if let Some(event) = self.pending.pop_front() {
                permit.send(event);
            }
        }
    }
}

impl ProcessObserver for LogForwarder {
    fn started(&mut self, pgid: u32) {
        self.event(HarnessEvent::Started {
            process_group: pgid,
        });
    }

    fn line(&mut self, stream: Stream, line: &str) {
        match stream {
            Stream::Stdout if !self.forward_stdout => {}
            // A line that declares its level (`ERROR: …`, `{"level":"warn"}`) keeps it.
            Stream::Stdout => {
                let level = declared_level(line).unwrap_or(LogStream::Output.default_level());
                self.emit_at(LogStream::Output, level, line);
            }
            // Otherwise: programs write progress and diagnostics to stderr as a matter of
            // course (git, cargo, test runners): worth a look, not an error until the outcome
            // says so.
            Stream::Stderr => {
                let level = declared_level(line).unwrap_or(LogLevel::Warn);
                self.emit_at(LogStream::Error, level, line);
            }
        }
    }

    fn silent(&mut self, quiet_for: Duration) {
        let message = format!(
            "no output for {} from node {}",
            human_duration(quiet_for),
            self.node
        );
        self.emit_at(LogStream::System, LogLevel::Warn, &message);
    }

    fn delivered(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(self.flush())
    }
}

/// Folds line breaks into ` ⏎ ` so one event stays one line, and bounds the length.
pub fn one_line(text: &str) -> String {
    let trimmed = text.trim_end_matches(['\n', '\r']);
    let folded = if memchr::memchr2(b'\n', b'\r', trimmed.as_bytes()).is_some() {
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

    fn forwarder(
        capacity: usize,
        secrets: &[&str],
    ) -> (LogForwarder, tokio::sync::mpsc::Receiver<HarnessEvent>) {
        let (events, rx) = tokio::sync::mpsc::channel(capacity);
        let forwarder = LogForwarder {
            events,
            redactor: Redactor::new(secrets),
            node: "n".into(),
            forward_stdout: false,
            pending: VecDeque::new(),
            killed_from_outside: None,
        };
        (forwarder, rx)
    }

    fn message(event: HarnessEvent) -> String {
        match event {
            HarnessEvent::Log { message, .. } => message,
            other => panic!("not a log line: {other:?}"),
        }
    }

    /// Issue 19 #1 and #2: a value with a line break, or one that straddles the 4 KiB cut of
    /// a message, is masked before the message is folded or cut.
    #[test]
    fn secrets_are_masked_before_folding_and_cutting() {
        let multi_line = "top\nsecret-canary";
        let straddling = "straddling-canary-value-0123456789abcdef";
        let (mut forwarder, mut rx) = forwarder(8, &[multi_line, straddling]);
        forwarder.system(format!("a {multi_line} b"));
        let padding = "p".repeat(MAX_LOG_MESSAGE_BYTES - 30);
        forwarder.system(format!("{padding}{straddling}"));
        let first = message(rx.try_recv().unwrap());
        assert_eq!(first, "a [REDACTED] b");
        let second = message(rx.try_recv().unwrap());
        assert!(!second.contains("straddling"), "{second}");
        assert!(second.starts_with(&padding));
    }

    fn stream_and_level(event: HarnessEvent) -> (LogStream, LogLevel) {
        match event {
            HarnessEvent::Log { stream, level, .. } => (stream, level),
            other => panic!("not a log line: {other:?}"),
        }
    }

    /// A worker's stderr is kept as its error stream but at warning level (git and test
    /// runners write progress there); only what Trellis knows to be an error is `error`.
    #[test]
    fn stderr_lines_are_warnings_and_known_failures_errors() {
        let (mut forwarder, mut rx) = forwarder(8, &[]);
        forwarder.line(Stream::Stderr, "Compiling trellis v0.1.0");
        forwarder.line(Stream::Stdout, "not forwarded");
        forwarder.emit_at(LogStream::Error, LogLevel::Error, "model refused");
        let first = rx.try_recv().unwrap();
        assert_eq!(stream_and_level(first), (LogStream::Error, LogLevel::Warn));
        let second = rx.try_recv().unwrap();
        assert_eq!(
            stream_and_level(second),
            (LogStream::Error, LogLevel::Error)
        );
        assert!(rx.try_recv().is_err(), "stdout is not forwarded here");
    }

    /// Issue 34: a line that says its level is levelled by what it says, whichever pipe it
    /// came through, so "error and above" shows a worker's real errors.
    #[test]
    fn lines_that_declare_a_level_keep_it() {
        let (mut forwarder, mut rx) = forwarder(8, &[]);
        forwarder.line(Stream::Stderr, "ERROR: the build failed");
        forwarder.line(Stream::Stderr, "[info] cloning");
        forwarder.line(Stream::Stderr, r#"{"level":"debug","msg":"cache hit"}"#);
        let levels: Vec<LogLevel> = (0..3)
            .map(|_| stream_and_level(rx.try_recv().unwrap()).1)
            .collect();
        assert_eq!(levels, [LogLevel::Error, LogLevel::Info, LogLevel::Debug]);
    }

    /// Issue 19 #3: events that do not fit the sink wait, in order, instead of being dropped.
    #[tokio::test]
    async fn a_full_sink_delays_events_but_loses_none() {
        let (mut forwarder, mut rx) = forwarder(4, &[]);
        for i in 0..100 {
            forwarder.system(format!("line {i}"));
        }
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(event) = rx.recv().await {
                got.push(message(event));
            }
            got
        });
        forwarder.flush().await;
        drop(forwarder);
        let got = reader.await.unwrap();
        let expected: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        assert_eq!(got, expected);
    }
}
