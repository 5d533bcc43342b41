//! A run's workspace over HTTP: the checkpoints it recorded, discarding the worktree a failed
//! run kept for its successor, and pruning what no run needs any more. All act on the files
//! of the host that ran the runs.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use trellis_runtime::{DEFAULT_PRUNE_AGE_MS, MAX_CHECKPOINTS_PER_PAGE, PruneOptions};
use utoipa::{IntoParams, ToSchema};

use super::control::{no_options, options_body};
use super::extract::{Path, Query};
use super::problems::{blocking, run_id};
use super::state::ApiState;
use crate::problem::Problem;
use crate::schemas::{CheckpointPageDoc, DiscardedWorkspaceDoc, ProblemDoc, PruneReportDoc};

/// Which page of checkpoints to answer.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CheckpointsQuery {
    /// Only checkpoints with a greater id (a page's `nextAfter`).
    pub after: Option<u32>,
    /// At most this many (1–100, default 100).
    pub limit: Option<usize>,
}

/// The run's checkpoints, oldest first: what each was taken before, when, and what changed.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/checkpoints", tag = "workspace",
    params(("run" = String, Path, description = "run id"), CheckpointsQuery),
    responses(
        (status = 200, body = CheckpointPageDoc),
        (status = 400, body = ProblemDoc),
        (status = 404, body = ProblemDoc),
    ),
)]
pub async fn checkpoints(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Query(query): Query<CheckpointsQuery>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let limit = query.limit.unwrap_or(MAX_CHECKPOINTS_PER_PAGE);
    let runtime = Arc::clone(&state.runtime);
    let page = blocking(move || runtime.checkpoints(&run, query.after, limit)).await?;
    Ok(Json(page).into_response())
}

/// Removes the worktree a finished run kept (worktree mode); its checkpoints stay.
#[utoipa::path(
    post, path = "/api/v1/runs/{run}/discard-workspace", tag = "workspace",
    params(("run" = String, Path, description = "run id")),
    responses(
        (status = 200, body = DiscardedWorkspaceDoc),
        (status = 400, description = "a body other than `{}`", body = ProblemDoc),
        (status = 404, body = ProblemDoc),
        (status = 409, description = "still active, or no worktree kept", body = ProblemDoc),
    ),
)]
pub async fn discard_workspace(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    body: Bytes,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    no_options(&body)?;
    let runtime = Arc::clone(&state.runtime);
    let discarded = blocking(move || runtime.discard_workspace(&run)).await?;
    Ok(Json(discarded).into_response())
}

/// The options of a prune (an empty body is `{}`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PruneBody {
    /// Age in milliseconds after which the latest run's checkpoints, saved workspace states
    /// and failed runs' worktrees go (default: 7 days). Checkpoints of a run a successor
    /// resumed go at any age once the chain has ended.
    pub older_than_ms: Option<u64>,
    /// Only report what would be removed.
    #[serde(default)]
    pub dry_run: bool,
}

/// Removes checkpoint references, saved workspace states and failed runs' worktrees that no
/// run will use again, across every repository the server's runs worked in. Runs still
/// going, or whose successor is, keep everything.
#[utoipa::path(
    post, path = "/api/v1/prune", tag = "workspace",
    request_body(content = PruneBody, description = "optional; an empty body is `{}`"),
    responses(
        (status = 200, body = PruneReportDoc),
        (status = 400, description = "an unknown field or a malformed body", body = ProblemDoc),
    ),
)]
pub async fn prune(State(state): State<ApiState>, body: Bytes) -> Result<Response, Problem> {
    let body: PruneBody = options_body(&body)?;
    let options = PruneOptions {
        older_than_ms: body.older_than_ms.unwrap_or(DEFAULT_PRUNE_AGE_MS),
        dry_run: body.dry_run,
    };
    let runtime = Arc::clone(&state.runtime);
    let report = blocking(move || runtime.prune(options)).await?;
    Ok(Json(report).into_response())
}
