//! The one submission `trellis ui` serves beside the run API: starting a run of a saved profile
//! (`POST /runs`) in a directory of this machine, so the page's profile editor can start what
//! it saved. The team server's own `POST /runs` ([`crate::team`]) replaces it there.

use std::path::PathBuf;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::Value;
use trellis_runtime::{InputSource, RuntimeError, SubmitOptions, WorkspaceOptions};

use crate::api::ApiState;
use crate::api::control::SubmitAnswer;
use crate::api::problems::{bad_request, blocking, json_body};
use crate::problem::Problem;
use crate::team::MAX_KEY_BYTES;

/// A run of the profile `profile`: `input` (a JSON document) or `task` replaces its default
/// input; `workspace` is an absolute directory (none: where `trellis ui` was started).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LocalStart {
    profile: String,
    input: Option<Value>,
    task: Option<String>,
    title: Option<String>,
    workspace: Option<PathBuf>,
}

/// The route, to be merged into the local UI's API beside [`crate::api::routes`].
pub fn routes(state: ApiState) -> Router {
    Router::new().route("/runs", post(start)).with_state(state)
}

fn workspace_of(requested: Option<PathBuf>) -> Result<PathBuf, Problem> {
    let directory = match requested {
        Some(path) if path.is_absolute() => path,
        Some(_) => {
            return Err(bad_request(
                "request.invalid",
                "`workspace` must be an absolute directory",
            ));
        }
        None => std::env::current_dir().map_err(|_| {
            bad_request(
                "request.invalid",
                "the server has no current directory: give `workspace`",
            )
        })?,
    };
    if !directory.is_dir() {
        return Err(bad_request(
            "request.invalid",
            format!("`workspace` {} is not a directory", directory.display()),
        ));
    }
    Ok(directory)
}

async fn start(State(state): State<ApiState>, body: Bytes) -> Result<Response, Problem> {
    let request: LocalStart = json_body(&body)?;
    if let Some(title) = &request.title
        && (title.len() > MAX_KEY_BYTES || title.chars().any(char::is_control))
    {
        return Err(bad_request(
            "request.invalid",
            format!("`title` is longer than {MAX_KEY_BYTES} bytes or holds a control character"),
        ));
    }
    let input = match (request.input, request.task) {
        (None, None) => InputSource::Default,
        (Some(document), None) => InputSource::Document(document),
        (None, Some(task)) => InputSource::Task(task),
        (Some(_), Some(_)) => {
            return Err(bad_request(
                "request.invalid",
                "give at most one of `input` and `task`",
            ));
        }
    };
    let workspace = workspace_of(request.workspace)?;
    let options = SubmitOptions {
        submission_key: None,
        title: request.title,
        start: state.start,
        workspace: WorkspaceOptions::default(),
        skip_preflight: false,
        // A local run uses the environment `trellis ui` was started from.
        environment: None,
    };
    let runtime = state.runtime.clone();
    let name = request.profile;
    let receipt = blocking(move || {
        let admit = runtime.profile_request(&name, input, Some(workspace))?;
        let admitted = runtime.admit(admit).map_err(RuntimeError::Admission)?;
        runtime.submit(admitted, options)
    })
    .await?;
    let answer = SubmitAnswer {
        run_id: receipt.run_id.as_str().to_owned(),
        created: receipt.created,
    };
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}
