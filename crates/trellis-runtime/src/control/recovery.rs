//! Finalizing runs whose owner is gone: any command that finds a non-terminal run with a free
//! controller lease settles its active executions as `crash` and ends it `runtime_lost`,
//! removing what the dead controller left on this host (verifier copies, environment services).

use trellis_graph::{WorkerErrorCode, WorkerOutcome};
use trellis_ledger::{
    LedgerError, LogLevel, LogStream, RunEvent, RunId, RunStore, SettledBy, TerminalResult,
};

use crate::checkpoints::copy_places::CopyPlaces;
use crate::shared::environment::{ENVIRONMENT_DIR, SERVICES_FILE};
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt, TrellisHome};

/// What reconciliation found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The run had already ended.
    Finished,
    /// Its controller holds the lease.
    Alive,
    /// Its controller was gone; the run is now `runtime_lost`.
    FinalizedLost,
}

/// Checks the run's owner and finalizes the run if the owner is gone.
pub fn reconcile(
    store: &dyn RunStore,
    home: &TrellisHome,
    run_id: &RunId,
) -> Result<Liveness, RuntimeError> {
    if store.head(run_id)?.is_finished() {
        return Ok(Liveness::Finished);
    }
    if store.as_postgres().is_some() {
        // A run on a shared ledger is held by its lease row, not a file of this host: when
        // its controller is gone, a serving host takes the run over (`distributed::takeover`)
        // and continues it; observers never end it.
        return Ok(Liveness::Alive);
    }
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
    let lease = match Lease::try_acquire(&lease_path)
        .map_err(|e| RuntimeError::io("cannot check the controller lease", e))?
    {
        LeaseAttempt::HeldElsewhere => return Ok(Liveness::Alive),
        LeaseAttempt::Acquired(lease) => lease,
    };
    // Holding the lease, nobody else can be appending for this run.
    let finalized = finalize(store, run_id, TerminalReason::RuntimeLost);
    if matches!(finalized, Ok(true)) {
        remove_dead_copies(home, run_id);
        stop_dead_services(home, run_id);
    }
    drop(lease);
    finalized.map(|done| {
        if done {
            Liveness::FinalizedLost
        } else {
            Liveness::Finished
        }
    })
}

/// Removes the verifier copies a dead controller of `run_id` left (in memory they would stay
/// until the machine restarts). The caller holds the run's lease. Best effort: a copy that
/// cannot be removed now is `trellis prune`'s to remove later.
pub(crate) fn remove_dead_copies(home: &TrellisHome, run_id: &RunId) {
    if let Some(places) = CopyPlaces::of_existing_run(home, run_id.as_str()) {
        let _ = places.remove_all();
    }
}

/// Stops the services a dead controller of `run_id` left running (the process groups its
/// environment's startup hooks listed) and removes its environment directory. The caller holds
/// the run's lease. On this host only: the groups are this host's.
pub(crate) fn stop_dead_services(home: &TrellisHome, run_id: &RunId) {
    let run_dir = home.run_path(run_id.as_str());
    let listing = run_dir.join(SERVICES_FILE);
    if let Ok(text) = std::fs::read_to_string(&listing) {
        for group in text
            .lines()
            .filter_map(|line| line.trim().parse::<u32>().ok())
        {
            trellis_process::kill_group(group);
        }
        let _ = std::fs::remove_file(&listing);
    }
    let _ = std::fs::remove_dir_all(run_dir.join(ENVIRONMENT_DIR));
}

/// Why Trellis ends a run on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalReason {
    RuntimeLost,
    ForceStopped,
    BudgetExhausted,
}

impl TerminalReason {
    pub fn label(self) -> &'static str {
        match self {
            Self::RuntimeLost => "runtime_lost",
            Self::ForceStopped => "force_stopped",
            Self::BudgetExhausted => "budget_exhausted",
        }
    }

    fn settled_by(self) -> SettledBy {
        match self {
            Self::RuntimeLost => SettledBy::RuntimeLost,
            Self::ForceStopped => SettledBy::ForceStop,
            Self::BudgetExhausted => SettledBy::BudgetExhausted,
        }
    }

    /// The outcome an execution interrupted this way settles with.
    fn outcome(self) -> WorkerOutcome {
        match self {
            Self::RuntimeLost => WorkerOutcome::failure(WorkerErrorCode::Crash),
            Self::ForceStopped | Self::BudgetExhausted => {
                WorkerOutcome::failure(WorkerErrorCode::Refusal)
            }
        }
    }
}

/// Settles every active execution and appends the terminal, atomically against the cursor
/// read. Returns false if the run had already finished. A run found lost has its dead
/// controller's worker groups killed; otherwise the caller stopped its own workers.
pub fn finalize(
    store: &dyn RunStore,
    run_id: &RunId,
    reason: TerminalReason,
) -> Result<bool, RuntimeError> {
    finalize_and_kill(store, run_id, reason, reason == TerminalReason::RuntimeLost)
}

/// Like [`finalize`], for a run whose controller is gone (the caller holds its lease): the
/// worker process groups its active executions recorded are killed whatever the reason, so
/// stopping a dead run leaves no orphan changing the workspace.
pub fn finalize_orphaned(
    store: &dyn RunStore,
    run_id: &RunId,
    reason: TerminalReason,
) -> Result<bool, RuntimeError> {
    finalize_and_kill(store, run_id, reason, true)
}

/// Like [`finalize`] for a run on a shared ledger whose controller was on some host and is
/// gone (the caller holds its lease): nothing is killed here, since the process groups the
/// run recorded belong to that host, where pids mean other processes.
pub fn finalize_abandoned(store: &dyn RunStore, run_id: &RunId) -> Result<bool, RuntimeError> {
    finalize_and_kill(store, run_id, TerminalReason::RuntimeLost, false)
}

fn finalize_and_kill(
    store: &dyn RunStore,
    run_id: &RunId,
    reason: TerminalReason,
    kill_workers: bool,
) -> Result<bool, RuntimeError> {
    loop {
        let snapshot = store.snapshot(run_id)?;
        if snapshot.head.is_finished() {
            return Ok(false);
        }
        let active: Vec<u64> = snapshot
            .head
            .progress
            .active_executions
            .keys()
            .copied()
            .collect();
        let mut events: Vec<RunEvent> = active
            .iter()
            .map(|&execution| RunEvent::NodeCompleted {
                execution,
                outcome: reason.outcome(),
                reused_from: None,
                settled_by: Some(reason.settled_by()),
            })
            .collect();
        let note = match reason {
            TerminalReason::RuntimeLost => format!(
                "the run's controller is gone; {} active execution(s) settled as crash",
                active.len()
            ),
            TerminalReason::ForceStopped => "force-stopped".to_owned(),
            TerminalReason::BudgetExhausted => "budget exhausted".to_owned(),
        };
        events.push(RunEvent::Log {
            execution: None,
            stream: LogStream::System,
            level: LogLevel::Warn,
            message: note,
            timestamp_ms: trellis_ledger::store::now_ms(),
        });
        events.push(RunEvent::Terminal {
            result: TerminalResult::Failed {
                reason: reason.label().to_owned(),
            },
        });
        match store.append_at(run_id, snapshot.head.cursor, &events) {
            Ok(_) => {
                if kill_workers && same_boot(&snapshot) {
                    // Workers of a dead controller must not keep changing the workspace.
                    for id in &active {
                        if let Some(group) =
                            snapshot.executions.get(id).and_then(|e| e.process_group)
                        {
                            trellis_process::kill_group(group);
                        }
                    }
                }
                return Ok(true);
            }
            Err(LedgerError::StaleCursor { .. }) => continue,
            Err(other) => return Err(other.into()),
        }
    }
}

/// True when the run's controller ran on this machine since its last boot, so recorded process
/// groups still name its workers.
fn same_boot(snapshot: &trellis_ledger::RunSnapshot) -> bool {
    let Some(controller) = &snapshot.head.progress.controller else {
        return false;
    };
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned());
    controller.boot_id.is_some()
        && controller.boot_id == boot
        && host.as_deref() == Some(controller.host.as_str())
}

/// Wakes a run's controller with SIGTERM so it reads a force-stop request at once, after
/// checking that the pid still runs that run's controller (a stale pid gets no signal).
pub(crate) fn wake_controller(pid: u32, run_id: &RunId) {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    if cmdline.contains(super::spawn::CONTROLLER_SUBCOMMAND)
        && cmdline.contains(run_id.as_str())
        && let Ok(pid) = i32::try_from(pid)
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}
