//! Supervised child processes: their own process group, a cleared environment, streamed and
//! bounded output, a deadline, an idle limit, cancellation, and no stragglers left behind.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What to run. The environment is exactly `env`: nothing is inherited.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
}

/// Bounds on one process.
#[derive(Debug, Clone)]
pub struct ProcessLimits {
    pub deadline: Option<Duration>,
    pub idle: Option<Duration>,
    /// Whether stdout is kept for the report (else it only reaches the observer).
    pub capture_stdout: bool,
    /// Most stdout bytes kept; more marks the capture truncated.
    pub max_stdout_bytes: usize,
    /// Longest line delivered to the observer; the rest of a longer line is dropped and the
    /// delivered part marked cut.
    pub max_line_bytes: usize,
    /// Time between SIGTERM and SIGKILL when stopping the group.
    pub kill_grace: Duration,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            deadline: None,
            idle: None,
            capture_stdout: true,
            max_stdout_bytes: 8 * 1024 * 1024,
            max_line_bytes: 16 * 1024,
            kill_grace: Duration::from_secs(2),
        }
    }
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEnd {
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    DeadlineExceeded,
    IdleExceeded,
    Cancelled,
    SpawnFailed(String),
}

/// The end and the captured stdout.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    pub end: ProcessEnd,
    pub stdout: Vec<u8>,
    pub stdout_truncated: bool,
}

/// Receives what a process does while it runs.
pub trait ProcessObserver: Send {
    fn started(&mut self, _pid: u32) {}
    fn line(&mut self, stream: Stream, line: &str);
    /// Called once per silent stretch when half the idle limit has passed without output.
    fn silent(&mut self, _quiet_for: Duration) {}
}

/// Sends `signal` to every process of the group `pgid`.
pub fn signal_group(pgid: u32, signal: i32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        // SAFETY: kill(2) with a negative pid addresses a process group; no memory is shared.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

fn build_command(spec: &ProcessSpec) -> Command {
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; asking for SIGKILL when the parent dies
    // keeps a killed controller from leaving workers behind.
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // A parent that died before the request above was made sends no signal: give up.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::other("the supervising process is gone"));
            }
            Ok(())
        });
    }
    command
}

/// One line from a pipe; `cut` when the line was longer than the cap and its rest dropped.
type PipeLine = (Stream, Vec<u8>, bool);

/// Forwards lines; of a line longer than `cap` bytes only the first `cap` bytes are forwarded
/// (marked cut), so a worker that never prints a newline cannot exhaust memory.
async fn pump_lines<R: AsyncRead + Unpin>(
    reader: R,
    stream: Stream,
    cap: usize,
    tx: mpsc::Sender<PipeLine>,
) {
    let cap = cap.max(1);
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    // Inside the dropped rest of an over-long line.
    let mut skipping = false;
    loop {
        let buf = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => buf,
        };
        let newline = buf.iter().position(|&b| b == b'\n');
        if skipping {
            let consumed = newline.map_or(buf.len(), |i| i + 1);
            skipping = newline.is_none();
            reader.consume(consumed);
            continue;
        }
        let room = cap - line.len();
        match newline {
            Some(i) if i < room => {
                line.extend_from_slice(&buf[..=i]);
                reader.consume(i + 1);
                if tx
                    .send((stream, std::mem::take(&mut line), false))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            _ => {
                let n = buf.len().min(room);
                line.extend_from_slice(&buf[..n]);
                reader.consume(n);
                if line.len() >= cap {
                    skipping = true;
                    if tx
                        .send((stream, std::mem::take(&mut line), true))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }
    if !line.is_empty() {
        let _ = tx.send((stream, line, false)).await;
    }
}

fn trim_line(bytes: &[u8], max: usize, cut: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.len() <= max && !cut {
        return text.to_owned();
    }
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{LINE_CUT_MARKER}", &text[..end])
}

/// Appended to a line delivered cut.
pub const LINE_CUT_MARKER: &str = "… [line truncated]";

/// Runs the process to its end, streaming lines to `observer`.
pub async fn run_process(
    spec: &ProcessSpec,
    limits: &ProcessLimits,
    cancel: &CancellationToken,
    observer: &mut dyn ProcessObserver,
) -> ProcessReport {
    let mut child = match build_command(spec).spawn() {
        Ok(child) => child,
        Err(error) => {
            return ProcessReport {
                end: ProcessEnd::SpawnFailed(format!("cannot start {}: {error}", spec.program)),
                stdout: Vec::new(),
                stdout_truncated: false,
            };
        }
    };
    let pgid = child.id().unwrap_or(0);
    observer.started(pgid);
    if let Some(mut stdin) = child.stdin.take() {
        let payload = spec.stdin.clone();
        tokio::spawn(async move {
            // A worker that ignores stdin closes the pipe early; that is not our failure.
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (tx, mut rx) = mpsc::channel(256);
    // A line's cap includes its newline.
    let line_cap = limits.max_line_bytes.saturating_add(1);
    if let Some(out) = child.stdout.take() {
        let cap = if limits.capture_stdout {
            limits.max_stdout_bytes.saturating_add(1)
        } else {
            line_cap
        };
        tokio::spawn(pump_lines(out, Stream::Stdout, cap, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump_lines(err, Stream::Stderr, line_cap, tx.clone()));
    }
    drop(tx);

    let started = Instant::now();
    let deadline = limits.deadline.map(|d| started + d);
    let mut last_output = started;
    let mut warned_silence = false;
    let mut stdout = Vec::new();
    let mut truncated = false;
    let mut forced_end: Option<ProcessEnd> = None;
    let far = Duration::from_secs(365 * 24 * 3600);

    let status = loop {
        let idle_warn = limits.idle.map(|i| last_output + i / 2);
        let idle_kill = limits.idle.map(|i| last_output + i);
        tokio::select! {
            status = child.wait() => break status.ok(),
            Some((stream, bytes, cut)) = rx.recv() => {
                last_output = Instant::now();
                warned_silence = false;
                record_line(&mut stdout, &mut truncated, limits, stream, &bytes, cut);
                observer.line(stream, &trim_line(&bytes, limits.max_line_bytes, cut));
            }
            _ = cancel.cancelled(), if forced_end.is_none() => {
                forced_end = Some(ProcessEnd::Cancelled);
                break stop_group(&mut child, pgid, limits.kill_grace).await;
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(started + far)), if deadline.is_some() => {
                forced_end = Some(ProcessEnd::DeadlineExceeded);
                break stop_group(&mut child, pgid, limits.kill_grace).await;
            }
            _ = tokio::time::sleep_until(idle_warn.unwrap_or(started + far)), if idle_warn.is_some() && !warned_silence => {
                warned_silence = true;
                observer.silent(last_output.elapsed());
            }
            _ = tokio::time::sleep_until(idle_kill.unwrap_or(started + far)), if idle_kill.is_some() => {
                observer.silent(last_output.elapsed());
                forced_end = Some(ProcessEnd::IdleExceeded);
                break stop_group(&mut child, pgid, limits.kill_grace).await;
            }
        }
    };
    // Background children may still hold the pipes; the group goes with its leader.
    signal_group(pgid, libc::SIGKILL);
    let drain_until = Instant::now() + Duration::from_secs(2);
    while let Ok(Some((stream, bytes, cut))) = tokio::time::timeout_at(drain_until, rx.recv()).await
    {
        record_line(&mut stdout, &mut truncated, limits, stream, &bytes, cut);
        observer.line(stream, &trim_line(&bytes, limits.max_line_bytes, cut));
    }
    let end = forced_end.unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        ProcessEnd::Exited {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
        }
    });
    ProcessReport {
        end,
        stdout,
        stdout_truncated: truncated,
    }
}

fn record_line(
    stdout: &mut Vec<u8>,
    truncated: &mut bool,
    limits: &ProcessLimits,
    stream: Stream,
    bytes: &[u8],
    cut: bool,
) {
    if stream != Stream::Stdout || !limits.capture_stdout {
        return;
    }
    if cut || stdout.len() + bytes.len() > limits.max_stdout_bytes {
        *truncated = true;
    } else {
        stdout.extend_from_slice(bytes);
    }
}

/// SIGTERM the group, give it `grace`, then SIGKILL; returns the leader's exit status.
async fn stop_group(
    child: &mut tokio::process::Child,
    pgid: u32,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    signal_group(pgid, libc::SIGTERM);
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            signal_group(pgid, libc::SIGKILL);
            child.wait().await.ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &'static [u8], cap: usize) -> Vec<(String, bool)> {
        let (tx, mut rx) = mpsc::channel(16);
        pump_lines(input, Stream::Stdout, cap, tx).await;
        let mut out = Vec::new();
        while let Some((_, bytes, cut)) = rx.recv().await {
            out.push((String::from_utf8(bytes).unwrap(), cut));
        }
        out
    }

    #[tokio::test]
    async fn over_long_lines_are_cut_and_their_rest_dropped() {
        let lines = lines_of(b"short\n0123456789abcdef\nnext\ntail", 8).await;
        assert_eq!(
            lines,
            [
                ("short\n".to_owned(), false),
                ("01234567".to_owned(), true),
                ("next\n".to_owned(), false),
                ("tail".to_owned(), false),
            ]
        );
        assert_eq!(trim_line(b"01234567", 4, true), "0123… [line truncated]");
        assert_eq!(trim_line(b"0123\n", 4, false), "0123");
    }
}
