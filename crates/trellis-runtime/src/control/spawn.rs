//! Starting a detached controller process (`PROGRAM __controller RUN`) for either kind of
//! run: the environment it is handed, the descriptors it inherits (leases, the relay of its
//! ledger notes), and the wait until it attached to its run.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trellis_agents::access::AGENT_CONFIG_ENV;
use trellis_ledger::postgres::config::POOL_SIZE_ENV;
use trellis_ledger::{PostgresStore, RunId, RunStore};

use super::lease::{
    CONTROLLER_LEASE_FD, NOTE_RELAY_ENV, NOTE_RELAY_FD, WORKSPACE_LEASE_FD, acquire,
};
use crate::plan::Connections;
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, TrellisHome};

/// Says how a controller runs its command and agent bindings: `queue` hands them to worker
/// hosts (`trellis worker`) through the ledger; anything else, or unset, runs them here.
pub const DISPATCH_ENV: &str = "TRELLIS_DISPATCH";
/// The controller lease's time to live in milliseconds (default 15,000); renewed every third.
pub const CONTROLLER_LEASE_ENV: &str = "TRELLIS_CONTROLLER_LEASE_MS";

/// Test hook, read by the submitting process: set, it aborts right after creating a run and
/// before starting its controller, as a host killed at that moment would. The revival tests
/// use it to pin that the client's retry gets a run that runs. Unset (always, outside those
/// tests), it costs one environment lookup per submission.
pub const DIE_BEFORE_CONTROLLER_START_ENV: &str = "TRELLIS_TEST_DIE_BEFORE_CONTROLLER_START";

/// Aborts the process when the test hook [`DIE_BEFORE_CONTROLLER_START_ENV`] is set.
pub(crate) fn die_before_controller_start_if_asked() {
    if std::env::var_os(DIE_BEFORE_CONTROLLER_START_ENV).is_some() {
        std::process::abort();
    }
}

/// The hidden subcommand that turns the binary into a run controller.
pub const CONTROLLER_SUBCOMMAND: &str = "__controller";
/// How long a live new controller has to attach to its run: generous, because a loaded machine
/// starting many runs at once can take seconds to schedule it (a controller that dies before
/// attaching is noticed at once by its free lease).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Environment variables a controller keeps besides the plan's connection names (six say
/// where the forge is and how patiently delivery waits on it and retries, the last two whether executions
/// go to worker hosts, whether they are contained and how long the controller's lease row
/// lives, then the limits of environment hooks).
const CONTROLLER_ENV: [&str; 25] = [
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "TRELLIS_HOME",
    "TRELLIS_PYTHON",
    "GITHUB_API_URL",
    "GITHUB_SERVER_URL",
    "TRELLIS_DELIVERY_POLL_MS",
    "TRELLIS_DELIVERY_WAIT_S",
    "TRELLIS_DELIVERY_RETRY_MS",
    "TRELLIS_DELIVERY_REQUEST_TIMEOUT_MS",
    // The kill-point tests' hook (supervisor/record.rs); never set otherwise.
    "TRELLIS_TEST_DIE_AFTER_STEP_COMMIT",
    DISPATCH_ENV,
    super::isolation::ISOLATION_ENV,
    CONTROLLER_LEASE_ENV,
    // The host's limits on a run's environment hooks (lowered by tests).
    crate::shared::environment::HOOK_LIMIT_ENV,
    crate::shared::environment::HOOKS_BUDGET_ENV,
    // How a PostgreSQL ledger is reached, as the host that starts the controller reaches it:
    // the driver's variables (a password kept out of the URL) and the outage window.
    "PGPASSWORD",
    "PGUSER",
    "PGHOST",
    "PGDATABASE",
    trellis_ledger::postgres::config::OUTAGE_WINDOW_ENV,
];

/// How a created run is driven.
pub(crate) enum Start {
    /// By `program __controller RUN`, a detached process given `env` (and nothing else).
    Detached {
        program: PathBuf,
        env: Vec<(String, String)>,
    },
    /// On this thread, until the run ends.
    InProcess,
}

/// Whether the submission created a run or matched an existing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Launched {
    Started(RunId),
    Existing(RunId),
}

/// The environment handed to a controller: a few basics from this process's environment plus
/// the named connection variables, valued by `connections` (a caller's values over this
/// host's, as its operator allows). Values travel in the environment only, never on disk.
pub(crate) fn controller_env(
    connection_names: &[String],
    connections: &Connections,
) -> Vec<(String, String)> {
    // The user's own agent configuration (a proxy's base URL, a CLI's configuration
    // directory) travels too, for native lanes to keep.
    let basics = CONTROLLER_ENV
        .iter()
        .chain(AGENT_CONFIG_ENV.iter())
        .filter(|name| !connection_names.iter().any(|known| known == *name))
        .filter_map(|name| {
            std::env::var(name)
                .ok()
                .map(|value| (name.to_string(), value))
        });
    let named = connection_names
        .iter()
        .filter_map(|name| connections.value(name).map(|value| (name.clone(), value)));
    // One run needs few ledger connections; many concurrent runs, each a process with a
    // pool of its own, must fit in a PostgreSQL server's `max_connections`.
    let pool = std::env::var(POOL_SIZE_ENV).unwrap_or_else(|_| CONTROLLER_POOL_SIZE.to_owned());
    basics
        .chain(named)
        .chain(std::iter::once((POOL_SIZE_ENV.to_owned(), pool)))
        .collect()
}

/// A detached controller's ledger pool when the host's environment does not set one.
const CONTROLLER_POOL_SIZE: &str = "4";

/// Whether `name` is one of the variables the runtime itself hands a controller (its ledger,
/// leases, dispatch, …), which no caller may set.
pub(crate) fn controller_owned(name: &str) -> bool {
    CONTROLLER_ENV.contains(&name) || name == trellis_ledger::LEDGER_ENV || name == POOL_SIZE_ENV
}

/// What a new controller inherits besides its environment: its run's lease, its workspace's
/// (when the run holds one), and the ledger whose notes this process relays to it (a
/// PostgreSQL one: the controller then opens no listening connection of its own).
pub(crate) struct Inherited<'a> {
    pub controller_lease: &'a Lease,
    pub workspace_lease: Option<&'a Lease>,
    pub notes_from: Option<&'a PostgresStore>,
}

/// Starts `program __controller RUN` in its own session in `workspace`, handing it what it
/// inherits on the agreed descriptors.
pub(crate) fn spawn_controller(
    program: &Path,
    workspace: &Path,
    run_id: &RunId,
    env: &[(String, String)],
    inherited: Inherited<'_>,
    log: File,
) -> Result<(), RuntimeError> {
    // A relay that cannot be set up only costs the controller a connection of its own.
    let relay = inherited
        .notes_from
        .and_then(|store| UnixStream::pair().ok().map(|pair| (store, pair)));
    let sources = [
        Some(inherited.controller_lease.file().as_raw_fd()),
        inherited
            .workspace_lease
            .map(|lease| lease.file().as_raw_fd()),
        relay.as_ref().map(|(_, (_, theirs))| theirs.as_raw_fd()),
    ];
    let targets = [CONTROLLER_LEASE_FD, WORKSPACE_LEASE_FD, NOTE_RELAY_FD];
    let stderr = log
        .try_clone()
        .map_err(|e| RuntimeError::io("cannot open the controller log", e))?;
    let mut command = Command::new(program);
    command
        .arg(CONTROLLER_SUBCOMMAND)
        .arg(run_id.as_str())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(stderr);
    if relay.is_some() {
        command.env(NOTE_RELAY_ENV, NOTE_RELAY_FD.to_string());
    }
    // SAFETY: only async-signal-safe calls between fork and exec: setsid, fcntl, dup2, close.
    unsafe {
        command.pre_exec(move || {
            // A new session: the terminal's Ctrl-C never reaches the controller.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Each source is first copied above the targets, so placing one never closes
            // another that happens to sit on a target's number, and the placed copy is never
            // close-on-exec (dup2 onto the same number would keep that flag).
            let mut staged = [-1; 3];
            for (slot, source) in staged.iter_mut().zip(sources) {
                if let Some(source) = source {
                    *slot = libc::fcntl(source, libc::F_DUPFD, STAGING_FD_FLOOR);
                    if *slot < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            for (staged, target) in staged.into_iter().zip(targets) {
                if staged >= 0 {
                    if libc::dup2(staged, target) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    libc::close(staged);
                }
            }
            Ok(())
        });
    }
    let mut controller = command.spawn().map_err(|e| {
        RuntimeError::ControllerStart(format!("cannot start {}: {e}", program.display()))
    })?;
    // Reap it when it ends, so a long-lived parent (`trellis serve`) keeps no zombie per run;
    // the thread only waits and never holds the parent's own exit back.
    let reaper = std::thread::Builder::new()
        .name("controller-reaper".to_owned())
        .stack_size(REAPER_STACK_BYTES)
        .spawn(move || {
            let _ = controller.wait();
        });
    // Without a thread the child is reaped when this process exits, as before.
    drop(reaper);
    if let Some((store, (ours, theirs))) = relay {
        // Our copy of the controller's end must close, or its exit would never be noticed.
        drop(theirs);
        let _ = store.relay_notes(ours);
    }
    Ok(())
}

/// Descriptors are staged at or above this number while being placed on their targets.
const STAGING_FD_FLOOR: i32 = 10;

/// A reaper thread only blocks in `wait`: a small stack is plenty.
const REAPER_STACK_BYTES: usize = 64 * 1024;

/// Waits until the new controller attached to its run (or the run already ended).
pub(crate) fn wait_until_attached(
    store: &dyn RunStore,
    run_id: &RunId,
    home: &TrellisHome,
) -> Result<(), RuntimeError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let head = store.head(run_id)?;
        if head.progress.controller.is_some() || head.is_finished() {
            return Ok(());
        }
        // The lease is free only if the controller already died.
        let lease_path = home
            .controller_lease_path(run_id.as_str())
            .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
        if let Some(lease) = acquire(&lease_path)? {
            drop(lease);
            // A fast controller may have attached, finished and exited between the head read
            // above and this look at its lease: only a head still without it means it died.
            let head = store.head(run_id)?;
            if head.progress.controller.is_some() || head.is_finished() {
                return Ok(());
            }
            let log = home
                .controller_log_path(run_id.as_str())
                .ok()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .unwrap_or_default();
            return Err(RuntimeError::ControllerStart(format!(
                "the controller exited before attaching: {}",
                log.trim().lines().last().unwrap_or("no output")
            )));
        }
        if Instant::now() > deadline {
            return Err(RuntimeError::ControllerStart(format!(
                "the controller did not attach within {} seconds",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
