//! The async runner: one child from start to end, its output redacted, cut into bounded lines
//! and streamed to an observer, within a deadline, an idle limit and a cancellation token.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::end::{GroupGuard, ProcessEnd, signal_group};
use crate::lines::{LineDecoder, RawLine, Stream};
use crate::redact::Redactor;
use crate::spec::{DRAIN_AFTER_EXIT, ProcessLimits, ProcessSpec, spawn_error, std_command};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Lines read ahead of the observer per process; beyond it the child's pipe fills and the
/// child waits for us.
const LINE_QUEUE: usize = 64;
/// Bytes asked of a pipe per read.
const READ_CHUNK: usize = 16 * 1024;

/// Receives what a process does while it runs.
pub trait ProcessObserver: Send {
    /// The process started as the leader of process group `pgid`.
    fn started(&mut self, _pgid: u32) {}
    /// One line (redacted, without its line ending, cut lines marked).
    fn line(&mut self, stream: Stream, line: &str);
    /// Called once per silent stretch when half the idle limit has passed without output.
    fn silent(&mut self, _quiet_for: Duration) {}
    /// Awaited after every line. An observer that queues what it is told delivers it here, so
    /// a slow consumer slows the process down (its pipe fills) instead of losing lines.
    fn delivered(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The end and the captured stdout.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    pub end: ProcessEnd,
    pub stdout: Vec<u8>,
    pub stdout_truncated: bool,
}

impl ProcessReport {
    pub(crate) fn spawn_failed(message: String) -> Self {
        Self {
            end: ProcessEnd::SpawnFailed(message),
            stdout: Vec::new(),
            stdout_truncated: false,
        }
    }
}

/// Reads one pipe to its end, handing on redacted lines of at most `cap` bytes.
async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: Stream,
    cap: usize,
    redactor: Redactor,
    tx: mpsc::Sender<(Stream, RawLine)>,
) {
    let mut decoder = LineDecoder::new(&redactor, cap);
    // Read into spare capacity: a zeroed buffer per pipe was a memset per child for nothing.
    let mut buffer = Vec::with_capacity(READ_CHUNK);
    loop {
        buffer.clear();
        let ended = match reader.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => {
                decoder.end();
                true
            }
            Ok(_) => {
                decoder.feed(&buffer);
                false
            }
        };
        while let Some(line) = decoder.next_line() {
            if tx.send((stream, line)).await.is_err() {
                return;
            }
        }
        if ended {
            return;
        }
    }
}

/// Hands `payload` to the child's stdin, which is then closed. What the pipe takes at once is
/// written here: a child reading its input finds it there without waiting for this runner's
/// next turn (which may come only after the supervisor's next commit), and a running child
/// holds one descriptor fewer of the controller's, which every later spawn copies. Only a
/// payload larger than the pipe's room is left to a task.
fn feed_stdin(mut stdin: ChildStdin, payload: &[u8]) -> Option<JoinHandle<()>> {
    let mut written = 0;
    while written < payload.len() {
        match nix::unistd::write(&stdin, &payload[written..]) {
            Ok(0) | Err(Errno::EAGAIN) => break,
            Ok(n) => written += n,
            Err(Errno::EINTR) => {}
            // A child that ignores stdin closes the pipe early; that is not our failure.
            Err(_) => return None,
        }
    }
    if written == payload.len() {
        return None;
    }
    let rest = payload[written..].to_vec();
    Some(tokio::spawn(async move {
        let _ = stdin.write_all(&rest).await;
        let _ = stdin.shutdown().await;
    }))
}

/// The stdout kept for the report.
struct Capture<'a> {
    limits: &'a ProcessLimits,
    stdout: Vec<u8>,
    truncated: bool,
}

impl Capture<'_> {
    fn record(&mut self, stream: Stream, line: &RawLine) {
        if stream != Stream::Stdout || !self.limits.capture_stdout {
            return;
        }
        if line.cut || self.stdout.len() + line.bytes.len() > self.limits.max_stdout_bytes {
            self.truncated = true;
        } else {
            self.stdout.extend_from_slice(&line.bytes);
        }
    }
}

/// Why the runner stops the process itself.
enum Stop {
    Cancel,
    Deadline,
}

/// Waits until the observer took the last line, unless the caller cancels or the deadline
/// passes first.
async fn await_delivery(
    observer: &mut dyn ProcessObserver,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
) -> Option<Stop> {
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Some(Stop::Cancel),
        _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
            Some(Stop::Deadline)
        }
        _ = observer.delivered() => None,
    }
}

/// Runs the process to its end, streaming lines to `observer`.
pub async fn run_process(
    spec: &ProcessSpec,
    limits: &ProcessLimits,
    cancel: &CancellationToken,
    observer: &mut dyn ProcessObserver,
) -> ProcessReport {
    let mut command = match std_command(spec) {
        Ok(command) => tokio::process::Command::from(command),
        Err(message) => return ProcessReport::spawn_failed(message),
    };
    let mut child = match command.kill_on_drop(false).spawn() {
        Ok(child) => child,
        Err(error) => return ProcessReport::spawn_failed(spawn_error(spec, &error)),
    };
    let pgid = child.id().unwrap_or(0);
    let mut group = GroupGuard::new(pgid);
    if let Err(message) = crate::guard::watch_group(pgid) {
        // Unguarded, a step could outlive its host: do not run it.
        group.kill_now();
        let _ = child.wait().await;
        return ProcessReport::spawn_failed(message);
    }
    observer.started(pgid);
    let stdin_writer = child
        .stdin
        .take()
        .and_then(|stdin| feed_stdin(stdin, &spec.stdin));
    let (tx, mut rx) = mpsc::channel(LINE_QUEUE);
    // A line's cap includes its newline.
    let line_cap = limits.max_line_bytes.saturating_add(1);
    if let Some(out) = child.stdout.take() {
        let cap = if limits.capture_stdout {
            limits.max_stdout_bytes.saturating_add(1)
        } else {
            line_cap
        };
        let redactor = spec.redactor.clone();
        tokio::spawn(pump(out, Stream::Stdout, cap, redactor, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        let redactor = spec.redactor.clone();
        tokio::spawn(pump(err, Stream::Stderr, line_cap, redactor, tx.clone()));
    }
    drop(tx);

    let started = Instant::now();
    let far = started + Duration::from_secs(365 * 24 * 3600);
    let deadline = limits.deadline.map(|d| started + d);
    let mut last_output = started;
    let mut warned_silence = false;
    let mut capture = Capture {
        limits,
        stdout: Vec::new(),
        truncated: false,
    };
    let mut forced: Option<ProcessEnd> = None;

    let status = loop {
        let idle_warn = limits.idle.map(|i| last_output + i / 2);
        let idle_kill = limits.idle.map(|i| last_output + i);
        let stop = tokio::select! {
            biased;
            status = child.wait() => break status.ok(),
            _ = cancel.cancelled() => Stop::Cancel,
            _ = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() => {
                Stop::Deadline
            }
            _ = tokio::time::sleep_until(idle_kill.unwrap_or(far)), if idle_kill.is_some() => {
                // Reap first, then judge: output may be waiting in the pipe of a process that
                // already ended while this runner could not run.
                if let Ok(Some(status)) = child.try_wait() {
                    break Some(status);
                }
                observer.silent(last_output.elapsed());
                forced = Some(ProcessEnd::IdleExceeded);
                break stop_group(&mut child, pgid, limits.kill_grace).await;
            }
            _ = tokio::time::sleep_until(idle_warn.unwrap_or(far)), if idle_warn.is_some() && !warned_silence => {
                warned_silence = true;
                observer.silent(last_output.elapsed());
                continue;
            }
            Some((stream, line)) = rx.recv() => {
                warned_silence = false;
                capture.record(stream, &line);
                observer.line(stream, &line.text(limits.max_line_bytes));
                let stop = await_delivery(observer, cancel, deadline).await;
                last_output = Instant::now();
                match stop {
                    Some(stop) => stop,
                    None => continue,
                }
            }
        };
        if let Stop::Deadline = stop {
            // Judged by the process's own completion, not by when this runner woke up: one
            // that has already exited finished in time as far as anyone can tell (a stopped
            // or overloaded controller must not turn a finished step into a timeout).
            if let Ok(Some(status)) = child.try_wait() {
                break Some(status);
            }
        }
        forced = Some(match stop {
            Stop::Cancel => ProcessEnd::Cancelled,
            Stop::Deadline => ProcessEnd::DeadlineExceeded,
        });
        break stop_group(&mut child, pgid, limits.kill_grace).await;
    };
    // Background children may still hold the pipes; the group goes with its leader, unless
    // the caller keeps what a leader that ended on its own left running.
    if limits.keep_group_after_exit && forced.is_none() {
        group.release();
    } else {
        group.kill_now();
    }
    let drain_until = Instant::now() + DRAIN_AFTER_EXIT;
    while let Ok(Some((stream, line))) = tokio::time::timeout_at(drain_until, rx.recv()).await {
        capture.record(stream, &line);
        observer.line(stream, &line.text(limits.max_line_bytes));
        let _ = tokio::time::timeout_at(drain_until, observer.delivered()).await;
    }
    if let Some(writer) = stdin_writer {
        writer.abort();
    }
    let end = forced.unwrap_or_else(|| match status {
        Some(status) => ProcessEnd::of_status(status),
        None => ProcessEnd::SpawnFailed("the process's exit status could not be read".into()),
    });
    ProcessReport {
        end,
        stdout: capture.stdout,
        stdout_truncated: capture.truncated,
    }
}

/// SIGTERM the group, give it `grace`, then SIGKILL; returns the leader's exit status.
async fn stop_group(child: &mut Child, pgid: u32, grace: Duration) -> Option<ExitStatus> {
    signal_group(pgid, Signal::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            child.wait().await.ok()
        }
    }
}
