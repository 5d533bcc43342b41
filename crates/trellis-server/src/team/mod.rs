//! The team server's API (`trellis serve`): submit, list, status, watch and logs as SSE,
//! force-stop and resume, over one shared [`Runtime`]; every route is described by the OpenAPI
//! document of [`openapi`]. Access (bearer tokens) is the [`crate::AccessPolicy`] the server was
//! started with, applied by [`crate::app`] in front of this router.

mod events;
pub mod openapi;
mod runs;
mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use trellis_runtime::{Runtime, RuntimeError, StartMode};

use crate::access::AccessPolicy;
use crate::bearer::BearerTokens;
use crate::problem::Problem;
use crate::streams::StreamSlots;

pub use openapi::{OPENAPI_PATH, openapi_document, openapi_router};
pub use workspaces::{WorkspaceError, WorkspaceRoot};

/// What the team routes share.
#[derive(Clone)]
pub struct TeamState {
    runtime: Arc<Runtime>,
    workspaces: Arc<WorkspaceRoot>,
    start: StartMode,
    streams: StreamSlots,
}

impl TeamState {
    /// Runs are driven by detached controller processes (`start` = `Detached`) in production;
    /// tests may drive them on the request's blocking thread (`InProcess`). Workspaces of
    /// submitted runs are directories under `workspaces`.
    pub fn new(
        runtime: Arc<Runtime>,
        workspaces: PathBuf,
        start: StartMode,
        max_streams: usize,
    ) -> Result<Self, WorkspaceError> {
        Ok(Self {
            runtime,
            workspaces: Arc::new(WorkspaceRoot::open(workspaces)?),
            start,
            streams: StreamSlots::new(max_streams),
        })
    }
}

/// The team API, to be nested under `/api/v1` by [`crate::app`].
pub fn router(state: TeamState) -> Router {
    Router::new()
        .route("/runs", get(runs::list).post(runs::submit))
        .route("/runs/{run}", get(runs::status))
        .route("/runs/{run}/graph", get(runs::graph))
        .route("/runs/{run}/executions/{execution}", get(runs::execution))
        .route("/runs/{run}/watch", get(events::watch))
        .route("/runs/{run}/logs", get(events::logs))
        .route("/runs/{run}/force-stop", post(runs::force_stop))
        .route("/runs/{run}/resume", post(runs::resume))
        .with_state(state)
}

/// The whole team server: the team API under `/api/v1` behind bearer-token access, and the
/// OpenAPI document at [`OPENAPI_PATH`] beside it (merged after the policy layer, so it is
/// readable without a token: it describes the API and holds no run data).
pub fn app(state: TeamState, tokens: BearerTokens) -> Router {
    crate::app(router(state), AccessPolicy::Bearer(tokens)).merge(openapi_router())
}

/// Runs a blocking runtime call off the async workers.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, RuntimeError> + Send + 'static,
) -> Result<T, Problem> {
    match tokio::task::spawn_blocking(call).await {
        Ok(result) => result.map_err(|error| problem_of(&error)),
        Err(_) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "runtime.internal",
            "the request's worker thread failed",
        )),
    }
}

/// The problem answer of a runtime error: its stable code, its message (never a secret value)
/// and, for a rejected graph, its diagnostics.
pub fn problem_of(error: &RuntimeError) -> Problem {
    let code = error.code();
    let status = status_of(code);
    let problem = Problem::new(status, code, error.to_string());
    match error {
        RuntimeError::Admission(trellis_runtime::AdmissionError::Rejected {
            diagnostics, ..
        }) => match serde_json::to_value(diagnostics) {
            Ok(diagnostics) => problem.with_details(serde_json::json!({
                "diagnostics": diagnostics
            })),
            Err(_) => problem,
        },
        _ => problem,
    }
}

fn status_of(code: &str) -> StatusCode {
    match code {
        "run.not_found" | "run.unknown_execution" => StatusCode::NOT_FOUND,
        "run.invalid_id" | "cursor.invalid" | "cursor.ahead" | "cursor.stale" => {
            StatusCode::BAD_REQUEST
        }
        "submission.conflict"
        | "submission.key_in_use"
        | "run.still_active"
        | "run.nothing_to_resume"
        | "run.already_resumed"
        | "run.workspace_busy" => StatusCode::CONFLICT,
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
