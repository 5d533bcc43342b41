//! Long-lived children that speak a protocol over their pipes (the Python bridge): started
//! like every other child, read in bounded lines, stopped with their whole process group.

use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::end::{ProcessEnd, kill_group, signal_group};
use crate::lines::LineReader;
use crate::spec::{ProcessSpec, spawn_error, std_command};

/// How long a stopped session's leader may take to be reaped after SIGKILL.
const REAP_AFTER_KILL: Duration = Duration::from_secs(5);

/// The pipes of a session, for the caller's own reader and writer threads.
pub struct SessionPipes {
    /// The child's stdin; dropping it closes the pipe.
    pub stdin: ChildStdin,
    /// Redacted lines of at most the session's line cap (longer ones cut and marked).
    pub stdout: LineReader<ChildStdout>,
    pub stderr: LineReader<ChildStderr>,
}

/// The pipes of a session whose stdout carries a framed protocol rather than lines (JSON-RPC
/// with `Content-Length` headers): stdout comes raw and unredacted, for the caller to parse
/// and to redact what it shows.
pub struct RawSessionPipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: LineReader<ChildStderr>,
}

type ExitSlot = Arc<(Mutex<Option<ExitStatus>>, Condvar)>;

fn lock(slot: &Mutex<Option<ExitStatus>>) -> MutexGuard<'_, Option<ExitStatus>> {
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running long-lived child. Dropping it kills its process group.
pub struct Session {
    pgid: u32,
    exit: ExitSlot,
    /// Trellis asked it to stop: an end by signal is then ours, not an outside kill.
    stopping: AtomicBool,
    killed: AtomicBool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("pgid", &self.pgid)
            .field("end", &self.end())
            .finish()
    }
}

impl Session {
    /// Starts `spec` in its own process group; lines read from its pipes are cut at
    /// `max_line_bytes` (newline excluded) and redacted with `spec.redactor`. `spec.stdin` is
    /// ignored: the caller writes to [`SessionPipes::stdin`].
    pub fn start(
        spec: &ProcessSpec,
        max_line_bytes: usize,
    ) -> Result<(Session, SessionPipes), String> {
        let (session, raw) = Self::start_raw(spec, max_line_bytes)?;
        let cap = max_line_bytes.saturating_add(1);
        let pipes = SessionPipes {
            stdin: raw.stdin,
            stdout: LineReader::new(raw.stdout, &spec.redactor, cap),
            stderr: raw.stderr,
        };
        Ok((session, pipes))
    }

    /// Like [`Session::start`], but stdout is handed over raw (see [`RawSessionPipes`]).
    pub fn start_raw(
        spec: &ProcessSpec,
        max_line_bytes: usize,
    ) -> Result<(Session, RawSessionPipes), String> {
        let mut command = std_command(spec)?;
        let mut child = command.spawn().map_err(|e| spawn_error(spec, &e))?;
        let pgid = child.id();
        if let Err(message) = crate::guard::watch_group(pgid) {
            kill_group(pgid);
            let _ = child.wait();
            return Err(message);
        }
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(pgid);
            let _ = child.wait();
            return Err(format!(
                "cannot start {}: its pipes are missing",
                spec.program
            ));
        };
        let exit: ExitSlot = Arc::new((Mutex::new(None), Condvar::new()));
        let slot = Arc::clone(&exit);
        let waiter = std::thread::Builder::new()
            .name("trellis-session-wait".into())
            .spawn(move || {
                let status = child.wait();
                let (state, changed) = &*slot;
                // A failed wait leaves nothing to wait for: report it as a plain failure.
                let status = status
                    .unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(1 << 8));
                *lock(state) = Some(status);
                changed.notify_all();
            });
        if let Err(error) = waiter {
            kill_group(pgid);
            return Err(format!("cannot watch {}: {error}", spec.program));
        }
        let cap = max_line_bytes.saturating_add(1);
        let pipes = RawSessionPipes {
            stdin,
            stdout,
            stderr: LineReader::new(stderr, &spec.redactor, cap),
        };
        let session = Session {
            pgid,
            exit,
            stopping: AtomicBool::new(false),
            killed: AtomicBool::new(false),
        };
        Ok((session, pipes))
    }

    /// The process group id (the leader's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid
    }

    /// How it ended, once its leader has ended.
    pub fn end(&self) -> Option<ProcessEnd> {
        let status = *lock(&self.exit.0);
        status.map(|status| self.classify(status))
    }

    /// Waits up to `timeout` for the leader to end.
    pub fn wait_end(&self, timeout: Duration) -> Option<ProcessEnd> {
        let (state, changed) = &*self.exit;
        let deadline = Instant::now() + timeout;
        let mut status = lock(state);
        while status.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            status = changed
                .wait_timeout(status, left)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        status.map(|status| self.classify(status))
    }

    /// Stops the whole group: SIGTERM, up to `grace` for the leader to go, then SIGKILL.
    /// Whatever the group left behind is killed too. Returns how the leader ended.
    pub fn stop(&self, grace: Duration) -> ProcessEnd {
        self.stopping.store(true, Ordering::SeqCst);
        if self.end().is_none() {
            signal_group(self.pgid, Signal::SIGTERM);
        }
        let end = self.wait_end(grace).or_else(|| {
            kill_group(self.pgid);
            self.wait_end(REAP_AFTER_KILL)
        });
        self.kill_stragglers();
        end.unwrap_or(ProcessEnd::Cancelled)
    }

    fn kill_stragglers(&self) {
        if !self.killed.swap(true, Ordering::SeqCst) {
            kill_group(self.pgid);
        }
    }

    fn classify(&self, status: ExitStatus) -> ProcessEnd {
        match ProcessEnd::of_status(status) {
            ProcessEnd::KilledFromOutside { .. } if self.stopping.load(Ordering::SeqCst) => {
                ProcessEnd::Cancelled
            }
            other => other,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.kill_stragglers();
    }
}
