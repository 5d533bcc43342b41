//! Starting a GraphSpec run: take the workspace lease, create the run in the ledger (idempotent
//! on the submission key), and either spawn its detached controller holding both leases or
//! drive it on this thread.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trellis_ledger::{Admission, NewRun, RunId, RunKind, RunStore};

use crate::controller::{Leases, drive_in_process};
use crate::error::RuntimeError;
use crate::home::{Lease, LeaseAttempt, TrellisHome, lease_note};
use crate::recovery::reconcile;
use crate::submission::Submission;

/// The file descriptors a controller inherits its leases on.
pub(crate) const CONTROLLER_LEASE_FD: i32 = 3;
pub(crate) const WORKSPACE_LEASE_FD: i32 = 4;
/// The hidden subcommand that turns the binary into a run controller.
pub const CONTROLLER_SUBCOMMAND: &str = "__controller";
/// How long a live new controller has to attach to its run: generous, because a loaded machine
/// starting many runs at once can take seconds to schedule it (a controller that dies before
/// attaching is noticed at once by its free lease).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Environment variables a controller keeps besides the plan's connection names (four say
/// where the forge is and how patiently delivery waits on it, the last two whether executions
/// go to worker hosts and how long the controller's lease row lives).
const CONTROLLER_ENV: [&str; 15] = [
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
    // The kill-point tests' hook (supervisor/record.rs); never set otherwise.
    "TRELLIS_TEST_DIE_AFTER_STEP_COMMIT",
    crate::distributed::DISPATCH_ENV,
    crate::distributed::CONTROLLER_LEASE_ENV,
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

/// A run to start.
pub(crate) struct LaunchRequest {
    pub submission: Submission,
    pub title: String,
    pub submission_key: String,
    pub identity: String,
    pub predecessor: Option<RunId>,
    pub start: Start,
}

/// Whether the submission created a run or matched an existing one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Launched {
    Started(RunId),
    Existing(RunId),
}

/// The environment handed to a controller: a few basics plus the named connection variables
/// (values come from this process's environment and never touch disk).
pub(crate) fn controller_env(connection_names: &[String]) -> Vec<(String, String)> {
    CONTROLLER_ENV
        .iter()
        .map(|s| s.to_string())
        .chain(connection_names.iter().cloned())
        .filter_map(|name| std::env::var(&name).ok().map(|value| (name, value)))
        .collect()
}

fn existing_run(
    store: &dyn RunStore,
    request: &LaunchRequest,
) -> Result<Option<RunId>, RuntimeError> {
    let Some(record) = store.find_by_key(&request.submission_key)? else {
        return Ok(None);
    };
    // Same key: the ledger decides whether it is the same submission (or a conflict).
    let probe = new_run(request, record.run_id.clone());
    let (record, _) = store.create_or_get(probe)?;
    Ok(Some(record.run_id))
}

fn new_run(request: &LaunchRequest, run_id: RunId) -> NewRun {
    let mut run = NewRun::new(
        run_id,
        request.submission_key.clone(),
        request.title.clone(),
        RunKind::Graphspec,
        request.submission.to_value(),
    )
    .with_graph_identity(request.identity.clone());
    if let Some(predecessor) = &request.predecessor {
        run = run.with_predecessor(predecessor.clone());
    }
    run
}

/// Creates the run and starts it; an identical earlier submission returns that run.
pub(crate) fn launch(
    home: &TrellisHome,
    store: &std::sync::Arc<dyn RunStore>,
    request: &LaunchRequest,
) -> Result<Launched, RuntimeError> {
    let shared = store.clone();
    let store = store.as_ref();
    if let Some(run_id) = existing_run(store, request)? {
        return Ok(Launched::Existing(run_id));
    }
    let workspace = &request.submission.workspace;
    let workspace_lease = match acquire(&home.workspace_lease_path(workspace))? {
        Some(lease) => lease,
        None => {
            // A concurrent identical submission may hold it; give it a moment to admit.
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Some(run_id) = existing_run(store, request)? {
                    return Ok(Launched::Existing(run_id));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let holder = lease_note(&home.workspace_lease_path(workspace))
                .map(|note| format!(" ({note})"))
                .unwrap_or_default();
            return Err(RuntimeError::WorkspaceBusy {
                workspace: workspace.clone(),
                holder,
            });
        }
    };
    let run_id = RunId::generate();
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot create the run directory", e))?;
    let controller_lease = acquire(&lease_path)?
        .ok_or_else(|| RuntimeError::Internal("a fresh run id is already leased".into()))?;
    let (record, admission) = match store.create_or_get(new_run(request, run_id.clone())) {
        Ok(admitted) => admitted,
        Err(error) => {
            // Nothing was admitted (busy or broken ledger, conflict): leave no trace of the run.
            drop(controller_lease);
            discard_run_dir(&lease_path);
            return Err(error.into());
        }
    };
    if admission == Admission::Existing {
        drop(controller_lease);
        discard_run_dir(&lease_path);
        return Ok(Launched::Existing(record.run_id));
    }
    let _ = workspace_lease.describe(&format!("run {}", run_id.as_str()));
    let _ = controller_lease.describe(&format!("controller of run {}", run_id.as_str()));
    let (program, env) = match &request.start {
        Start::InProcess => {
            let leases = Leases {
                controller: controller_lease,
                workspace: workspace_lease,
            };
            drive_in_process(home, shared, &run_id, leases)?;
            return Ok(Launched::Started(run_id));
        }
        Start::Detached { program, env } => (program, env),
    };
    let started = home
        .controller_log_path(run_id.as_str())
        .and_then(File::create)
        .map_err(|e| RuntimeError::io("cannot create the controller log", e))
        .and_then(|log| {
            spawn_controller(
                program,
                &request.submission.workspace,
                &run_id,
                env,
                &controller_lease,
                Some(&workspace_lease),
                log,
            )
        });
    drop(controller_lease);
    drop(workspace_lease);
    match started.and_then(|()| wait_until_attached(store, &run_id, home)) {
        Ok(()) => Ok(Launched::Started(run_id)),
        Err(cause) => {
            // The run exists: end it now if its controller is gone (it then reads
            // `runtime_lost`) and say which run it is, so nobody is left with an unnamed run.
            let _ = reconcile(store, home, &run_id);
            Err(RuntimeError::NotStarted {
                run: run_id.as_str().to_owned(),
                cause: Box::new(cause),
            })
        }
    }
}

/// Removes the directory of a run that was never admitted (the lease file's parent).
fn discard_run_dir(lease_path: &Path) {
    if let Some(run_dir) = lease_path.parent() {
        let _ = std::fs::remove_dir_all(run_dir);
    }
}

pub(crate) fn acquire(path: &Path) -> Result<Option<Lease>, RuntimeError> {
    match Lease::try_acquire(path).map_err(|e| RuntimeError::io("cannot take a lease", e))? {
        LeaseAttempt::Acquired(lease) => Ok(Some(lease)),
        LeaseAttempt::HeldElsewhere => Ok(None),
    }
}

/// Starts `program __controller RUN` in its own session in `workspace`, handing it the run's
/// lease (and the workspace's, when the run holds one) on the agreed descriptors.
pub(crate) fn spawn_controller(
    program: &Path,
    workspace: &Path,
    run_id: &RunId,
    env: &[(String, String)],
    controller_lease: &Lease,
    workspace_lease: Option<&Lease>,
    log: File,
) -> Result<(), RuntimeError> {
    let controller_fd = controller_lease.file().as_raw_fd();
    let workspace_fd = workspace_lease.map(|lease| lease.file().as_raw_fd());
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
    // SAFETY: only async-signal-safe calls between fork and exec: setsid and dup2.
    unsafe {
        command.pre_exec(move || {
            // A new session: the terminal's Ctrl-C never reaches the controller.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for (from, to) in [
                (Some(controller_fd), CONTROLLER_LEASE_FD),
                (workspace_fd, WORKSPACE_LEASE_FD),
            ] {
                if let Some(from) = from
                    && libc::dup2(from, to) < 0
                {
                    return Err(std::io::Error::last_os_error());
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
    Ok(())
}

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
