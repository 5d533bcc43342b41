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
use crate::postgres::dispatch_notes::{self, DispatchNote};
use crate::postgres::error::server_error;
use crate::postgres::fence::{check_controller, fenced, run_row};
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

/// Adds a claimed execution's lines while its claim is live, and wakes the run's collector:
/// one statement. FOR SHARE holds the claim as checked until the lines are in, so a reap or
/// withdrawal waits for them, and one that committed first leaves no row (fenced). The
/// identity column numbers the lines in the order given: that is the order taken.
const PUSH: &str = "WITH live AS (
         SELECT q.run FROM dispatch_queue q
         WHERE q.run = (SELECT id FROM runs WHERE run_id = $1) AND q.execution = $2
           AND q.fencing_token = $3 AND q.state = 'claimed' AND q.lease_expires_at >= now()
         FOR SHARE OF q
     ),
     added AS (
         INSERT INTO dispatch_logs (run, execution, line_json)
         SELECT live.run, $2, l.line
         FROM live, unnest($4::text[]) WITH ORDINALITY AS l (line, n)
         ORDER BY l.n
         RETURNING 1
     )
     SELECT (SELECT count(*) FROM added), pg_notify($5, $6) FROM live";

async fn push(shared: &Shared, claim: Claim, lines: Vec<String>) -> Result<(), LedgerError> {
    let execution = stored_execution(claim.execution)?;
    let client = connection(shared).await?;
    let wake = DispatchNote::Dispatch(claim.run_id.clone());
    let (channel, note) = (
        dispatch_notes::channel(&shared.schema, &wake),
        dispatch_notes::payload(&shared.schema, &wake),
    );
    let statement = client.prepare_cached(PUSH).await.map_err(server_error)?;
    let live = client
        .query_opt(
            &statement,
            &[
                &claim.run_id.as_str(),
                &execution,
                &claim.fencing_token,
                &lines,
                &channel,
                &note,
            ],
        )
        .await
        .map_err(server_error)?;
    match live {
        Some(_) => Ok(()),
        None => Err(LedgerError::Fenced {
            detail: format!(
                "claim {} of execution {} expired or was taken over",
                claim.fencing_token, claim.execution
            ),
        }),
    }
}

/// Takes the finished dispatches (when `finished`) and the pushed lines (when `lines`), in one
/// statement fenced by the controller's token: one round trip, however many rows.
///
/// One statement reads one snapshot: a worker pushes its last lines (and waits for their
/// commit) before it reports its outcome, so a snapshot that holds an outcome holds every line
/// pushed before it. A waiter thus never gets an outcome before its lines.
const TAKE: &str = "WITH held AS (
         SELECT r.id FROM runs r JOIN run_controllers c ON c.run = r.id
         WHERE r.run_id = $1 AND c.fencing_token = $2 AND c.lease_expires_at >= now()
     ),
     finished AS (
         DELETE FROM dispatch_queue q USING held
         WHERE $3 AND q.run = held.id AND q.state IN ('settled', 'lost')
         RETURNING q.execution, q.state = 'settled' AS settled, q.outcome_json
     ),
     lines AS (
         DELETE FROM dispatch_logs l USING held
         WHERE $4 AND l.run = held.id
         RETURNING l.line, l.execution, l.line_json
     )
     SELECT 0, NULL::bigint, NULL::bigint, NULL::bool, NULL::text FROM held
     UNION ALL SELECT 1, execution, NULL, settled, outcome_json FROM finished
     UNION ALL SELECT 2, line, execution, NULL, line_json FROM lines";

async fn take(
    shared: &Shared,
    run_id: RunId,
    token: i64,
    finished: bool,
    lines: bool,
) -> Result<Collected, LedgerError> {
    let client = connection(shared).await?;
    let statement = client.prepare_cached(TAKE).await.map_err(server_error)?;
    let rows = client
        .query(&statement, &[&run_id.as_str(), &token, &finished, &lines])
        .await
        .map_err(server_error)?;
    let mut held = false;
    let mut collected = Collected::default();
    let mut logs = Vec::new();
    for row in &rows {
        let kind: i32 = row.try_get(0).map_err(server_error)?;
        match kind {
            0 => held = true,
            1 => {
                let execution = execution_number(row.try_get(1).map_err(server_error)?)?;
                let settled: Option<bool> = row.try_get(3).map_err(server_error)?;
                let outcome: Option<String> = row.try_get(4).map_err(server_error)?;
                collected.finished.push(match (settled, outcome) {
                    (Some(true), None) => {
                        return Err(LedgerError::corrupt("a settled dispatch has no outcome"));
                    }
                    (Some(true), outcome) => (execution, outcome),
                    _ => (execution, None),
                });
            }
            _ => {
                let line: i64 = row.try_get(1).map_err(server_error)?;
                let execution = execution_number(row.try_get(2).map_err(server_error)?)?;
                let json: Option<String> = row.try_get(4).map_err(server_error)?;
                let log: DispatchLog = json
                    .and_then(|json| serde_json::from_str(&json).ok())
                    .ok_or_else(|| LedgerError::corrupt("a pushed log line is unreadable"))?;
                logs.push((line, execution, log));
            }
        }
    }
    if !held {
        // Nothing was taken: say whether the run is unknown or held by another token.
        let run = run_row(&client, &run_id).await?;
        check_controller(&client, run, token, &run_id).await?;
        return Err(fenced(format!(
            "controller token {token} no longer holds run {run_id}"
        )));
    }
    collected
        .finished
        .sort_unstable_by_key(|(execution, _)| *execution);
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
            take(&shared, run_id, controller_token, false, true)
                .await
                .map(|collected| collected.logs)
        })
    }

    /// Removes and returns the run's finished dispatches by execution: settled ones with their
    /// outcome, lost ones (out of claims) with `None`; only while `controller_token` holds the
    /// run, so a fenced controller never takes what its successor is waiting for.
    pub fn take_finished(
        &self,
        run_id: &RunId,
        controller_token: i64,
    ) -> Result<Vec<(u64, Option<String>)>, LedgerError> {
        let run_id = run_id.clone();
        self.call(move |shared| async move {
            take(&shared, run_id, controller_token, true, false)
                .await
                .map(|collected| collected.finished)
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
        self.call(
            move |shared| async move { take(&shared, run_id, controller_token, true, true).await },
        )
    }
}
