//! Several claims settled at once: a worker host reports the outcomes that finished while its
//! previous report was in flight in one transaction, each claim's update pipelined on one
//! connection. One commit wakes the listeners once (PostgreSQL signals every listening
//! connection per notifying commit, whatever the channel), where one commit per outcome woke
//! them all for each.

use tokio_postgres::types::ToSql;

use crate::error::LedgerError;
use crate::postgres::PostgresStore;
use crate::postgres::dispatch_notes::{self, DispatchNote};
use crate::postgres::error::server_error;
use crate::postgres::fence::fenced;
use crate::postgres::leases::{Claim, SETTLE_CLAIM};
use crate::postgres::runs::connection;
use crate::postgres::shared::Shared;

/// One outcome's statement parameters, owned for the pipelined calls to borrow.
struct Settlement {
    run_id: String,
    execution: i64,
    token: i64,
    outcome: Option<String>,
    channel: String,
    note: String,
}

async fn settle(
    shared: &Shared,
    outcomes: Vec<(Claim, String)>,
) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
    let settlements = outcomes
        .iter()
        .map(|(claim, outcome)| {
            let note = DispatchNote::Dispatch(claim.run_id.clone());
            Ok(Settlement {
                run_id: claim.run_id.as_str().to_owned(),
                execution: i64::try_from(claim.execution).map_err(|_| {
                    LedgerError::corrupt("an execution number beyond the ledger's range")
                })?,
                token: claim.fencing_token,
                outcome: Some(outcome.clone()),
                channel: dispatch_notes::channel(&shared.schema, &note),
                note: dispatch_notes::payload(&shared.schema, &note),
            })
        })
        .collect::<Result<Vec<_>, LedgerError>>()?;
    let mut client = connection(shared).await?;
    let tx = client.transaction().await.map_err(server_error)?;
    let statement = tx
        .prepare_cached(SETTLE_CLAIM)
        .await
        .map_err(server_error)?;
    // A settled claim's lease ends now.
    let lease_ms: i64 = 0;
    let updates = settlements.iter().map(|s| {
        let parameters: [&(dyn ToSql + Sync); 7] = [
            &s.run_id,
            &s.execution,
            &s.token,
            &lease_ms,
            &s.outcome,
            &s.channel,
            &s.note,
        ];
        let (tx, statement) = (&tx, &statement);
        async move { tx.query_opt(statement, &parameters).await }
    });
    // Polled together, the updates go out back to back without waiting for each answer.
    let rows = futures_util::future::try_join_all(updates)
        .await
        .map_err(server_error)?;
    tx.commit().await.map_err(server_error)?;
    Ok(rows
        .iter()
        .zip(&outcomes)
        .map(|(row, (claim, _))| match row {
            Some(_) => Ok(()),
            None => Err(fenced(format!(
                "claim {} of execution {} expired or was taken over",
                claim.fencing_token, claim.execution
            ))),
        })
        .collect())
}

impl PostgresStore {
    /// Records several claimed executions' outcomes in one transaction, each only while its
    /// claim is live with its token. The answer has one result per outcome, in order: a fenced
    /// claim's is [`LedgerError::Fenced`] and stores nothing, without failing the others. An
    /// error of the whole (the ledger unreachable) stores none of them.
    pub fn complete_many(
        &self,
        outcomes: Vec<(Claim, String)>,
    ) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
        if outcomes.is_empty() {
            return Ok(Vec::new());
        }
        self.call(move |shared| async move { settle(&shared, outcomes).await })
    }
}
