//! Children that die with the process that started them. A worker host (`trellis worker`) runs
//! steps for runs whose controllers live elsewhere: if the host is killed, its steps must not
//! live on beside the copies the run dispatches again. Once [`die_with_this_process`] is called,
//! one watchdog process (`PROGRAM __guard TOKEN`) watches this process for its whole life: each
//! child's process group is registered with it over a pipe, and when the pipe closes (this
//! process ended, however it died) the watchdog kills every group still alive.
//!
//! Why a watchdog and not the child itself: Linux's parent-death signal needs a `pre_exec`
//! closure (so `fork`) and fires when the spawning *thread* exits, which tokio's pools do. Why
//! one watchdog and not one guard per child: a guard per child cost an `exec` of this binary
//! per step, the largest cost of a busy worker host's dispatch. A child that ends the host
//! between its start and its registration is still found: every child carries the watchdog's
//! token in its environment, and the watchdog looks for it in `/proc` before it exits.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, getpgid};

/// The subcommand the watchdog program runs as.
pub const GUARD_SUBCOMMAND: &str = "__guard";

/// The environment variable every guarded child carries: the watchdog's token.
pub const GUARD_TOKEN_VARIABLE: &str = "TRELLIS_GUARD_TOKEN";

/// Registered groups a watchdog keeps before it forgets those that ended.
const FIRST_PRUNE_AT: usize = 256;

struct Watchdog {
    program: PathBuf,
    token: String,
    link: Mutex<Option<Link>>,
}

/// The running watchdog and the write end of its pipe.
struct Link {
    process: Child,
    registrations: ChildStdin,
}

static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();

/// From now on, every child this process starts dies with it: a watchdog of `program` (this
/// binary, which must answer [`GUARD_SUBCOMMAND`] with [`run_guard`]) is started now. Later
/// calls only restart a watchdog that died.
pub fn die_with_this_process(program: PathBuf) -> Result<(), String> {
    let watchdog = WATCHDOG.get_or_init(|| Watchdog {
        program,
        token: format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos())
                .unwrap_or_default()
        ),
        link: Mutex::new(None),
    });
    let mut link = watchdog.lock();
    if link.is_none() {
        *link = Some(watchdog.start()?);
    }
    Ok(())
}

/// The variable and value a child must carry to be found by this process's watchdog.
pub(crate) fn guard_marker() -> Option<(&'static str, &'static str)> {
    WATCHDOG
        .get()
        .map(|watchdog| (GUARD_TOKEN_VARIABLE, watchdog.token.as_str()))
}

/// Registers a just-started child's process group with the watchdog, when there is one. A
/// watchdog that died is started again; an error means the group is not guarded.
pub(crate) fn watch_group(pgid: u32) -> Result<(), String> {
    let Some(watchdog) = WATCHDOG.get() else {
        return Ok(());
    };
    let line = format!("{pgid}\n");
    let mut link = watchdog.lock();
    if let Some(current) = link.as_mut()
        && current.registrations.write_all(line.as_bytes()).is_ok()
    {
        return Ok(());
    }
    if let Some(mut dead) = link.take() {
        let _ = dead.process.wait();
    }
    let mut fresh = watchdog.start()?;
    fresh
        .registrations
        .write_all(line.as_bytes())
        .map_err(|error| format!("cannot register a child with its watchdog: {error}"))?;
    *link = Some(fresh);
    Ok(())
}

impl Watchdog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Link>> {
        self.link
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn start(&self) -> Result<Link, String> {
        let mut command = Command::new(&self.program);
        command
            .arg(GUARD_SUBCOMMAND)
            .arg(&self.token)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // Its own group: a Ctrl-C meant for this process must not end the watchdog first.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut process = command.spawn().map_err(|error| {
            format!(
                "cannot start the child watchdog {}: {error}",
                self.program.display()
            )
        })?;
        let Some(registrations) = process.stdin.take() else {
            let _ = process.kill();
            let _ = process.wait();
            return Err("cannot start the child watchdog: its pipe is missing".to_owned());
        };
        Ok(Link {
            process,
            registrations,
        })
    }
}

/// Runs the watchdog: `args` are what follows [`GUARD_SUBCOMMAND`] (`TOKEN`). Reads one
/// process group id per line from stdin until the pipe closes, then kills every registered
/// group still alive and every process carrying `TOKEN`, and exits.
pub fn run_guard(args: &[OsString]) -> i32 {
    let Some(token) = args.first().and_then(|token| token.to_str()) else {
        eprintln!("trellis: {GUARD_SUBCOMMAND}: usage: {GUARD_SUBCOMMAND} TOKEN");
        return 2;
    };
    let mut groups: HashMap<i32, Option<u64>> = HashMap::new();
    let mut prune_at = FIRST_PRUNE_AT;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(pgid) = line.trim().parse::<i32>() else {
            continue;
        };
        if pgid > 1 {
            // The leader's start time tells the group from a later one that reuses its id.
            groups.insert(pgid, start_time(pgid));
        }
        if groups.len() >= prune_at {
            groups.retain(|pgid, _| group_exists(*pgid));
            prune_at = FIRST_PRUNE_AT.max(groups.len() * 2);
        }
    }
    // The parent is gone.
    for (pgid, started) in groups {
        if still_ours(pgid, started) {
            let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
        }
    }
    kill_marked(token);
    0
}

fn group_exists(pgid: i32) -> bool {
    kill(Pid::from_raw(-pgid), None).is_ok()
}

/// Whether group `pgid` is still the one registered. A pid is never reused while a group of
/// that id lives, so a group whose leader is gone is ours; a leader alive with another start
/// time is a new process.
fn still_ours(pgid: i32, started: Option<u64>) -> bool {
    match start_time(pgid) {
        None => true,
        now => now == started,
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Kills every process whose environment carries `token`, with its process group.
fn kill_marked(token: &str) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let wanted = format!("{GUARD_TOKEN_VARIABLE}={token}");
    let me = std::process::id();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environment) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let marked = environment
            .split(|byte| *byte == 0)
            .any(|variable| variable == wanted.as_bytes());
        if !marked {
            continue;
        }
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        let process = Pid::from_raw(pid);
        if let Ok(group) = getpgid(Some(process))
            && group.as_raw() > 1
        {
            let _ = kill(Pid::from_raw(-group.as_raw()), Signal::SIGKILL);
        }
        let _ = kill(process, Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_reads_past_a_name_with_spaces_and_parentheses() {
        let mine = start_time(i32::try_from(std::process::id()).unwrap());
        assert!(mine.is_some());
        assert_eq!(start_time(i32::MAX), None);
    }

    #[test]
    fn a_group_whose_leader_is_gone_is_ours_and_a_new_leader_is_not() {
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(still_ours(me, start_time(me)));
        assert!(!still_ours(me, start_time(me).map(|ticks| ticks + 1)));
        assert!(still_ours(i32::MAX, Some(5)));
    }
}
