//! Runs a CLI to completion with its prompt on stdin, a deadline, and whole-process-group cleanup.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;

/// How long to keep reading output after the process group is gone or killed.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// The result of one CLI run.
#[derive(Debug, Clone)]
pub struct CliRun {
    /// Exit status; `None` only if it could not be collected after a kill.
    pub status: Option<ExitStatus>,
    /// Everything written to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
    /// True when the deadline passed and the process group was killed.
    pub timed_out: bool,
    /// Wall time from spawn to exit (or kill).
    pub elapsed: Duration,
}

impl CliRun {
    /// True when the process exited on its own with status 0.
    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|status| status.success())
    }

    /// Every stdout line that parses as a JSON value, in order.
    pub fn events(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line.trim()).ok())
            .collect()
    }

    /// The JSON events whose `type` field equals `kind`.
    pub fn events_of_type(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|event| event.get("type").and_then(Value::as_str) == Some(kind))
            .collect()
    }

    /// A multi-line description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "status: {:?}, timed out: {}, elapsed: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.timed_out, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Kills a process group when dropped, so a panicking test leaves no CLI behind.
struct GroupGuard(Option<Pid>);

impl GroupGuard {
    fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH (group already gone) is the normal case after a clean exit.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `command` in a new process group, writes `stdin` and closes it, and waits up to
/// `timeout`. On timeout the whole group gets SIGKILL. After the leader exits, the group is
/// killed as well, so no grandchild outlives the run.
pub async fn run_cli(
    mut command: Command,
    stdin: &str,
    timeout: Duration,
) -> std::io::Result<CliRun> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = command.spawn()?;
    let guard = GroupGuard(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw),
    );

    let mut input = child.stdin.take();
    let prompt = stdin.as_bytes().to_vec();
    let writer = tokio::spawn(async move {
        if let Some(input) = input.as_mut() {
            // A CLI that exits without reading its stdin closes the pipe; that is not our error.
            let _ = input.write_all(&prompt).await;
            let _ = input.shutdown().await;
        }
    });
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read_out = tokio::spawn(read_all(stdout));
    let read_err = tokio::spawn(read_all(stderr));

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (Some(status?), false),
        Err(_) => {
            guard.kill();
            let status = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
            (status.ok().and_then(Result::ok), true)
        }
    };
    let elapsed = started.elapsed();
    guard.kill();
    writer.abort();
    let stdout = drain(read_out).await;
    let stderr = drain(read_err).await;
    Ok(CliRun {
        status,
        stdout,
        stderr,
        timed_out,
        elapsed,
    })
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut reader) = reader {
        let _ = reader.read_to_end(&mut bytes).await;
    }
    bytes
}

async fn drain(task: tokio::task::JoinHandle<Vec<u8>>) -> String {
    let abort = task.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(Err(_)) => String::new(),
        Err(_) => {
            abort.abort();
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn captures_output_and_feeds_stdin() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "read line; echo \"{\\\"type\\\":\\\"got\\\",\\\"v\\\":\\\"$line\\\"}\"; echo oops >&2",
        ]);
        let run = run_cli(command, "hello\n", Duration::from_secs(10))
            .await
            .unwrap();
        assert!(run.succeeded(), "{}", run.describe());
        assert_eq!(run.events_of_type("got")[0]["v"], "hello");
        assert_eq!(run.stderr, "oops\n");
    }

    #[tokio::test]
    async fn kills_the_whole_group_on_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-alive");
        let mut command = Command::new("sh");
        // The grandchild would create the marker after 2 s unless it is killed with the group.
        let script = format!("(sleep 2; touch '{}') & sleep 30", marker.display());
        command.args(["-c", &script]);
        let run = run_cli(command, "", Duration::from_millis(300))
            .await
            .unwrap();
        assert!(run.timed_out);
        assert!(!run.succeeded());
        assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!marker.exists(), "grandchild survived the group kill");
    }
}
