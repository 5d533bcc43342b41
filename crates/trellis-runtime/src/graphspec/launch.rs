//! Starting a GraphSpec run: take the workspace lease, create the run in the ledger (idempotent
//! on the submission key), and either spawn its detached controller holding both leases or
//! drive it on this thread.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use trellis_ledger::{Admission, NewRun, RunId, RunKind, RunStore};

use crate::control::lease::{Leases, acquire};
use crate::control::recovery::reconcile;
use crate::control::spawn::{
    Inherited, Launched, Start, die_before_controller_start_if_asked, spawn_controller,
    wait_until_attached,
};
use crate::graphspec::controller::drive_in_process;
use crate::shared::error::RuntimeError;
use crate::shared::home::{TrellisHome, lease_note};
use crate::shared::submission::Submission;

/// A run to start.
pub(crate) struct LaunchRequest {
    pub submission: Submission,
    pub title: String,
    pub submission_key: String,
    pub identity: String,
    pub predecessor: Option<RunId>,
    pub start: Start,
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
    die_before_controller_start_if_asked();
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
                Inherited {
                    controller_lease: &controller_lease,
                    workspace_lease: Some(&workspace_lease),
                    notes_from: store.as_postgres(),
                },
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
