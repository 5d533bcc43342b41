//! Workspaces of worker hosts that do not share the serving host's filesystem
//! (`trellis worker --server`): an execution's start point handed out, and its result taken
//! back, as git bundles — only to the worker host whose claim holds the execution (its fencing
//! token in the `Trellis-Claim` header), behind the team server's bearer tokens.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use trellis_runtime::{CLAIM_HEADER, START_COMMIT_HEADER, WORKSPACE_SUBDIR_HEADER};
use utoipa::ToSchema;

use crate::api::extract::Path;
use crate::api::problems::{bad_request, blocking, run_id};
use crate::problem::Problem;
use crate::schemas::ProblemDoc;
use crate::team::state::TeamState;

/// The media type of a git bundle.
const BUNDLE_TYPE: &str = "application/x-git-bundle";

/// The result a serving host keeps for an execution.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReceivedResult {
    /// The result commit; the run's controller applies it when the worker host reports the
    /// execution's outcome naming it.
    pub commit: String,
}

fn claim_token(headers: &HeaderMap) -> Result<i64, Problem> {
    let mut values = headers.get_all(CLAIM_HEADER).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<i64>().ok())
            .ok_or_else(|| bad_request("dispatch.claim_invalid", "Trellis-Claim is not a number")),
        _ => Err(bad_request(
            "dispatch.claim_invalid",
            "exactly one Trellis-Claim header (the claim's fencing token) is required",
        )),
    }
}

/// The workspace execution `execution` starts from, as a git bundle whose one reference
/// (`refs/trellis/remote/RUN/EXECUTION/start`, also in `Trellis-Start-Commit`) names a commit
/// of the workspace whose parent is the run's source revision, recorded on the first request;
/// `Trellis-Workspace-Subdir` says where the execution works below the repository's top.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/executions/{execution}/workspace", tag = "workers",
    params(
        ("run" = String, Path, description = "run id"),
        ("execution" = u64, Path, description = "execution number"),
        ("Trellis-Claim" = i64, Header, description = "the worker host's claim (fencing token)"),
    ),
    responses(
        (status = 200, description = "a git bundle", content_type = "application/x-git-bundle",
            headers(
                ("Trellis-Start-Commit" = String, description = "the start commit"),
                ("Trellis-Workspace-Subdir" = String, description = "where the execution works, relative to the repository's top (bytes beyond letters, digits and /._- as %XX)"),
            )),
        (status = 400, body = ProblemDoc),
        (status = 409, description = "the claim does not hold the execution", body = ProblemDoc),
        (status = 422, description = "the workspace is not in git", body = ProblemDoc),
    ),
)]
pub async fn workspace(
    State(state): State<TeamState>,
    Path((run, execution)): Path<(String, u64)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let claim = claim_token(&headers)?;
    let runtime = Arc::clone(&state.api.runtime);
    let start = blocking(move || runtime.remote_workspace(&run, execution, claim)).await?;
    let (commit, subdir) = (start.commit.clone(), start.subdir_header());
    let mut response = start.bundle.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(BUNDLE_TYPE));
    for (name, value) in [
        (START_COMMIT_HEADER, commit),
        (WORKSPACE_SUBDIR_HEADER, subdir),
    ] {
        // Both are printable ASCII by construction (hex digits; an encoded path).
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    Ok(response)
}

/// Returns the result of execution `execution`: a git bundle of
/// `refs/trellis/remote/RUN/EXECUTION/result`, a commit whose parent is the start point
/// (prerequisite: the start). Idempotent: the same result again answers the same commit.
#[utoipa::path(
    put, path = "/api/v1/runs/{run}/executions/{execution}/result", tag = "workers",
    params(
        ("run" = String, Path, description = "run id"),
        ("execution" = u64, Path, description = "execution number"),
        ("Trellis-Claim" = i64, Header, description = "the worker host's claim (fencing token)"),
    ),
    request_body(content = Vec<u8>, content_type = "application/x-git-bundle"),
    responses(
        (status = 200, body = ReceivedResult),
        (status = 400, description = "an incomplete or foreign bundle", body = ProblemDoc),
        (status = 409, description = "the claim does not hold the execution, or a different result was returned", body = ProblemDoc),
    ),
)]
pub async fn result(
    State(state): State<TeamState>,
    Path((run, execution)): Path<(String, u64)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let claim = claim_token(&headers)?;
    if body.is_empty() {
        return Err(bad_request(
            "dispatch.result_invalid",
            "the body holds no bundle",
        ));
    }
    let runtime = Arc::clone(&state.api.runtime);
    let commit =
        blocking(move || runtime.receive_remote_result(&run, execution, claim, &body)).await?;
    Ok((StatusCode::OK, Json(ReceivedResult { commit })).into_response())
}
