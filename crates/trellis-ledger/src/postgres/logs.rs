//! Live log lines of executions running on worker hosts: a worker pushes what its execution
//! printed while it runs, under its claim's fencing token, and the run's controller takes
//! those lines (with the dispatches that finished) to record them as its own harness's.
//!
//! The rows are a hand-over, not a record: taking them deletes them, and the run's events are
//! where lines are kept. Each line is stored as JSON text (like every document of the ledger),
//! so a message holding a NUL byte, which PostgreSQL `text` cannot, still goes through.

use serde::{Deserialize, Serialize};
use trellis_run_model::{LogLevel, LogStream};

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::PostgresStore;
use crate::postgres::dispatch::{delete_finished, run_row};
use crate::postgres::dispatch_notes::{self, DispatchNote};
use crate::postgres::error::server_error;
use crate::postgres::fence::check_controller;
use crate::postgres::leases::Claim;
use crate::postgres::runs::connection;
use crate::postgres::shared::Shared;

/// One log line of an execution, as its worker host's harness reported it (already masked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchLog {
    pub stream: LogStream,
    pub level: LogLevel,
    pub message: String,
}

/// What a controller took from its run's queue in one go: lines first, then finished
/// dispatches, each in the order a waiter must see them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Pushed lines by execution, each execution's in the order they were pushed.
    pub logs: Vec<(u64, DispatchLog)>,
    /// Finished dispatches by execution: settled ones with their outcome, lost ones `None`.
    pub finished: Vec<(u64, Option<String>)>,
}

fn stored_execution(value: u64) -> Result<i64, LedgerError> {
    i64::try_from(value)
        .map_err(|_| LedgerError::corrupt("an execution number beyond the ledger's range"))
}

fn execution_number(value: i64) -> Result<u64, LedgerError> {
    u64::try_from(value).map_err(|_| LedgerError::corrupt("a negative execution number"))
}

async fn push(shared: &Shared, claim: Claim, lines: Vec<String>) -> Result<(), LedgerError> {
    let execution = stored_execution(claim.execution)?;
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    // FOR SHARE holds the claim as checked until the lines are in: a reap or withdrawal
    // waits for them, and one that committed first leaves no row here (fenced).
    let run: Option<i64> = tx
        .query_opt(
            "SELECT q.run FROM dispatch_queue q JOIN runs r ON r.id = q.run
             WHERE r.run_id = $1 AND q.execution = $2 AND q.fencing_token = $3
               AND q.state = 'claimed' AND q.lease_expires_at >= now()
             FOR SHARE OF q",
            &[&claim.run_id.as_str(), &execution, &claim.fencing_token],
        )
        .await
        .map_err(server_error)?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(server_error)?;
    let Some(run) = run else {
        return Err(LedgerError::Fenced {
            detail: format!(
                "claim {} of execution {} expired or was taken over",
                claim.fencing_token, claim.execution
            ),
        });
    };
    // The identity column numbers the lines in the order given: that is the order taken.
    tx.execute(
        "INSERT INTO dispatch_logs (run, execution, line_json)
         SELECT $1, $2, l.line FROM unnest($3::text[]) WITH ORDINALITY AS l(line, n)
         ORDER BY l.n",
        &[&run, &execution, &lines],
    )
    .await
    .map_err(server_error)?;
    let note = DispatchNote::Dispatch(claim.run_id.clone());
    dispatch_notes::send(&tx, &shared.schema, &note).await?;
    tx.commit().await.map_err(server_error)
}

/// Takes the finished dispatches (when `finished`), then the pushed lines, in one transaction.
///
/// The order matters: a worker pushes its last lines before it reports its outcome, and each
/// statement here sees every commit made before it started, so lines taken second include
/// every line of an outcome taken first. A waiter thus never gets an outcome before its lines.
async fn take(
    shared: &Shared,
    run_id: RunId,
    token: i64,
    finished: bool,
) -> Result<Collected, LedgerError> {
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    let run = run_row(&tx, &run_id).await?;
    check_controller(&tx, run, token, &run_id).await?;
    let mut collected = Collected::default();
    if finished {
        collected.finished = delete_finished(&tx, run).await?;
    }
    let rows = tx
        .query(
            "DELETE FROM dispatch_logs WHERE run = $1 RETURNING line, execution, line_json",
            &[&run],
        )
        .await
        .map_err(server_error)?;
    let mut logs = rows
        .iter()
        .map(|row| {
            let line: i64 = row.try_get(0).map_err(server_error)?;
            let execution = execution_number(row.try_get(1).map_err(server_error)?)?;
            let json: String = row.try_get(2).map_err(server_error)?;
            let log: DispatchLog = serde_json::from_str(&json)
                .map_err(|_| LedgerError::corrupt("a pushed log line is unreadable"))?;
            Ok((line, execution, log))
        })
        .collect::<Result<Vec<_>, LedgerError>>()?;
    tx.commit().await.map_err(server_error)?;
    logs.sort_unstable_by_key(|(line, _, _)| *line);
    collected.logs = logs
        .into_iter()
        .map(|(_, execution, log)| (execution, log))
        .collect();
    Ok(collected)
}

impl PostgresStore {
    /// Adds log lines of a claimed execution for its controller, in order, only while the
    /// claim is live with its token: a fenced worker's lines are refused
    /// ([`LedgerError::Fenced`]) and nothing of them is stored.
    pub fn push_logs(&self, claim: &Claim, lines: &[DispatchLog]) -> Result<(), LedgerError> {
        let claim = claim.clone();
        let lines = lines
            .iter()
            .map(|line| {
                serde_json::to_string(line).map_err(|_| LedgerError::Internal {
                    detail: "cannot encode a log line".to_owned(),
                })
            })
            .collect::<Result<Vec<String>, LedgerError>>()?;
        self.call(move |shared| async move { push(&shared, claim, lines).await })
    }

    /// Removes and returns the lines worker hosts pushed for the run, each execution's in
    /// order; only while `controller_token` holds the run.
    pub fn take_logs(
        &self,
        run_id: &RunId,
        controller_token: i64,
    ) -> Result<Vec<(u64, DispatchLog)>, LedgerError> {
        let run_id = run_id.clone();
        self.call(move |shared| async move {
            take(&shared, run_id, controller_token, false)
                .await
                .map(|collected| collected.logs)
        })
    }

    /// [`Self::take_finished`] and [`Self::take_logs`] in one transaction, ordered so that
    /// every line an execution pushed before its outcome is among the lines returned with it.
    pub fn take_finished_and_logs(
        &self,
        run_id: &RunId,
        controller_token: i64,
    ) -> Result<Collected, LedgerError> {
        let run_id = run_id.clone();
        self.call(move |shared| async move { take(&shared, run_id, controller_token, true).await })
    }
}
