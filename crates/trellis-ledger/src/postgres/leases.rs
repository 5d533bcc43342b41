//! Leases and fencing for distributed execution: one controller lease per run, and a dispatch
//! queue of node executions that worker hosts claim with `FOR UPDATE SKIP LOCKED`.
//!
//! Every grant (a controller lease taken, an execution claimed) takes the next value of the
//! ledger-wide `fencing_tokens` sequence, so a later grant always carries a larger token. A
//! holder proves it still holds its grant by its token: a controller's fenced append, a
//! worker's heartbeat and its outcome are accepted only while the row still carries that token
//! and has not expired — by the server's clock, so hosts' clocks do not matter. Once a grant
//! expired and was taken over (or re-queued), the old holder's writes are refused
//! ([`LedgerError::Fenced`]) and store nothing.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use crate::error::LedgerError;
use crate::ids::RunId;
use crate::postgres::PostgresStore;
use crate::postgres::dispatch_notes::{self, DispatchNote};
use crate::postgres::error::server_error;
use crate::postgres::fence::{check_controller, fenced, run_row};
use crate::postgres::runs::connection;
use crate::postgres::shared::Shared;

/// A run's controller lease as granted or renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerLease {
    pub run_id: RunId,
    pub holder: String,
    pub fencing_token: i64,
    /// When it expires, in milliseconds since the epoch by the server's clock.
    pub expires_at_ms: i64,
}

/// One node execution to run on a worker host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    pub execution: u64,
    pub node: String,
    /// Which kind of worker may claim it (`command`, `claude`, …).
    pub harness: String,
    /// What the worker needs to run it (never a secret value: bindings name variables).
    pub payload_json: String,
}

/// A dispatch claimed by a worker: the claim's fencing token proves it is still the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub run_id: RunId,
    pub execution: u64,
    pub node: String,
    pub harness: String,
    pub payload_json: String,
    /// How many times it has been claimed, this claim included.
    pub claims: i32,
    pub fencing_token: i64,
    pub expires_at_ms: i64,
}

/// What became of an expired claim when the controller reaped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapedClaim {
    pub execution: u64,
    /// True: queued again for another worker; false: it had used every claim it may have and
    /// is now `lost` (the controller settles it `crash`, reason `worker_lost`).
    pub requeued: bool,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn execution_number(value: i64) -> Result<u64, LedgerError> {
    u64::try_from(value).map_err(|_| LedgerError::corrupt("a negative execution number"))
}

fn run_id_of(text: String) -> Result<RunId, LedgerError> {
    RunId::new(&text).map_err(|_| LedgerError::corrupt("a stored run id is invalid"))
}

async fn acquire_controller(
    shared: &Shared,
    run_id: RunId,
    holder: String,
    ttl_ms: i64,
) -> Result<Option<ControllerLease>, LedgerError> {
    let client = connection(shared).await?;
    // A free or expired lease is taken with a fresh token; the holder asking again gets its
    // own lease back unchanged (a retry must not fence itself).
    let statement = client
        .prepare_cached(
            "INSERT INTO run_controllers AS c (run, holder, fencing_token, lease_expires_at)
             SELECT id, $2, nextval('fencing_tokens'),
                    now() + $3::bigint * interval '1 millisecond'
             FROM runs WHERE run_id = $1
             ON CONFLICT (run) DO UPDATE
                SET holder = excluded.holder,
                    fencing_token = CASE WHEN c.holder = excluded.holder
                                          AND c.lease_expires_at >= now()
                                         THEN c.fencing_token
                                         ELSE excluded.fencing_token END,
                    lease_expires_at = excluded.lease_expires_at,
                    heartbeat_at = now()
                WHERE c.lease_expires_at < now() OR c.holder = excluded.holder
             RETURNING holder, fencing_token,
                       (extract(epoch FROM lease_expires_at) * 1000)::bigint",
        )
        .await
        .map_err(server_error)?;
    let row = client
        .query_opt(&statement, &[&run_id.as_str(), &holder, &ttl_ms])
        .await
        .map_err(server_error)?;
    let Some(row) = row else {
        // Either another holder's lease is live, or there is no such run.
        let exists = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = $1)",
                &[&run_id.as_str()],
            )
            .await
            .map_err(server_error)?;
        return if exists.try_get::<_, bool>(0).map_err(server_error)? {
            Ok(None)
        } else {
            Err(LedgerError::run_not_found(&run_id))
        };
    };
    Ok(Some(ControllerLease {
        run_id,
        holder: row.try_get(0).map_err(server_error)?,
        fencing_token: row.try_get(1).map_err(server_error)?,
        expires_at_ms: row.try_get(2).map_err(server_error)?,
    }))
}

async fn renew_controller(
    shared: &Shared,
    lease: ControllerLease,
    ttl_ms: i64,
) -> Result<ControllerLease, LedgerError> {
    let client = connection(shared).await?;
    let statement = client
        .prepare_cached(
            "UPDATE run_controllers c
                SET lease_expires_at = now() + $3::bigint * interval '1 millisecond',
                    heartbeat_at = now()
             FROM runs r
             WHERE r.run_id = $1 AND c.run = r.id AND c.fencing_token = $2
             RETURNING (extract(epoch FROM c.lease_expires_at) * 1000)::bigint",
        )
        .await
        .map_err(server_error)?;
    let row = client
        .query_opt(
            &statement,
            &[&lease.run_id.as_str(), &lease.fencing_token, &ttl_ms],
        )
        .await
        .map_err(server_error)?
        .ok_or_else(|| {
            fenced(format!(
                "controller token {} expired or was taken over",
                lease.fencing_token
            ))
        })?;
    Ok(ControllerLease {
        expires_at_ms: row.try_get(0).map_err(server_error)?,
        ..lease
    })
}

/// Queues dispatches, fenced by the controller's token, and wakes the worker hosts: one
/// statement (`$1` run, `$2` token, `$3`–`$6` the dispatches' columns, `$7`/`$8` the note), so
/// one round trip however many. Rows get their `queued_at` in the order given.
const ENQUEUE: &str = "WITH held AS (
         SELECT r.id FROM runs r JOIN run_controllers c ON c.run = r.id
         WHERE r.run_id = $1 AND c.fencing_token = $2 AND c.lease_expires_at >= now()
     ),
     added AS (
         INSERT INTO dispatch_queue (run, execution, node, harness, payload_json, state)
         SELECT held.id, d.execution, d.node, d.harness, d.payload_json, 'queued'
         FROM held,
              unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
                  AS d (execution, node, harness, payload_json, n)
         ORDER BY d.n
         ON CONFLICT (run, execution) DO NOTHING
         RETURNING 1
     )
     SELECT (SELECT count(*) FROM added), pg_notify($7, $8) FROM held";

async fn enqueue(
    shared: &Shared,
    run_id: RunId,
    controller_token: i64,
    dispatches: Vec<Dispatch>,
) -> Result<(), LedgerError> {
    let client = connection(shared).await?;
    if dispatches.is_empty() {
        // Nothing to queue: only say whether the token still holds the run.
        let run = run_row(&client, &run_id).await?;
        return check_controller(&client, run, controller_token, &run_id).await;
    }
    let executions = dispatches
        .iter()
        .map(|dispatch| {
            i64::try_from(dispatch.execution)
                .map_err(|_| LedgerError::corrupt("an execution number beyond the ledger's range"))
        })
        .collect::<Result<Vec<i64>, LedgerError>>()?;
    let column = |field: fn(&Dispatch) -> &String| -> Vec<&str> {
        dispatches.iter().map(|d| field(d).as_str()).collect()
    };
    let (nodes, harnesses, payloads) = (
        column(|d| &d.node),
        column(|d| &d.harness),
        column(|d| &d.payload_json),
    );
    let channel = dispatch_notes::channel(&shared.schema, &DispatchNote::Queued);
    let note = dispatch_notes::payload(&shared.schema, &DispatchNote::Queued);
    let statement = client.prepare_cached(ENQUEUE).await.map_err(server_error)?;
    let held = client
        .query_opt(
            &statement,
            &[
                &run_id.as_str(),
                &controller_token,
                &executions,
                &nodes,
                &harnesses,
                &payloads,
                &channel,
                &note,
            ],
        )
        .await
        .map_err(server_error)?;
    if held.is_some() {
        return Ok(());
    }
    // Nothing was queued: say whether the run is unknown or held by another token.
    let run = run_row(&client, &run_id).await?;
    check_controller(&client, run, controller_token, &run_id).await?;
    Err(fenced(format!(
        "controller token {controller_token} no longer holds run {run_id}"
    )))
}

async fn claim(
    shared: &Shared,
    worker: String,
    harnesses: Vec<String>,
    limit: i64,
    ttl_ms: i64,
) -> Result<Vec<Claim>, LedgerError> {
    let client = connection(shared).await?;
    // SKIP LOCKED: concurrent claimers pass over each other's rows instead of waiting, and
    // a row is handed to exactly one of them. Each harness's oldest rows come from the index
    // in order (`dispatch_queue_waiting`), so a claim reads a few rows, not the whole queue;
    // rows a harness offered beyond the limit are locked only until the statement ends.
    let statement = client
        .prepare_cached(
            "WITH picked AS (
                 SELECT oldest.run, oldest.execution
                 FROM unnest($1::text[]) AS kinds (kind)
                 CROSS JOIN LATERAL (
                     SELECT q.run, q.execution, q.queued_at FROM dispatch_queue q
                     WHERE q.state = 'queued' AND q.harness = kinds.kind
                     ORDER BY q.queued_at, q.run, q.execution
                     LIMIT $2
                     FOR UPDATE SKIP LOCKED
                 ) AS oldest
                 ORDER BY oldest.queued_at, oldest.run, oldest.execution
                 LIMIT $2
             )
             UPDATE dispatch_queue q
                SET state = 'claimed', claimed_by = $3, claims = q.claims + 1,
                    fencing_token = nextval('fencing_tokens'),
                    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
             FROM picked, runs r
             WHERE q.run = picked.run AND q.execution = picked.execution AND r.id = q.run
             RETURNING r.run_id, q.execution, q.node, q.harness, q.payload_json, q.claims,
                       q.fencing_token,
                       (extract(epoch FROM q.lease_expires_at) * 1000)::bigint",
        )
        .await
        .map_err(server_error)?;
    let rows = client
        .query(&statement, &[&harnesses, &limit, &worker, &ttl_ms])
        .await
        .map_err(server_error)?;
    rows.iter()
        .map(|row| {
            Ok(Claim {
                run_id: run_id_of(row.try_get(0).map_err(server_error)?)?,
                execution: execution_number(row.try_get(1).map_err(server_error)?)?,
                node: row.try_get(2).map_err(server_error)?,
                harness: row.try_get(3).map_err(server_error)?,
                payload_json: row.try_get(4).map_err(server_error)?,
                claims: row.try_get(5).map_err(server_error)?,
                fencing_token: row.try_get(6).map_err(server_error)?,
                expires_at_ms: row.try_get(7).map_err(server_error)?,
            })
        })
        .collect()
}

/// The update of a live claim: extends its lease, and settles it when `$5` (the outcome) is
/// given; `$1` run, `$2` execution, `$3` fencing token, `$4` lease in milliseconds. The run's
/// row id comes from a sub-select so the row is found by its primary key: joined, the planner
/// (on a young table's statistics) scanned every live claim's index entries instead.
macro_rules! touch_claim_sql {
    () => {
        "UPDATE dispatch_queue q
            SET lease_expires_at = now() + $4::bigint * interval '1 millisecond',
                state = CASE WHEN $5::text IS NULL THEN 'claimed' ELSE 'settled' END,
                outcome_json = $5
         WHERE q.run = (SELECT id FROM runs WHERE run_id = $1) AND q.execution = $2
           AND q.fencing_token = $3 AND q.state = 'claimed'
           AND q.lease_expires_at >= now()
         RETURNING (extract(epoch FROM q.lease_expires_at) * 1000)::bigint AS expires"
    };
}

/// A heartbeat: the claim's update alone.
const EXTEND_CLAIM: &str = touch_claim_sql!();
/// A settlement: the update, and the note to the run's collector (`$6` channel, `$7` payload)
/// in the same statement, so one commit delivers both.
pub(super) const SETTLE_CLAIM: &str = concat!(
    "WITH touched AS (",
    touch_claim_sql!(),
    ") SELECT touched.expires, pg_notify($6, $7) FROM touched"
);

/// Extends a claim (`outcome: None`) or settles it with its outcome; either only while the
/// claim is live with its token.
async fn touch_claim(
    shared: &Shared,
    claim: Claim,
    ttl_ms: i64,
    outcome: Option<String>,
) -> Result<Claim, LedgerError> {
    let client = connection(shared).await?;
    let execution = i64::try_from(claim.execution)
        .map_err(|_| LedgerError::corrupt("an execution number beyond the ledger's range"))?;
    let settling = outcome.is_some();
    let (channel, note) = if settling {
        let note = DispatchNote::Dispatch(claim.run_id.clone());
        (
            dispatch_notes::channel(&shared.schema, &note),
            dispatch_notes::payload(&shared.schema, &note),
        )
    } else {
        (String::new(), String::new())
    };
    let run_id = claim.run_id.as_str();
    let parameters: [&(dyn ToSql + Sync); 7] = [
        &run_id,
        &execution,
        &claim.fencing_token,
        &ttl_ms,
        &outcome,
        &channel,
        &note,
    ];
    let (text, parameters) = if settling {
        (SETTLE_CLAIM, &parameters[..])
    } else {
        (EXTEND_CLAIM, &parameters[..5])
    };
    let statement = client.prepare_cached(text).await.map_err(server_error)?;
    let row = client
        .query_opt(&statement, parameters)
        .await
        .map_err(server_error)?
        .ok_or_else(|| {
            fenced(format!(
                "claim {} of execution {} expired or was taken over",
                claim.fencing_token, claim.execution
            ))
        })?;
    Ok(Claim {
        expires_at_ms: row.try_get(0).map_err(server_error)?,
        ..claim
    })
}

async fn reap_expired(
    shared: &Shared,
    run_id: RunId,
    max_claims: i32,
) -> Result<Vec<ReapedClaim>, LedgerError> {
    let client = connection(shared).await?;
    let statement = client
        .prepare_cached(
            "UPDATE dispatch_queue q
                SET state = CASE WHEN q.claims < $2 THEN 'queued' ELSE 'lost' END,
                    claimed_by = NULL, fencing_token = NULL, lease_expires_at = NULL,
                    queued_at = clock_timestamp()
             FROM runs r
             WHERE r.run_id = $1 AND q.run = r.id AND q.state = 'claimed'
               AND q.lease_expires_at < now()
             RETURNING q.execution, q.state = 'queued'",
        )
        .await
        .map_err(server_error)?;
    let rows = client
        .query(&statement, &[&run_id.as_str(), &max_claims])
        .await
        .map_err(server_error)?;
    rows.iter()
        .map(|row| {
            Ok(ReapedClaim {
                execution: execution_number(row.try_get(0).map_err(server_error)?)?,
                requeued: row.try_get(1).map_err(server_error)?,
            })
        })
        .collect()
}

impl PostgresStore {
    /// Takes the controller lease of `run_id` for `holder` when it is free or expired (a fresh,
    /// larger fencing token), or returns `holder`'s own live lease; `None` while another
    /// holder's lease is live.
    pub fn acquire_controller(
        &self,
        run_id: &RunId,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<ControllerLease>, LedgerError> {
        // The same holder asking again keeps its token, so an attempt whose answer an
        // outage lost is repeated safely.
        self.riding_out(|| {
            let (run_id, holder) = (run_id.clone(), holder.to_owned());
            self.call(move |shared| async move {
                acquire_controller(&shared, run_id, holder, millis(ttl)).await
            })
        })
    }

    /// Extends a controller lease; [`LedgerError::Fenced`] once another holder took it. A
    /// lease that expired while nobody took it (an outage outlasted it) is taken back: its
    /// token is still the run's, so no other controller can have written in between.
    pub fn renew_controller(
        &self,
        lease: &ControllerLease,
        ttl: Duration,
    ) -> Result<ControllerLease, LedgerError> {
        self.riding_out(|| {
            let lease = lease.clone();
            self.call(
                move |shared| async move { renew_controller(&shared, lease, millis(ttl)).await },
            )
        })
    }

    /// Queues node executions for worker hosts, only while `controller_token` holds the run.
    /// An execution already in the queue (in any state) is left as it is, so a controller that
    /// took the run over re-attaches to its predecessor's dispatches by queueing them again.
    pub fn enqueue(
        &self,
        run_id: &RunId,
        controller_token: i64,
        dispatches: Vec<Dispatch>,
    ) -> Result<(), LedgerError> {
        let run_id = run_id.clone();
        self.call(move |shared| async move {
            enqueue(&shared, run_id, controller_token, dispatches).await
        })
    }

    /// Claims up to `limit` queued executions of the given harnesses, oldest first, each with
    /// a fresh fencing token and a lease of `ttl`.
    pub fn claim(
        &self,
        worker: &str,
        harnesses: &[&str],
        limit: usize,
        ttl: Duration,
    ) -> Result<Vec<Claim>, LedgerError> {
        let worker = worker.to_owned();
        let harnesses: Vec<String> = harnesses.iter().map(|h| (*h).to_owned()).collect();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |shared| async move {
            claim(&shared, worker, harnesses, limit, millis(ttl)).await
        })
    }

    /// Extends a live claim by `ttl`; [`LedgerError::Fenced`] once it expired or was re-queued.
    pub fn heartbeat(&self, claim: &Claim, ttl: Duration) -> Result<Claim, LedgerError> {
        let claim = claim.clone();
        self.call(move |shared| async move { touch_claim(&shared, claim, millis(ttl), None).await })
    }

    /// Records a claimed execution's outcome, only while the claim is live with its token: a
    /// fenced worker's late outcome is refused ([`LedgerError::Fenced`]) and stores nothing.
    pub fn complete(&self, claim: &Claim, outcome_json: &str) -> Result<(), LedgerError> {
        let claim = claim.clone();
        let outcome = outcome_json.to_owned();
        self.call(move |shared| async move {
            touch_claim(&shared, claim, 0, Some(outcome))
                .await
                .map(drop)
        })
    }

    /// Re-queues the run's expired claims that may be claimed again (fewer than `max_claims`
    /// claims so far) and marks the others `lost`; either way the old token is dead.
    pub fn reap_expired(
        &self,
        run_id: &RunId,
        max_claims: u32,
    ) -> Result<Vec<ReapedClaim>, LedgerError> {
        let run_id = run_id.clone();
        let max_claims = i32::try_from(max_claims).unwrap_or(i32::MAX);
        self.call(move |shared| async move { reap_expired(&shared, run_id, max_claims).await })
    }
}
