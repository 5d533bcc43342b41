//! The controller of one run: holds its leases (inherited by a detached controller process, or
//! taken by an in-process driver), re-admits the stored submission, builds the harnesses and
//! drives the supervisor to the run's end.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::sync::Arc;

use trellis_agents::{ExecHarness, SecretEnv};
use trellis_ledger::{RunEvent, RunId, RunStore};

use crate::admission::{Readmitted, readmit};
use crate::delivery::{ForgeSettings, GitDelivery, delivery_workers};
use crate::error::RuntimeError;
use crate::gap_runner::controller_attached;
use crate::harnesses::agent_harness;
use crate::home::{Lease, TrellisHome};
use crate::launch::{CONTROLLER_LEASE_FD, WORKSPACE_LEASE_FD};
use crate::reuse::ReuseIndex;
use crate::supervisor::{Harnesses, RunContext, Supervisor};

/// Adopts a lease whose locked descriptor this process inherited at `fd`.
fn inherited_lease(fd: i32) -> Result<Lease, RuntimeError> {
    // SAFETY: fcntl(F_GETFD) only inspects the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(RuntimeError::ControllerStart(format!(
            "lease descriptor {fd} was not inherited; controllers are started by `trellis run`"
        )));
    }
    // Workers must not inherit the lease: it has to die with this process.
    // SAFETY: fcntl(F_SETFD) only changes the descriptor's close-on-exec flag.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(RuntimeError::io(
            "cannot protect the lease descriptor",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: the descriptor is open (checked above) and owned by nothing else in this process.
    let file = unsafe { File::from_raw_fd(fd) };
    Ok(Lease::from_inherited(file))
}

/// How many predecessors a resumed run looks back through for settled work.
const MAX_LINEAGE: usize = 1024;

/// The snapshots of a run's predecessors, nearest first.
fn lineage(
    store: &dyn RunStore,
    mut previous: Option<RunId>,
) -> Result<Vec<trellis_ledger::RunSnapshot>, RuntimeError> {
    let mut snapshots = Vec::new();
    while let Some(run_id) = previous.take() {
        if snapshots.len() == MAX_LINEAGE {
            break;
        }
        let snapshot = store.snapshot(&run_id)?;
        previous = snapshot.head.predecessor.clone();
        snapshots.push(snapshot);
    }
    Ok(snapshots)
}

/// The two leases a controller holds for its whole life: its run's and its workspace's.
pub(crate) struct Leases {
    pub controller: Lease,
    pub workspace: Lease,
}

/// Runs the controller of `run_id` to completion in a process started by `launch`, adopting
/// the leases it inherited.
pub(crate) fn run_detached(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
) -> Result<(), RuntimeError> {
    let controller = inherited_lease(CONTROLLER_LEASE_FD)?;
    let record = store.record(run_id)?;
    let admitted = readmit(&record.submission, run_id.as_str())?;
    let workspace = inherited_lease(WORKSPACE_LEASE_FD)?;
    let leases = Leases {
        controller,
        workspace,
    };
    let lineage = lineage(store.as_ref(), record.predecessor)?;
    drive(home, store, run_id, admitted, lineage, leases, true)
}

/// Drives `run_id` to its end on this thread, taking its leases itself (the run was just
/// created by this process, which holds them).
pub(crate) fn drive_in_process(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    leases: Leases,
) -> Result<(), RuntimeError> {
    let record = store.record(run_id)?;
    let admitted = readmit(&record.submission, run_id.as_str())?;
    let lineage = lineage(store.as_ref(), record.predecessor)?;
    drive(home, store, run_id, admitted, lineage, leases, false)
}

/// Drives an admitted run to its end on this thread while holding `leases`, reusing the settled
/// work of its `lineage`; `watch_signals` makes SIGTERM (sent by `force-stop`) wake the loop —
/// only a controller process wants that.
fn drive(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    admitted: Readmitted,
    lineage: Vec<trellis_ledger::RunSnapshot>,
    leases: Leases,
    watch_signals: bool,
) -> Result<(), RuntimeError> {
    store.append(run_id, &[controller_attached()])?;
    if store.head(run_id)?.phase() == trellis_ledger::Phase::Admitted {
        store.append(run_id, &[RunEvent::RunStarted {}])?;
    }
    let plan = admitted.submission.plan.clone();
    let secrets = SecretEnv::new(
        plan.connection_names()
            .into_iter()
            .filter_map(|name| std::env::var(&name).ok().map(|value| (name, value)))
            .collect(),
    );
    let reuse = ReuseIndex::from_lineage(&lineage);
    // The lineage's first run names the delivery branch and report marker across resumes.
    let lineage_key = lineage
        .last()
        .map_or_else(|| run_id.clone(), |first| first.head.run_id.clone());
    let agent = agent_harness(&plan)?;
    let harnesses = Harnesses {
        command: Arc::new(ExecHarness),
        agent: agent.clone(),
        delivery: Arc::new(
            GitDelivery::new(admitted.submission.source.as_ref().map(|s| s.revision()))
                .with_workers(delivery_workers(admitted.graph.spec()))
                .with_lineage_key(lineage_key.as_str())
                .with_forge(ForgeSettings::from_env()),
        ),
    };
    let scratch = home
        .run_dir(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot open the run directory", e))?
        .join("scratch");
    let base_env = ["PATH", "HOME", "LANG", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    let wake = Arc::new(tokio::sync::Notify::new());
    let context = RunContext {
        store: store.clone(),
        run_id: run_id.clone(),
        graph: admitted.graph,
        input: admitted.submission.input.clone(),
        plan,
        harnesses,
        workspace: admitted.submission.workspace.clone(),
        scratch: scratch.clone(),
        secrets,
        base_env,
        reuse,
        wake: wake.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RuntimeError::io("cannot start the async runtime", e))?;
    let outcome = runtime.block_on(async move {
        if watch_signals {
            let mut terminate =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .map_err(|e| RuntimeError::io("cannot watch SIGTERM", e))?;
            let signal_wake = wake.clone();
            tokio::spawn(async move {
                while terminate.recv().await.is_some() {
                    signal_wake.notify_one();
                }
            });
        }
        Supervisor::new(context)?.run().await
    });
    if let Some(agent) = &agent {
        agent.close_run(run_id.as_str());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // The workspace is free once the run is over; the run's own lease goes last.
    drop(leases.workspace);
    drop(leases.controller);
    outcome
}
