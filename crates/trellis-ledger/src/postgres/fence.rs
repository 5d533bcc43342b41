//! The fence every write under a controller lease passes: a run's current, unexpired lease
//! token, checked inside the write's own transaction.

use deadpool_postgres::GenericClient;

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::error::server_error;

/// The error for a write whose controller lease is no longer current.
pub(super) fn fenced(detail: impl Into<String>) -> LedgerError {
    LedgerError::Fenced {
        detail: detail.into(),
    }
}

/// Inside an append's transaction, after the run's head row is locked: refuses unless `token`
/// is the run's unexpired controller lease.
pub(super) async fn check_controller(
    client: &impl GenericClient,
    run: i64,
    token: i64,
    run_id: &RunId,
) -> Result<(), LedgerError> {
    let statement = client
        .prepare_cached(
            "SELECT fencing_token = $2 AND lease_expires_at >= now()
             FROM run_controllers WHERE run = $1",
        )
        .await
        .map_err(server_error)?;
    let row = client
        .query_opt(&statement, &[&run, &token])
        .await
        .map_err(server_error)?;
    match row.map(|row| row.try_get::<_, bool>(0)).transpose() {
        Ok(Some(true)) => Ok(()),
        Ok(_) => Err(fenced(format!(
            "controller token {token} no longer holds run {run_id}"
        ))),
        Err(error) => Err(server_error(error)),
    }
}

/// The run's row id. Not locked: the dispatch tables' foreign keys already keep a run that
/// is written to from going away, and a share lock taken by every enqueue, take and
/// withdrawal of every execution is a write of the run's row (and, shared, a multixact).
pub(super) async fn run_row(
    client: &impl GenericClient,
    run_id: &RunId,
) -> Result<i64, LedgerError> {
    let statement = client
        .prepare_cached("SELECT id FROM runs WHERE run_id = $1")
        .await
        .map_err(server_error)?;
    client
        .query_opt(&statement, &[&run_id.as_str()])
        .await
        .map_err(server_error)?
        .ok_or_else(|| LedgerError::run_not_found(run_id))?
        .try_get(0)
        .map_err(server_error)
}
