//! Taking over the runs whose controller is gone: a serving host starts a detached controller
//! of its own for each, which takes the run's lease row (only one of several hosts trying at
//! once gets it; the others' controllers exit), re-attaches to the executions queued on worker
//! hosts and continues the run from the ledger.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use trellis_ledger::{LEDGER_ENV, LedgerLocation, RunId, RunStore};

use crate::control::isolation::apply_isolation;
use crate::control::lease::acquire;
use crate::control::recovery::finalize_abandoned;
use crate::control::spawn::{Inherited, controller_env, spawn_controller};
use crate::plan::{Connections, Isolation, RuntimePlan};
use crate::shared::error::RuntimeError;
use crate::shared::home::TrellisHome;

/// How many orphaned runs one round takes over.
const MAX_PER_ROUND: usize = 32;

pub(crate) fn take_over_orphans(
    home: &TrellisHome,
    store: &Arc<dyn RunStore>,
    program: &Path,
    ledger: Option<&LedgerLocation>,
    dispatch: Option<super::DispatchMode>,
    isolation: Option<Isolation>,
    grace: Duration,
) -> Result<Vec<RunId>, RuntimeError> {
    let Some(postgres) = store.as_postgres() else {
        return Ok(Vec::new());
    };
    let mut started = Vec::new();
    for run_id in postgres.orphaned_runs(grace, MAX_PER_ROUND)? {
        if start_controller(home, store, program, ledger, (dispatch, isolation), &run_id)? {
            started.push(run_id);
        }
    }
    Ok(started)
}

/// Ends `run_id` `runtime_lost` instead of taking it over: its caller's connection values were
/// only in the lost controller's memory, and this host's own must not stand in for them. Its
/// caller resumes it, sending them again.
fn end_without_caller_values(
    store: &Arc<dyn RunStore>,
    run_id: &RunId,
) -> Result<(), RuntimeError> {
    let Some(postgres) = store.as_postgres() else {
        return Ok(());
    };
    let holder = super::holder_name("takeover");
    let Some(lease) = postgres.acquire_controller(run_id, &holder, END_LEASE)? else {
        return Ok(());
    };
    let fenced = super::FencedStore::new(store.clone(), lease.fencing_token);
    if finalize_abandoned(&fenced, run_id)? {
        eprintln!(
            "trellis: ended run {run_id} (runtime_lost) instead of taking it over: it carried its \
             caller's connection values, which only its caller can send again (`trellis \
             --target … resume {run_id}`)"
        );
    }
    Ok(())
}

/// How long the lease taken to end such a run lives (ending it takes one append).
const END_LEASE: Duration = Duration::from_secs(15);

/// Starts a controller of `run_id` on this host; false when the run cannot be driven here
/// (its workspace is not on this host) or a controller of it here already holds its locks.
fn start_controller(
    home: &TrellisHome,
    store: &Arc<dyn RunStore>,
    program: &Path,
    ledger: Option<&LedgerLocation>,
    (dispatch, isolation): (Option<super::DispatchMode>, Option<Isolation>),
    run_id: &RunId,
) -> Result<bool, RuntimeError> {
    let record = store.record(run_id)?;
    if record
        .submission
        .get("callerConnections")
        .and_then(Value::as_array)
        .is_some_and(|names| !names.is_empty())
    {
        end_without_caller_values(store, run_id)?;
        return Ok(false);
    }
    let Some(workspace) = record
        .submission
        .get("workspace")
        .and_then(Value::as_str)
        .map(PathBuf::from)
    else {
        return Ok(false);
    };
    if !workspace.is_dir() {
        eprintln!(
            "trellis: cannot take run {run_id} over: its workspace {} is not on this host",
            workspace.display()
        );
        return Ok(false);
    }
    let lease_path = home
        .controller_lease_path(run_id.as_str())
        .map_err(|e| RuntimeError::io("cannot create the run directory", e))?;
    let Some(controller_lease) = acquire(&lease_path)? else {
        return Ok(false);
    };
    let Some(workspace_lease) = acquire(&home.workspace_lease_path(&workspace))? else {
        return Ok(false);
    };
    let connection_names = record
        .submission
        .get("plan")
        .cloned()
        .and_then(|plan| serde_json::from_value::<RuntimePlan>(plan).ok())
        .map(|plan| plan.connection_names())
        .unwrap_or_default();
    let mut env = controller_env(&connection_names, &Connections::default());
    super::apply_dispatch(&mut env, dispatch);
    apply_isolation(&mut env, isolation);
    if let Some(location) = ledger {
        let text = match location {
            LedgerLocation::Sqlite(path) => path.display().to_string(),
            LedgerLocation::Postgres(url) => url.clone(),
        };
        env.retain(|(name, _)| name != LEDGER_ENV);
        env.push((LEDGER_ENV.to_owned(), text));
    }
    let log = home
        .controller_log_path(run_id.as_str())
        .and_then(|path| OpenOptions::new().create(true).append(true).open(path))
        .map_err(|e| RuntimeError::io("cannot open the controller log", e))?;
    let _ = controller_lease.describe(&format!("controller of run {} (taken over)", run_id));
    spawn_controller(
        program,
        &workspace,
        run_id,
        &env,
        Inherited {
            controller_lease: &controller_lease,
            workspace_lease: Some(&workspace_lease),
            notes_from: store.as_postgres(),
        },
        log,
    )?;
    Ok(true)
}
