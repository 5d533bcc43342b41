//! Starting a GaP run as a controlled run — under a detached controller process (`trellis run
//! --detach`, `trellis resume`) or on this thread — and the body of that controller.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use trellis_agents::Isolation;

use trellis_ledger::{Admission, NewRun, RunId, RunKind, RunStore};

use super::admission::{self as gap_admission, GapRun};
use super::containment;
use super::journal::Lineage;
use super::runner as gap_runner;
use crate::control::lease::{CONTROLLER_LEASE_FD, inherited_lease};
use crate::control::spawn::{
    Inherited, Launched, Start, die_before_controller_start_if_asked, spawn_controller,
    wait_until_attached,
};
use crate::shared::error::RuntimeError;
use crate::shared::home::{Lease, LeaseAttempt, TrellisHome};

/// Variables a detached GaP controller keeps besides the basics and the declared secret
/// names: the executor's own settings and where Python modules are found.
pub(crate) const GAP_CONTROLLER_ENV: [&str; 6] = [
    "PYTHONPATH",
    "GAP_ITERATION_CAP",
    "GAP_OBSERVATION_STREAM_HZ",
    "GAP_PARALLEL_CANCEL_GRACE_S",
    "GAP_SCRIPT_TIMEOUT_S",
    "GAP_TRACE_STREAM_SAMPLE_N",
];

/// A GaP run to create and start.
pub(crate) struct GapLaunch {
    pub run: GapRun,
    pub title: String,
    pub submission_key: String,
    pub predecessor: Option<RunId>,
}

fn new_run(launch: &GapLaunch, run_id: RunId) -> NewRun {
    let mut run = NewRun::new(
        run_id,
        launch.submission_key.clone(),
        launch.title.clone(),
        RunKind::Gap,
        launch.run.submission(),
    );
    if let Some(predecessor) = &launch.predecessor {
        run = run.with_predecessor(predecessor.clone());
    }
    run
}

/// Creates the run (an identical earlier submission returns that run) and starts it.
pub(crate) fn launch(
    home: &TrellisHome,
    store: &Arc<dyn RunStore>,
    launch: GapLaunch,
    start: Start,
) -> Result<Launched, RuntimeError> {
    if let Some(record) = store.find_by_key(&launch.submission_key)? {
        // Same key: the ledger decides whether it is the same submission (or a conflict).
        let (record, _) = store.create_or_get(new_run(&launch, record.run_id))?;
        return Ok(Launched::Existing(record.run_id));
    }
    let run_id = RunId::generate();
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot create the run directory", e))?;
    let LeaseAttempt::Acquired(lease) = Lease::try_acquire(&lease_path)
        .map_err(|e| RuntimeError::io("cannot take the run lease", e))?
    else {
        return Err(RuntimeError::Internal(
            "a fresh run id is already leased".into(),
        ));
    };
    let (record, admission) = store.create_or_get(new_run(&launch, run_id.clone()))?;
    if admission == Admission::Existing {
        return Ok(Launched::Existing(record.run_id));
    }
    die_before_controller_start_if_asked();
    let _ = lease.describe(&format!("controller of gap run {}", run_id.as_str()));
    let (program, env) = match start {
        Start::InProcess => {
            let lineage = Lineage::read(store.as_ref(), launch.predecessor.clone())?;
            gap_runner::drive(store.clone(), &run_id, launch.run, lineage, &|_| {})?;
            drop(lease);
            return Ok(Launched::Started(run_id));
        }
        Start::Detached { program, env } => (program, env),
    };
    let log = home
        .controller_log_path(run_id.as_str())
        .and_then(File::create)
        .map_err(|e| RuntimeError::io("cannot create the controller log", e))?;
    spawn_controller(
        &program,
        &launch.run.workflow.workflow_dir,
        &run_id,
        &env,
        Inherited {
            controller_lease: &lease,
            workspace_lease: None,
            notes_from: store.as_postgres(),
        },
        log,
    )?;
    drop(lease);
    wait_until_attached(store.as_ref(), &run_id, home)?;
    Ok(Launched::Started(run_id))
}

/// The body of a detached GaP controller: adopts the run's lease, admits the stored
/// submission again and drives the run to its end, replaying what its lineage settled, its
/// bodies contained as `isolation` says.
pub(crate) fn run_detached(
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    record: &trellis_ledger::RunRecord,
    isolation: Isolation,
    trellis_home: &Path,
) -> Result<(), RuntimeError> {
    let lease = inherited_lease(CONTROLLER_LEASE_FD)?;
    let mut run = gap_admission::readmit(&record.submission, run_id.as_str())?;
    // Its bodies run where this controller was started: the workflow's folder.
    let workspace = std::env::current_dir()
        .map_err(|e| RuntimeError::io("cannot read the current directory", e))?;
    containment::contain(&mut run, isolation, &workspace, trellis_home)?;
    let lineage = Lineage::read(store.as_ref(), record.predecessor.clone())?;
    ignore_wake_signal()?;
    gap_runner::drive(store, run_id, run, lineage, &|_| {})?;
    drop(lease);
    Ok(())
}

/// `force-stop` wakes a controller with SIGTERM; this one polls the ledger for the request
/// instead, so the signal only has to not kill it. A handler (not `SIG_IGN`) is installed so
/// the scripts and tools it starts get the default disposition back at `exec`.
fn ignore_wake_signal() -> Result<(), RuntimeError> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    extern "C" fn woken(_: libc::c_int) {}
    let action = SigAction::new(
        SigHandler::Handler(woken),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    unsafe { sigaction(Signal::SIGTERM, &action) }
        .map(|_| ())
        .map_err(|e| RuntimeError::io("cannot handle SIGTERM", std::io::Error::from(e)))
}
