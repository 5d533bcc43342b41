//! Versioned schema migrations, recorded one row per step in `trellis_ledger_migrations` and
//! applied in order under an advisory lock, so concurrent openers migrate once.

use tokio_postgres::Client;

use crate::error::LedgerError;
use crate::postgres::error::server_error;

/// Key of the advisory lock every migration holds (ASCII "TRLS", as the SQLite application id).
const MIGRATION_LOCK: i64 = 0x5452_4c53;

/// The table that marks a schema as a Trellis ledger and records its applied steps.
pub const MIGRATIONS_TABLE: &str = "trellis_ledger_migrations";

/// One schema step: applying it to version `version - 1` yields `version`.
pub struct Migration {
    pub version: i32,
    pub sql: &'static str,
}

/// Every schema step, oldest first. Never edit a released step; append a new one.
///
/// JSON is stored as `text`, not `jsonb`: the ledger reads back exactly the bytes it wrote
/// (key order, number spelling), the canary scan searches those bytes, and nothing queries
/// inside the documents. Run ids and keys compare bytewise (`COLLATE "C"`) so listing order
/// does not depend on the server's locale.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: r#"
        CREATE TABLE runs (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id text COLLATE "C" NOT NULL UNIQUE,
            submission_key text COLLATE "C" NOT NULL UNIQUE,
            submission_digest text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('graphspec', 'gap')),
            title text NOT NULL,
            graph_identity text,
            predecessor text COLLATE "C" REFERENCES runs (run_id),
            successor text COLLATE "C" REFERENCES runs (run_id),
            created_at_ms bigint NOT NULL,
            submission_json text NOT NULL
        );
        CREATE INDEX runs_newest_first ON runs (created_at_ms DESC, run_id DESC);
        CREATE TABLE run_heads (
            run bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            cursor bigint NOT NULL CHECK (cursor >= 0),
            phase text NOT NULL
                CHECK (phase IN ('admitted', 'running', 'stopping', 'finished')),
            progress_json text NOT NULL
        );
        CREATE INDEX run_heads_unfinished ON run_heads (phase) WHERE phase <> 'finished';
        CREATE TABLE run_events (
            run bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            sequence bigint NOT NULL CHECK (sequence >= 1),
            is_log boolean NOT NULL,
            recorded_at_ms bigint NOT NULL,
            event_json text NOT NULL,
            PRIMARY KEY (run, sequence)
        );
        CREATE TABLE run_executions (
            run bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            execution bigint NOT NULL CHECK (execution >= 0),
            snapshot_json text NOT NULL,
            PRIMARY KEY (run, execution)
        );
    "#,
    },
    Migration {
        version: 2,
        // Distributed execution (issue 17, phase 2): one controller lease per run and a dispatch
        // queue of node executions, both fenced by tokens from one ledger-wide sequence, so a
        // token handed out later is always larger, across runs, hosts and restarts.
        sql: r#"
        CREATE SEQUENCE fencing_tokens AS bigint START 1;
        CREATE TABLE run_controllers (
            run bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            holder text NOT NULL,
            fencing_token bigint NOT NULL,
            lease_expires_at timestamptz NOT NULL,
            heartbeat_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE dispatch_queue (
            run bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            execution bigint NOT NULL CHECK (execution >= 0),
            node text NOT NULL,
            harness text NOT NULL,
            payload_json text NOT NULL,
            state text NOT NULL CHECK (state IN ('queued', 'claimed', 'settled', 'lost')),
            claims integer NOT NULL DEFAULT 0,
            claimed_by text,
            fencing_token bigint,
            lease_expires_at timestamptz,
            outcome_json text,
            queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (run, execution)
        );
        CREATE INDEX dispatch_queue_waiting ON dispatch_queue (harness, queued_at)
            WHERE state = 'queued';
        CREATE INDEX dispatch_queue_claimed ON dispatch_queue (lease_expires_at)
            WHERE state = 'claimed';
    "#,
    },
    Migration {
        version: 3,
        // GaP runs record their node bodies (`gap_node_started`, `gap_node_settled`) so they
        // can be resumed. The rows are unchanged, but a build from before these kinds would read
        // such a run as corrupt; raising the version makes it refuse the whole ledger instead.
        sql: "",
    },
    Migration {
        version: 4,
        // Live log lines of executions on worker hosts: pushed under the claim's token while
        // the execution runs, taken (deleted) by the run's controller, which records them as
        // events. `line` orders them; a line is JSON text because `text` cannot hold NUL.
        sql: r#"
        CREATE TABLE dispatch_logs (
            run bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            line bigint GENERATED ALWAYS AS IDENTITY,
            execution bigint NOT NULL CHECK (execution >= 0),
            line_json text NOT NULL,
            PRIMARY KEY (run, line)
        );
    "#,
    },
    Migration {
        version: 5,
        // A claim reads each harness's queued rows in claim order straight from the index and
        // stops after the rows it takes, and a controller finds its run's finished rows without
        // reading its queued ones: neither cost grows with the queue's length.
        sql: r#"
        DROP INDEX dispatch_queue_waiting;
        CREATE INDEX dispatch_queue_waiting ON dispatch_queue (harness, queued_at, run, execution)
            WHERE state = 'queued';
        CREATE INDEX dispatch_queue_finished ON dispatch_queue (run)
            WHERE state IN ('settled', 'lost');
    "#,
    },
];

/// The schema version this build writes.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Prepares the ledger schema on `client`'s search path and brings it to the latest version;
/// returns the schema's name. `create_schema` is created first when missing.
pub(super) async fn migrate(
    client: &mut Client,
    create_schema: Option<&str>,
    steps: &[Migration],
) -> Result<String, LedgerError> {
    let encoding = client
        .query_one("SHOW server_encoding", &[])
        .await
        .map_err(server_error)?;
    let encoding: String = encoding.try_get(0).map_err(server_error)?;
    if !encoding.eq_ignore_ascii_case("UTF8") {
        return Err(LedgerError::invalid_location(format!(
            "the ledger database must use the UTF8 encoding, not {encoding}"
        )));
    }
    let supported = steps.last().map_or(0, |m| m.version);
    // Cheap check first, without the lock: most opens find an up-to-date schema.
    if create_schema.is_none() || schema_exists(client, create_schema).await? {
        let (schema, version) = current_version(client, supported).await?;
        if version == Some(supported) {
            return Ok(schema);
        }
    }
    let tx = client.transaction().await.map_err(server_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(server_error)?;
    if let Some(name) = create_schema {
        // Under the lock: concurrent `CREATE SCHEMA IF NOT EXISTS` can still collide.
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {name}"))
            .await
            .map_err(server_error)?;
    }
    let (schema, version) = current_version(&tx, supported).await?;
    let current = match version {
        Some(version) => version,
        None => {
            tx.batch_execute(&format!(
                "CREATE TABLE {MIGRATIONS_TABLE} (
                     version integer PRIMARY KEY,
                     applied_at timestamptz NOT NULL DEFAULT now()
                 )"
            ))
            .await
            .map_err(server_error)?;
            0
        }
    };
    for step in steps.iter().filter(|m| m.version > current) {
        tx.batch_execute(step.sql).await.map_err(server_error)?;
        tx.execute(
            &format!("INSERT INTO {MIGRATIONS_TABLE} (version) VALUES ($1)"),
            &[&step.version],
        )
        .await
        .map_err(server_error)?;
    }
    tx.commit().await.map_err(server_error)?;
    Ok(schema)
}

async fn schema_exists(client: &Client, name: Option<&str>) -> Result<bool, LedgerError> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&name.unwrap_or_default()],
        )
        .await
        .map_err(server_error)?;
    row.try_get(0).map_err(server_error)
}

/// The current schema and its ledger version (`None`: no ledger there yet), after checking
/// it is not another application's and not newer than this build.
async fn current_version(
    client: &impl tokio_postgres::GenericClient,
    supported: i32,
) -> Result<(String, Option<i32>), LedgerError> {
    let row = client
        .query_one(
            "SELECT current_schema(),
                 to_regclass(quote_ident(current_schema()) || '.' || $1) IS NOT NULL,
                 (SELECT count(*) FROM pg_class c
                  WHERE c.relnamespace =
                        (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
                    AND c.relkind IN ('r', 'p', 'v', 'm')
                    AND c.relname IN ('runs', 'run_heads', 'run_events', 'run_executions'))",
            &[&MIGRATIONS_TABLE],
        )
        .await
        .map_err(server_error)?;
    let schema: Option<String> = row.try_get(0).map_err(server_error)?;
    let Some(schema) = schema else {
        return Err(LedgerError::invalid_location(
            "the ledger schema does not exist (check search_path)",
        ));
    };
    let marked: bool = row.try_get(1).map_err(server_error)?;
    let ours: i64 = row.try_get(2).map_err(server_error)?;
    if !marked {
        if ours > 0 {
            return Err(LedgerError::NotALedger {
                detail: format!("schema {schema} already holds tables of another application"),
            });
        }
        return Ok((schema, None));
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}"),
            &[],
        )
        .await
        .map_err(server_error)?;
    let version: i32 = row.try_get(0).map_err(server_error)?;
    if version > supported {
        return Err(LedgerError::SchemaTooNew {
            found: i64::from(version),
            supported: i64::from(supported),
        });
    }
    Ok((schema, Some(version)))
}
