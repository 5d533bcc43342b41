//! Children that die with the process that started them. A worker host (`trellis worker`) runs
//! steps for runs whose controllers live elsewhere: if the host is killed, its steps must not
//! live on beside the copies the run dispatches again. Once [`die_with_this_process`] is called,
//! every child is started through a guard (`PROGRAM __guard -- CHILD ARGS…`), the leader of the
//! child's process group, which kills that group as soon as it is orphaned.
//!
//! The guard, not the child, watches: Linux's parent-death signal needs a `pre_exec` closure
//! (so `fork`) and fires when the spawning *thread* exits, which tokio's pools do; a guard
//! process polling its parent costs one `exec` per step and works from any thread. It waits
//! for its child in a thread of its own, so a step ends when its child does, not at a poll.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getppid};

/// The subcommand the guard program runs as.
pub const GUARD_SUBCOMMAND: &str = "__guard";

/// How often a guard looks whether its parent is still there: the longest an orphaned step
/// outlives its host (well inside any claim lease, so a step is never run twice at once).
pub const GUARD_POLL: Duration = Duration::from_millis(50);

static GUARD_PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// From now on, every child this process starts is guarded by `program` (this binary, which
/// must answer [`GUARD_SUBCOMMAND`] with [`run_guard`]). Later calls change nothing.
pub fn die_with_this_process(program: PathBuf) {
    let _ = GUARD_PROGRAM.set(program);
}

/// The guard program, when this process guards its children.
pub(crate) fn guard_program() -> Option<&'static PathBuf> {
    GUARD_PROGRAM.get()
}

/// Runs the guard: `args` are what follows [`GUARD_SUBCOMMAND`] (`-- PROGRAM ARGS…`). Starts
/// the child in this process group with this environment and these descriptors, then waits
/// for it: its exit code is returned, and a signal that ended it ends the guard the same way.
/// Once the guard's parent is gone, the whole group (the child, its children, the guard) is
/// killed.
pub fn run_guard(args: &[OsString]) -> i32 {
    let mut words = args.iter();
    if words.next().is_some_and(|first| first != "--") {
        eprintln!("trellis: {GUARD_SUBCOMMAND}: usage: {GUARD_SUBCOMMAND} -- PROGRAM [ARGS…]");
        return 2;
    }
    let Some(program) = words.next() else {
        eprintln!("trellis: {GUARD_SUBCOMMAND}: no program to run");
        return 2;
    };
    let parent = getppid();
    let mut child = match Command::new(program).args(words).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "trellis: cannot start {}: {error}",
                program.to_string_lossy()
            );
            // As a shell answers a program it cannot run.
            return 127;
        }
    };
    // A thread blocks in `wait`, so the child's end is seen at once and this thread only
    // looks after the parent. (Polling the child too made every guarded step last at least
    // one poll period: a worker host's queue could not pass ~160 dispatches/s.)
    let (ended, end) = mpsc::channel();
    let waiting = std::thread::Builder::new()
        .name("guard-wait".into())
        .spawn(move || {
            let _ = ended.send(child.wait());
        });
    if waiting.is_err() {
        eprintln!("trellis: {GUARD_SUBCOMMAND}: cannot start its waiting thread");
        return 1;
    }
    loop {
        match end.recv_timeout(GUARD_POLL) {
            Ok(Ok(status)) => {
                if let Some(signal) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
                    // No handler was installed: the default action ends the guard as it
                    // ended the child, so whoever waits sees the same end.
                    let _ = kill(Pid::this(), signal);
                    return 128 + signal as i32;
                }
                return status.code().unwrap_or(1);
            }
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => return 1,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if getppid() != parent {
            // Orphaned: the host is gone. Kill the group (the guard included).
            let _ = kill(Pid::from_raw(0), Signal::SIGKILL);
            return 137;
        }
    }
}
