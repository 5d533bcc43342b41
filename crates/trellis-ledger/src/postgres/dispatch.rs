//! What a controller that hands its executions to worker hosts needs beyond the grants of
//! [`super::leases`]: withdrawing dispatches only while it holds the run, a claim's payload for
//! its live holder, and finding the runs whose controller is gone so another host can take them
//! over. Taking finished dispatches and pushed lines is [`super::logs`]' one fenced statement.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::PostgresStore;
use crate::postgres::error::server_error;
use crate::postgres::fence::{check_controller, run_row};
use crate::postgres::runs::connection;
use crate::postgres::shared::Shared;

fn stored_execution(value: u64) -> Result<i64, LedgerError> {
    i64::try_from(value)
        .map_err(|_| LedgerError::corrupt("an execution number beyond the ledger's range"))
}

async fn withdraw(
    shared: &Shared,
    run_id: RunId,
    token: i64,
    executions: Vec<u64>,
) -> Result<(), LedgerError> {
    let executions = executions
        .into_iter()
        .map(stored_execution)
        .collect::<Result<Vec<i64>, _>>()?;
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    let run = run_row(&tx, &run_id).await?;
    check_controller(&tx, run, token, &run_id).await?;
    tx.execute(
        "DELETE FROM dispatch_queue WHERE run = $1 AND execution = ANY($2)",
        &[&run, &executions],
    )
    .await
    .map_err(server_error)?;
    // Nobody waits for a withdrawn execution's lines any more.
    tx.execute(
        "DELETE FROM dispatch_logs WHERE run = $1 AND execution = ANY($2)",
        &[&run, &executions],
    )
    .await
    .map_err(server_error)?;
    tx.commit().await.map_err(server_error)
}

async fn controller_abandoned(
    shared: &Shared,
    run_id: RunId,
    after_ms: i64,
) -> Result<bool, LedgerError> {
    let client = connection(shared).await?;
    let row = client
        .query_opt(
            "SELECT 1 FROM runs r
             JOIN run_heads h ON h.run = r.id
             LEFT JOIN run_controllers c ON c.run = r.id
             WHERE r.run_id = $1 AND h.phase <> 'finished'
               AND ((c.run IS NULL
                     AND r.created_at_ms < (extract(epoch FROM now()) * 1000)::bigint - $2)
                    OR c.lease_expires_at < now() - $2::bigint * interval '1 millisecond')",
            &[&run_id.as_str(), &after_ms],
        )
        .await
        .map_err(server_error)?;
    Ok(row.is_some())
}

async fn orphaned_runs(
    shared: &Shared,
    grace_ms: i64,
    limit: i64,
) -> Result<Vec<RunId>, LedgerError> {
    let client = connection(shared).await?;
    // A run nobody ever leased gets `grace_ms` (judged against its creation time, written by
    // the submitting host's clock) for its first controller to come up.
    let rows = client
        .query(
            "SELECT r.run_id FROM runs r
             JOIN run_heads h ON h.run = r.id
             LEFT JOIN run_controllers c ON c.run = r.id
             WHERE h.phase <> 'finished' AND r.kind = 'graphspec'
               AND ((c.run IS NULL
                     AND r.created_at_ms < (extract(epoch FROM now()) * 1000)::bigint - $1)
                    OR c.lease_expires_at < now())
             ORDER BY r.id
             LIMIT $2",
            &[&grace_ms, &limit],
        )
        .await
        .map_err(server_error)?;
    rows.iter()
        .map(|row| {
            let text: String = row.try_get(0).map_err(server_error)?;
            RunId::new(&text).map_err(|_| LedgerError::corrupt("a stored run id is invalid"))
        })
        .collect()
}

async fn claimed_payload(
    shared: &Shared,
    run_id: RunId,
    execution: i64,
    claim_token: i64,
) -> Result<Option<String>, LedgerError> {
    let client = connection(shared).await?;
    let row = client
        .query_opt(
            "SELECT q.payload_json FROM dispatch_queue q
             WHERE q.run = (SELECT id FROM runs WHERE run_id = $1) AND q.execution = $2
               AND q.state = 'claimed'
               AND q.fencing_token = $3 AND q.lease_expires_at > now()",
            &[&run_id.as_str(), &execution, &claim_token],
        )
        .await
        .map_err(server_error)?;
    row.map(|row| row.try_get(0).map_err(server_error))
        .transpose()
}

impl PostgresStore {
    /// The payload of execution `execution` of `run_id` while the claim whose fencing token
    /// is `claim_token` holds it (claimed, lease not expired); `None` otherwise. What a serving
    /// host checks before handing a worker host the execution's workspace or taking its result.
    pub fn claimed_payload(
        &self,
        run_id: &RunId,
        execution: u64,
        claim_token: i64,
    ) -> Result<Option<String>, LedgerError> {
        let run_id = run_id.clone();
        let execution = stored_execution(execution)?;
        self.call(move |shared| async move {
            claimed_payload(&shared, run_id, execution, claim_token).await
        })
    }

    /// Takes executions out of the queue whatever their state (the controller cancelled them):
    /// a worker running one finds its claim gone at its next heartbeat and stops.
    pub fn withdraw(
        &self,
        run_id: &RunId,
        controller_token: i64,
        executions: Vec<u64>,
    ) -> Result<(), LedgerError> {
        let run_id = run_id.clone();
        self.call(move |shared| async move {
            withdraw(&shared, run_id, controller_token, executions).await
        })
    }

    /// Unfinished GraphSpec runs whose controller lease expired, or that never had one and
    /// were created more than `grace` ago: runs another host may take over. Oldest first.
    /// Whether `run_id` is unfinished and its controller lease expired more than `after` ago
    /// (or it never had one, `after` past its creation): no host took it over in that time.
    pub fn controller_abandoned(
        &self,
        run_id: &RunId,
        after: Duration,
    ) -> Result<bool, LedgerError> {
        let after_ms = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
        self.riding_out(|| {
            let run_id = run_id.clone();
            self.call(
                move |shared| async move { controller_abandoned(&shared, run_id, after_ms).await },
            )
        })
    }

    pub fn orphaned_runs(&self, grace: Duration, limit: usize) -> Result<Vec<RunId>, LedgerError> {
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |shared| async move { orphaned_runs(&shared, grace_ms, limit).await })
    }
}
