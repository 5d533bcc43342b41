//! The controller of one run: holds its leases (inherited by a detached controller process, or
//! taken by an in-process driver), re-admits the stored submission, prepares its environment,
//! builds the harnesses and drives the supervisor to the run's end.

use std::collections::BTreeSet;
use std::sync::Arc;

use trellis_agents::{ExecHarness, Harness, SecretEnv};
use trellis_ledger::{RunEvent, RunId, RunStore};
use trellis_workspace::{ObjectId, Previous};

use crate::checkpoints::policy::CheckpointPolicy;
use crate::checkpoints::workspace::{CHECKPOINT_INDEX, Continuation, RunWorkspace};
use crate::control::isolation::{host_isolation, plan_sandbox};
use crate::control::lease::{
    CONTROLLER_LEASE_FD, Leases, WORKSPACE_LEASE_FD, controller_attached, inherited_lease,
};
use crate::control::recovery::{TerminalReason, finalize};
use crate::delivery::{ForgeSettings, GitDelivery, delivery_workers};
use crate::dispatch::queued::{QueuedHarness, RunQueue};
use crate::dispatch::{ControllerHold, dispatch_to_workers};
use crate::graphspec::admission::{Readmitted, readmit};
use crate::graphspec::environment::{
    HookRun, Preparation, PreparedEnvironment, prepare_environment,
};
use crate::graphspec::harnesses::agent_harness;
use crate::graphspec::reuse::ReuseIndex;
use crate::graphspec::supervisor::{Harnesses, RunContext, Supervisor};
use crate::observation::cause::run_cause;
use crate::shared::environment::HookLimits;
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;
use crate::shared::submission::ResumePoint;

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

/// The failed executions that ended or routed a run of the lineage to its failure (its
/// cause): a resume runs them again rather than reusing the failure, so it can fix it.
fn failures_to_retry(
    store: &dyn RunStore,
    lineage: &[trellis_ledger::RunSnapshot],
) -> Result<BTreeSet<(RunId, u64)>, RuntimeError> {
    let mut retried = BTreeSet::new();
    for snapshot in lineage {
        let record = store.record(&snapshot.head.run_id)?;
        let Some(cause) = run_cause(store, snapshot, record.submission.get("graph"))? else {
            continue;
        };
        for node in cause.nodes.iter().filter(|node| node.status == "error") {
            retried.insert((snapshot.head.run_id.clone(), node.execution_id));
        }
    }
    Ok(retried)
}

/// The ids of a run's predecessors, nearest first (whose checkpoints its success prunes).
fn predecessor_ids(
    store: &dyn RunStore,
    mut previous: Option<RunId>,
) -> Result<Vec<RunId>, RuntimeError> {
    let mut ids = Vec::new();
    while let Some(run_id) = previous.take() {
        if ids.len() == MAX_LINEAGE {
            break;
        }
        previous = store.record(&run_id)?.predecessor;
        ids.push(run_id);
    }
    Ok(ids)
}

/// The settled work a run may reuse: its whole lineage, or — for a successor resumed from a
/// checkpoint — only what its predecessor had settled before that checkpoint.
fn reusable(
    store: &dyn RunStore,
    predecessor: Option<RunId>,
    from_checkpoint: Option<&ResumePoint>,
) -> Result<Vec<trellis_ledger::RunSnapshot>, RuntimeError> {
    let (Some(point), Some(predecessor)) = (from_checkpoint, predecessor.clone()) else {
        return lineage(store, predecessor);
    };
    let mut snapshot = store.snapshot(&predecessor)?;
    snapshot
        .executions
        .retain(|&execution, _| execution < point.next_execution);
    Ok(vec![snapshot])
}

/// The run's hold on its workspace, continuing from its predecessor's checkpoints. A workspace
/// git cannot read is noted in the controller's log and the run goes on without checkpoints.
fn run_workspace(
    home: &TrellisHome,
    run_id: &RunId,
    predecessors: &[RunId],
    admitted: &Readmitted,
) -> Option<RunWorkspace> {
    let predecessor = predecessors.first();
    let submission = &admitted.submission;
    let run_dir = home.run_dir(run_id.as_str()).ok()?;
    let seed_index = predecessor
        .and_then(|p| home.run_dir(p.as_str()).ok())
        .map(|dir| dir.join(CHECKPOINT_INDEX))
        .filter(|index| index.exists());
    let predecessors = predecessors
        .iter()
        .filter_map(|p| Some((p.as_str().to_owned(), home.run_dir(p.as_str()).ok()?)))
        .collect();
    let previous = submission.from_checkpoint.as_ref().and_then(|point| {
        Some(Previous {
            commit: ObjectId::parse(&point.commit)?,
            tree: ObjectId::parse(&point.tree)?,
        })
    });
    let opened = RunWorkspace::open(
        &submission.handling,
        CheckpointPolicy::of(admitted.graph.spec()),
        &submission.workspace,
        run_id.as_str(),
        &run_dir,
        Continuation {
            seed_index,
            previous,
            predecessors,
        },
    );
    match opened {
        Ok(workspace) => Some(workspace),
        Err(error) => {
            eprintln!("trellis: no checkpoints or verifier copies for this run: {error}");
            None
        }
    }
}

/// Runs the controller of the GraphSpec run `run_id` (whose `record` the caller read) to
/// completion in a process started by `launch`, adopting the leases it inherited.
pub(crate) fn run_detached(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    record: trellis_ledger::RunRecord,
) -> Result<(), RuntimeError> {
    let controller = inherited_lease(CONTROLLER_LEASE_FD)?;
    let admitted = readmit(&record.submission, run_id.as_str())?;
    let workspace = inherited_lease(WORKSPACE_LEASE_FD)?;
    let leases = Leases {
        controller,
        workspace,
    };
    let inherited = inherit(home, store.as_ref(), run_id, &record, &admitted)?;
    drive(home, store, run_id, admitted, inherited, leases, true)
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
    let inherited = inherit(home, store.as_ref(), run_id, &record, &admitted)?;
    drive(home, store, run_id, admitted, inherited, leases, false)
}

/// What a run takes over from its predecessors: settled work to reuse, and its workspace's
/// checkpoints to continue.
struct Inherited {
    lineage: Vec<trellis_ledger::RunSnapshot>,
    workspace: Option<RunWorkspace>,
}

fn inherit(
    home: &TrellisHome,
    store: &dyn RunStore,
    run_id: &RunId,
    record: &trellis_ledger::RunRecord,
    admitted: &Readmitted,
) -> Result<Inherited, RuntimeError> {
    let lineage = reusable(
        store,
        record.predecessor.clone(),
        admitted.submission.from_checkpoint.as_ref(),
    )?;
    let predecessors = predecessor_ids(store, record.predecessor.clone())?;
    let workspace = run_workspace(home, run_id, &predecessors, admitted);
    Ok(Inherited { lineage, workspace })
}

/// Drives an admitted run to its end on this thread while holding `leases`, reusing what it
/// `inherited`; `watch_signals` makes SIGTERM (sent by `force-stop`) wake the loop —
/// only a controller process wants that.
fn drive(
    home: &TrellisHome,
    store: Arc<dyn RunStore>,
    run_id: &RunId,
    admitted: Readmitted,
    inherited: Inherited,
    leases: Leases,
    watch_signals: bool,
) -> Result<(), RuntimeError> {
    if store.head(run_id)?.is_finished() {
        // Taken over just as it ended: nothing left to drive.
        return Ok(());
    }
    // On PostgreSQL the run is held by its lease row and every append is fenced by it.
    let (store, hold) = if store.as_postgres().is_some() {
        let Some(hold) = ControllerHold::acquire(store.clone(), run_id)? else {
            return Err(RuntimeError::ControllerStart(format!(
                "another controller holds run {run_id}"
            )));
        };
        let fenced: Arc<dyn RunStore> = Arc::new(hold.fenced_store(store));
        (fenced, Some(hold))
    } else {
        (store, None)
    };
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RuntimeError::io("cannot start the async runtime", e))?;
    let run_dir = home
        .run_dir(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot open the run directory", e))?;
    let wake = Arc::new(tokio::sync::Notify::new());
    if watch_signals {
        // Watched from here on (the handler stays for the process's life), so a force-stop
        // during the environment's hooks wakes them too instead of killing the controller.
        runtime.block_on(async {
            let mut terminate =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .map_err(|e| RuntimeError::io("cannot watch SIGTERM", e))?;
            let signal_wake = wake.clone();
            tokio::spawn(async move {
                while terminate.recv().await.is_some() {
                    signal_wake.notify_one();
                }
            });
            Ok::<(), RuntimeError>(())
        })?;
    }
    let mut base_env: Vec<(String, String)> = ["PATH", "HOME", "LANG", "TMPDIR"]
        .iter()
        .chain(trellis_agents::access::AGENT_CONFIG_ENV.iter())
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    // The environment is prepared before anything is dispatched (and again by every resumed
    // successor); a hook that fails ends the run here, before any step started.
    let mut prepared = match &admitted.submission.environment {
        None => None,
        Some(spec) => {
            let preparation = runtime.block_on(prepare_environment(HookRun {
                store: store.clone(),
                run_id,
                spec,
                run_dir: &run_dir,
                workspace: &admitted.submission.workspace,
                base_env: &base_env,
                secrets: &secrets,
                limits: HookLimits::from_env(),
                wake: wake.clone(),
            }))?;
            match preparation {
                Preparation::Ready(prepared) => Some(prepared),
                Preparation::Failed(reason) => {
                    store.append(
                        run_id,
                        &[RunEvent::Terminal {
                            result: trellis_ledger::TerminalResult::Failed {
                                reason: reason.to_owned(),
                            },
                        }],
                    )?;
                    return Ok(());
                }
                Preparation::Stopped => {
                    finalize(store.as_ref(), run_id, TerminalReason::ForceStopped)?;
                    return Ok(());
                }
            }
        }
    };
    let services = prepared.as_mut().map(PreparedEnvironment::take_services);
    if let Some(prepared) = &prepared {
        let path = base_env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.clone());
        base_env.retain(|(name, _)| name != "PATH");
        base_env.push(("PATH".to_owned(), prepared.path_with_tools(path.as_deref())));
    }
    let Inherited { lineage, workspace } = inherited;
    let reuse = ReuseIndex::from_lineage_retrying(&lineage, &failures_to_retry(&*store, &lineage)?);
    // The lineage's first run names the delivery branch and report marker across resumes.
    let lineage_key = lineage
        .last()
        .map_or_else(|| run_id.clone(), |first| first.head.run_id.clone());
    let queue = match &hold {
        Some(hold) if dispatch_to_workers() => Some(RunQueue::start(
            store.clone(),
            run_id.clone(),
            hold.token(),
            home.run_dir(run_id.as_str())
                .map_err(|e| RuntimeError::io("cannot open the run directory", e))?,
        )?),
        _ => None,
    };
    let (command, agent): (Arc<dyn Harness>, _) = match &queue {
        Some(queue) => {
            let kind = plan.harness.map_or("agent", |kind| kind.as_str());
            let agent = plan
                .has_agents()
                .then(|| Arc::new(QueuedHarness::new(queue.clone(), kind)) as Arc<dyn Harness>);
            (
                Arc::new(QueuedHarness::new(queue.clone(), "command")),
                agent,
            )
        }
        None => {
            let sandbox = plan_sandbox(&plan, host_isolation(), home.root())?;
            (
                Arc::new(ExecHarness::contained(sandbox.clone())),
                agent_harness(&plan, sandbox.as_ref())?,
            )
        }
    };
    let harnesses = Harnesses {
        command,
        agent: agent.clone(),
        delivery: Arc::new(
            GitDelivery::new(admitted.submission.source.as_ref().map(|s| s.revision()))
                .with_workers(delivery_workers(admitted.graph.spec()))
                .with_lineage_key(lineage_key.as_str())
                .with_forge(ForgeSettings::from_env()),
        ),
    };
    let scratch = run_dir.join("scratch");
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
    let outcome = runtime.block_on(async move {
        let mut supervisor = Supervisor::new(context)?;
        if let Some(services) = services {
            // A run reported finished has no service of its environment left running.
            supervisor = supervisor.before_terminal(Box::new(move || services.stop()));
        }
        match workspace {
            Some(workspace) => supervisor.with_workspace(workspace).run().await,
            None => supervisor.run().await,
        }
    });
    if let Some(agent) = &agent {
        agent.close_run(run_id.as_str());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // The services startup hooks left running stop with the run, before its workspace is
    // free for the next one.
    drop(prepared);
    drop(queue);
    if hold.as_ref().is_some_and(ControllerHold::is_lost) {
        eprintln!("trellis: another controller took run {run_id} over");
    }
    // The workspace is free once the run is over; the run's own leases go last.
    drop(leases.workspace);
    drop(leases.controller);
    drop(hold);
    outcome
}
