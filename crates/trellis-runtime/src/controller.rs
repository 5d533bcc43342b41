//! The detached controller process of one run: adopts the inherited leases, re-admits the
//! stored submission, builds the harnesses and drives the supervisor to the run's end.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use trellis_agents::{ExecHarness, Harness, SecretEnv};
use trellis_ledger::{RunEvent, RunId, RunStore};

use crate::delivery::GitDelivery;
use crate::error::RuntimeError;
use crate::gap_runner::controller_attached;
use crate::home::{Lease, TrellisHome};
use crate::launch::{CONTROLLER_LEASE_FD, WORKSPACE_LEASE_FD};
use crate::reuse::ReuseIndex;
use crate::submission::Submission;
use crate::supervisor::{Harnesses, RunContext, Supervisor};

/// Builds the agent harness for a plan lane; `None` when the plan has no agent bindings.
pub type AgentHarnessFactory =
    dyn Fn(&crate::plan::RuntimePlan) -> Result<Option<Arc<dyn Harness>>, RuntimeError>;

/// Adopts a lease whose locked descriptor this process inherited at `fd`.
fn inherited_lease(fd: i32, path: PathBuf) -> Result<Lease, RuntimeError> {
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
    Ok(Lease::from_inherited(file, path))
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

/// Runs the controller of `run_id` to completion.
pub fn run_controller(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    agent_factory: &AgentHarnessFactory,
) -> Result<(), RuntimeError> {
    let controller_lease = inherited_lease(
        CONTROLLER_LEASE_FD,
        home.controller_lease_path(run_id.as_str())
            .map_err(|e| RuntimeError::io("cannot open the run directory", e))?,
    )?;
    let record = store.record(run_id)?;
    let admitted = Submission::admit(&record.submission, run_id.as_str())?;
    let workspace_lease = inherited_lease(
        WORKSPACE_LEASE_FD,
        home.workspace_lease_path(&admitted.submission.workspace),
    )?;
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
    let reuse = ReuseIndex::from_lineage(&lineage(store.as_ref(), record.predecessor.clone())?);
    let agent = agent_factory(&plan)?;
    let harnesses = Harnesses {
        command: Arc::new(ExecHarness),
        agent: agent.clone(),
        delivery: Arc::new(GitDelivery::new(
            admitted.submission.source.as_ref().map(|s| s.revision()),
        )),
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
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map_err(|e| RuntimeError::io("cannot watch SIGTERM", e))?;
        let signal_wake = wake.clone();
        tokio::spawn(async move {
            while terminate.recv().await.is_some() {
                signal_wake.notify_one();
            }
        });
        Supervisor::new(context)?.run().await
    });
    if let Some(agent) = &agent {
        agent.close_run(run_id.as_str());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    drop(workspace_lease);
    drop(controller_lease);
    outcome
}
