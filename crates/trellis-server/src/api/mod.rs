//! The run API routes (`/api/v1/…`) over `trellis_runtime::Runtime` and nothing else: JSON
//! reads, the two control actions, validation and templates ([`reads`]), and the
//! Server-Sent Events streams resumable by cursor ([`events`]). The routes know nothing of who
//! may call them: the access policy is a layer [`crate::app`] puts around them.

mod events;
mod reads;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use trellis_runtime::{AdmissionError, RunId, Runtime, RuntimeError, parse_run_id};

use crate::problem::Problem;
use crate::streams::StreamSlots;

/// What every route handler shares: the runtime and the bound on open event streams.
#[derive(Clone)]
pub struct ApiState {
    pub runtime: Arc<Runtime>,
    pub slots: StreamSlots,
}

impl ApiState {
    pub fn new(runtime: Arc<Runtime>, slots: StreamSlots) -> Self {
        Self { runtime, slots }
    }
}

/// The routes, to be nested under `/api/v1` by [`crate::app`].
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route("/runs", get(reads::list_runs))
        .route("/runs/events", get(events::run_changes))
        .route("/runs/{run}", get(reads::run_status))
        .route("/runs/{run}/graph", get(reads::run_graph))
        .route("/runs/{run}/watch", get(events::watch))
        .route("/runs/{run}/logs", get(events::logs))
        .route("/runs/{run}/executions/{execution}", get(reads::execution))
        .route("/runs/{run}/force-stop", post(reads::force_stop))
        .route("/runs/{run}/resume", post(reads::resume))
        .route("/validate", post(reads::validate))
        .route("/templates", get(reads::templates))
        .route("/templates/{name}", get(reads::template))
        .with_state(state)
}

/// Runs a blocking runtime call on the blocking pool (the runtime's calls read the ledger and
/// may wait on it).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RuntimeError> + Send + 'static,
) -> Result<T, Problem> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(runtime_problem),
        Err(_) => Err(internal("the request's worker thread failed")),
    }
}

fn internal(message: &str) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "runtime.internal",
        message,
    )
}

/// The answer for a runtime error: its stable code, its message (never a secret value), and
/// the status that fits the code.
pub fn runtime_problem(error: RuntimeError) -> Problem {
    let code = error.code();
    let status = match code {
        "run.not_found" | "run.unknown_execution" => StatusCode::NOT_FOUND,
        "run.invalid_id" | "cursor.invalid" | "cursor.ahead" => StatusCode::BAD_REQUEST,
        "run.still_active"
        | "run.nothing_to_resume"
        | "run.already_resumed"
        | "run.workspace_busy"
        | "submission.conflict"
        | "submission.key_in_use" => StatusCode::CONFLICT,
        "ledger.busy" => StatusCode::SERVICE_UNAVAILABLE,
        _ if code.starts_with("admission.") => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Problem::new(status, code, error.to_string())
}

fn admission_problem(error: AdmissionError) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        error.code(),
        error.to_string(),
    )
}

fn run_id(text: &str) -> Result<RunId, Problem> {
    parse_run_id(text).map_err(runtime_problem)
}
