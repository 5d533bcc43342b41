//! How a child process ended, and signalling its whole process group.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEnd {
    /// It exited on its own with this code.
    Exited { code: i32 },
    /// A signal of its own making ended it: a fault (`SIGSEGV`, `SIGABRT`, `SIGBUS`, …), a
    /// broken pipe or an exceeded resource limit.
    Crashed { signal: i32 },
    /// A signal Trellis did not send ended it (`SIGKILL` or `SIGTERM` from someone else, the
    /// OOM killer): the interruption is not the work's own outcome.
    KilledFromOutside { signal: i32 },
    /// Trellis stopped it at its deadline.
    DeadlineExceeded,
    /// Trellis stopped it after it was silent for the idle limit.
    IdleExceeded,
    /// Trellis stopped it because the caller cancelled.
    Cancelled,
    /// It could not be started.
    SpawnFailed(String),
}

impl ProcessEnd {
    /// Classifies a reaped exit status that Trellis did not cause.
    pub fn of_status(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => Self::Exited { code },
            (None, Some(signal)) if is_self_inflicted(signal) => Self::Crashed { signal },
            (None, Some(signal)) => Self::KilledFromOutside { signal },
            // Neither a code nor a signal: stopped/continued statuses are never reaped here.
            (None, None) => Self::Crashed { signal: 0 },
        }
    }

    /// True for an exit with code 0.
    pub fn success(&self) -> bool {
        matches!(self, Self::Exited { code: 0 })
    }

    /// Says in a few words how the process ended, for a log line.
    pub fn describe(&self) -> String {
        match self {
            Self::Exited { code } => format!("exited with code {code}"),
            Self::Crashed { signal } => format!("crashed with signal {}", signal_name(*signal)),
            Self::KilledFromOutside { signal } => format!(
                "was killed by signal {} sent from outside Trellis",
                signal_name(*signal)
            ),
            Self::DeadlineExceeded => "was stopped at its deadline".to_owned(),
            Self::IdleExceeded => "was stopped after its idle limit".to_owned(),
            Self::Cancelled => "was stopped on cancellation".to_owned(),
            Self::SpawnFailed(message) => message.clone(),
        }
    }
}

/// Signals a process raises by itself (faults, a write to a closed pipe, resource limits).
fn is_self_inflicted(signal: i32) -> bool {
    matches!(
        Signal::try_from(signal),
        Ok(Signal::SIGSEGV
            | Signal::SIGBUS
            | Signal::SIGILL
            | Signal::SIGFPE
            | Signal::SIGABRT
            | Signal::SIGSYS
            | Signal::SIGTRAP
            | Signal::SIGPIPE
            | Signal::SIGXCPU
            | Signal::SIGXFSZ)
    )
}

fn signal_name(signal: i32) -> String {
    match Signal::try_from(signal) {
        Ok(known) => format!("{signal} ({})", known.as_str()),
        Err(_) => signal.to_string(),
    }
}

/// Sends `signal` to every process of the group `pgid`. Group ids 0 and 1 would address the
/// caller's own group or every process; they are refused.
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Ok(pgid) = i32::try_from(pgid)
        && pgid > 1
    {
        // The group may be gone already; that is what we wanted.
        let _ = killpg(Pid::from_raw(pgid), signal);
    }
}

/// SIGKILLs every process of the group `pgid` (a worker left behind by a dead controller).
pub fn kill_group(pgid: u32) {
    signal_group(pgid, Signal::SIGKILL);
}

/// Kills a process group when dropped, unless disarmed: a runner whose future is dropped
/// half-way leaves no process behind.
pub(crate) struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    pub fn new(pgid: u32) -> Self {
        Self { pgid: Some(pgid) }
    }

    /// Kills the group now and forgets it: a later reuse of the id is someone else's.
    pub fn kill_now(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_group(pgid);
        }
    }
}

impl GroupGuard {
    /// Forgets the group without killing it: its members are the caller's to stop.
    pub fn release(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_told_apart_by_who_raised_them() {
        let by_signal = |s: Signal| ProcessEnd::of_status(ExitStatus::from_raw(s as i32));
        assert_eq!(
            by_signal(Signal::SIGKILL),
            ProcessEnd::KilledFromOutside { signal: 9 }
        );
        assert_eq!(
            by_signal(Signal::SIGTERM),
            ProcessEnd::KilledFromOutside { signal: 15 }
        );
        assert_eq!(
            by_signal(Signal::SIGSEGV),
            ProcessEnd::Crashed { signal: 11 }
        );
        assert_eq!(
            by_signal(Signal::SIGABRT),
            ProcessEnd::Crashed { signal: 6 }
        );
        assert_eq!(
            ProcessEnd::of_status(ExitStatus::from_raw(3 << 8)),
            ProcessEnd::Exited { code: 3 }
        );
        assert_eq!(
            ProcessEnd::KilledFromOutside { signal: 9 }.describe(),
            "was killed by signal 9 (SIGKILL) sent from outside Trellis"
        );
    }
}
