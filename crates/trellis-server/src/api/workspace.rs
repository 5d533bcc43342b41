//! A run's workspace over HTTP: the checkpoints it recorded, and discarding the worktree a
//! failed run kept for its successor. Both act on the files of the host that ran the run.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use trellis_runtime::MAX_CHECKPOINTS_PER_PAGE;
use utoipa::IntoParams;

use super::control::no_options;
use super::{ApiState, blocking, run_id};
use crate::openapi::{CheckpointPageDoc, DiscardedWorkspaceDoc, ProblemDoc};
use crate::problem::Problem;

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
