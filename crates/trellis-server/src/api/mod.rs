//! The one run API route set (`/api/v1/…`) over `trellis_runtime::Runtime`, mounted by both
//! front ends: `trellis ui` (with the page and local access) and `trellis serve` (with bearer
//! tokens, submission and the OpenAPI document, see [`crate::team`]). JSON reads and
//! validation ([`reads`]), the two control actions ([`control`]) and the Server-Sent Events
//! streams resumable by cursor ([`events`]). The routes know nothing of who may call them: the
//! access policy is a layer [`crate::app`] puts around them.

pub(crate) mod control;
pub(crate) mod events;
pub(crate) mod reads;
pub(crate) mod workspace;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::{get, post};
use trellis_runtime::{AdmissionError, RunId, Runtime, RuntimeError, StartMode, parse_run_id};

use crate::problem::Problem;
use crate::streams::StreamSlots;

/// What every route handler shares: the runtime, the bound on open event streams, and how a
/// resumed run is started.
#[derive(Clone)]
pub struct ApiState {
    pub runtime: Arc<Runtime>,
    pub slots: StreamSlots,
    /// `Detached` (a controller process per run) in production; tests may drive runs on the
    /// request's blocking thread (`InProcess`).
    pub start: StartMode,
}

impl ApiState {
    /// Runs started through the API are driven by detached controller processes.
    pub fn new(runtime: Arc<Runtime>, slots: StreamSlots) -> Self {
        Self {
            runtime,
            slots,
            start: StartMode::Detached,
        }
    }

    /// The same state, starting runs with `start`.
    pub fn with_start(mut self, start: StartMode) -> Self {
        self.start = start;
        self
    }
}

/// The routes, to be nested under `/api/v1` by [`crate::app`].
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route("/runs", get(reads::list))
        .route("/runs/events", get(events::run_changes))
        .route("/runs/{run}", get(reads::status))
        .route("/runs/{run}/graph", get(reads::graph))
        .route("/runs/{run}/watch", get(events::watch))
        .route("/runs/{run}/logs", get(events::logs))
        .route("/runs/{run}/executions/{execution}", get(reads::execution))
        .route("/runs/{run}/force-stop", post(control::force_stop))
        .route("/runs/{run}/resume", post(control::resume))
        .route("/runs/{run}/checkpoints", get(workspace::checkpoints))
        .route(
            "/runs/{run}/discard-workspace",
            post(workspace::discard_workspace),
        )
        .route("/prune", post(workspace::prune))
        .route("/validate", post(reads::validate))
        .route("/templates", get(reads::templates))
        .route("/templates/{name}", get(reads::template))
        .with_state(state)
}

/// Runs a blocking runtime call on the blocking pool (the runtime's calls read the ledger and
/// may wait on it).
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, RuntimeError> + Send + 'static,
) -> Result<T, Problem> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(|error| problem_of(&error)),
        Err(_) => Err(internal("the request's worker thread failed")),
    }
}

pub(crate) fn internal(message: &str) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "runtime.internal",
        message,
    )
}

pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, code, message)
}

/// Parses a JSON body with a problem answer (not axum's plain-text rejection) on failure.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, Problem> {
    serde_json::from_slice(body).map_err(|error| {
        bad_request(
            "request.invalid",
            format!("the request body is not a valid request: {error}"),
        )
    })
}

/// The problem answer of a runtime error: its stable code, its message (never a secret value)
/// and, for a rejected graph, its diagnostics.
pub fn problem_of(error: &RuntimeError) -> Problem {
    let code = error.code();
    let problem = Problem::new(status_of(code), code, error.to_string());
    match error {
        RuntimeError::Admission(AdmissionError::Rejected { diagnostics, .. }) => {
            match serde_json::to_value(diagnostics) {
                Ok(diagnostics) => problem.with_details(serde_json::json!({
                    "diagnostics": diagnostics
                })),
                Err(_) => problem,
            }
        }
        _ => problem,
    }
}

fn status_of(code: &str) -> StatusCode {
    match code {
        "run.not_found" | "run.unknown_execution" | "run.unknown_checkpoint" => {
            StatusCode::NOT_FOUND
        }
        "run.checkpoint_pruned" => StatusCode::GONE,
        "run.invalid_id" | "cursor.invalid" | "cursor.ahead" | "cursor.stale" => {
            StatusCode::BAD_REQUEST
        }
        "submission.conflict"
        | "submission.key_in_use"
        | "run.still_active"
        | "run.nothing_to_resume"
        | "run.already_resumed"
        | "run.workspace_busy"
        | "run.workspace_changed"
        | "run.no_checkpoints"
        | "run.no_retained_workspace" => StatusCode::CONFLICT,
        "ledger.busy" | "ledger.unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "run.not_submittable" | "run.preflight" => StatusCode::UNPROCESSABLE_ENTITY,
        code if code.starts_with("admission.") => match code {
            "admission.verifier_internal" | "admission.stored_submission" => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        },
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(crate) fn admission_problem(error: AdmissionError) -> Problem {
    problem_of(&RuntimeError::Admission(error))
}

pub(crate) fn run_id(text: &str) -> Result<RunId, Problem> {
    parse_run_id(text).map_err(|error| problem_of(&error))
}
