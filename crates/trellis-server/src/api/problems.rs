//! How the routes answer failures: a runtime error (with the HTTP status of its stable code),
//! an unreadable body or run id, each as a [`Problem`]; and [`blocking`], which runs a runtime
//! call on the blocking pool and answers its error the same way.

use axum::body::Bytes;
use axum::http::StatusCode;
use trellis_runtime::{AdmissionError, ProfileError, RunId, RuntimeError, parse_run_id};

use crate::problem::Problem;

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
        RuntimeError::Profile(ProfileError::RevisionConflict {
            current, expected, ..
        }) => problem.with_details(serde_json::json!({
            "currentRevision": current,
            "expectedRevision": expected,
        })),
        _ => problem,
    }
}

fn status_of(code: &str) -> StatusCode {
    match code {
        "run.not_found"
        | "run.unknown_execution"
        | "run.unknown_checkpoint"
        | "profile.not_found" => StatusCode::NOT_FOUND,
        "profile.invalid_name" | "profile.invalid" => StatusCode::BAD_REQUEST,
        "profile.revision_conflict" => StatusCode::CONFLICT,
        "run.checkpoint_pruned" => StatusCode::GONE,
        // `run.invalid`: the ledger refused the submission's key or title (empty, too long,
        // a control character).
        "run.invalid" | "run.invalid_id" | "cursor.invalid" | "cursor.ahead" | "cursor.stale" => {
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
        | "run.no_retained_workspace"
        | "dispatch.not_claimed"
        | "dispatch.result_conflict" => StatusCode::CONFLICT,
        "dispatch.result_invalid" => StatusCode::BAD_REQUEST,
        "dispatch.no_start_point" => StatusCode::UNPROCESSABLE_ENTITY,
        "ledger.busy" | "ledger.unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "run.not_submittable" | "run.preflight" | "runtime.invalid_environment" => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        code if code.starts_with("connections.") => StatusCode::BAD_REQUEST,
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
