//! The two control actions: force-stop a run now, and resume a failed one in a successor
//! (with what a resumption requires).
//! Force-stop takes no options and resume only its own (`fromCheckpoint`, `force`, a team
//! server's caller's `connections`, whose names `GET …/requirements` answers): the body
//! is empty or a JSON object, and an unknown field is refused, so a client that sends options
//! this server does not know hears so.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use trellis_runtime::ResumeOptions;
use utoipa::ToSchema;

use super::extract::Path;
use super::problems::{blocking, json_body, run_id};
use super::state::ApiState;
use crate::caller::{CallerValues, Requirements};
use crate::problem::Problem;
use crate::schemas::{ProblemDoc, RunStatusDoc};

/// What a submission or resumption did: `created: true` for a new run, `false` when the key
/// (or the resumed run) already named it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitAnswer {
    pub run_id: String,
    pub created: bool,
}

/// The body of a control action: nothing, or `{}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoOptions {}

pub(super) fn no_options(body: &Bytes) -> Result<(), Problem> {
    options_body::<NoOptions>(body).map(|NoOptions {}| ())
}

/// An action's options: an empty (or blank) body is the defaults, anything else must be
/// their JSON object.
pub(super) fn options_body<T: serde::de::DeserializeOwned + Default>(
    body: &Bytes,
) -> Result<T, Problem> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    json_body(body)
}

/// Stops a run now: its workers are killed and it ends `failed/force_stopped`; a finished run
/// is answered as it is.
#[utoipa::path(
    post, path = "/api/v1/runs/{run}/force-stop", tag = "control",
    params(("run" = String, Path, description = "run id")),
    responses(
        (status = 200, body = RunStatusDoc),
        (status = 400, description = "a body other than `{}`", body = ProblemDoc),
        (status = 404, body = ProblemDoc),
    ),
)]
pub async fn force_stop(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    body: Bytes,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    no_options(&body)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.force_stop(&run)).await?).into_response())
}

/// The options of a resumption (an empty body is `{}`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeBody {
    /// Restore this checkpoint's files (`GET …/checkpoints`) and start from its graph
    /// position; without it the latest checkpoint is restored only when the workspace no
    /// longer matches the run's last state.
    pub from_checkpoint: Option<u32>,
    /// Restore even when the workspace changed after the run ended (the replaced state is
    /// kept under `refs/trellis/saved/`).
    #[serde(default)]
    pub force: bool,
    /// A team server's caller's values for the variables `GET …/requirements` named (the
    /// caller sends them again with every resumption; they are never stored).
    #[serde(default)]
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub connections: CallerValues,
}

/// The environment variables a resumption of the run requires (its plan's connections): a
/// team server's caller sends their values with `POST …/resume`.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/requirements", tag = "control",
    params(("run" = String, Path, description = "run id")),
    responses(
        (status = 200, body = Requirements),
        (status = 404, body = ProblemDoc),
    ),
)]
pub async fn requirements(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    let connections = blocking(move || runtime.resume_requirements(&run)).await?;
    Ok(Json(Requirements { connections }).into_response())
}

/// Continues a failed run in a successor that reuses every settled outcome (those settled
/// before the checkpoint, when resumed from one).
#[utoipa::path(
    post, path = "/api/v1/runs/{run}/resume", tag = "control",
    params(("run" = String, Path, description = "run id")),
    request_body(content = Option<ResumeBody>),
    responses(
        (status = 201, body = SubmitAnswer),
        (status = 400, description = "a body that is not resume options", body = ProblemDoc),
        (status = 404, description = "no such run or checkpoint", body = ProblemDoc),
        (status = 409, description = "still active, succeeded or already resumed; the workspace changed since the run ended (pass `force`)", body = ProblemDoc),
    ),
)]
pub async fn resume(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    body: Bytes,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let choice: ResumeBody = options_body(&body)?;
    let runtime = Arc::clone(&state.runtime);
    let options = ResumeOptions {
        start: state.start,
        from_checkpoint: choice.from_checkpoint,
        force: choice.force,
    };
    let receipt = match &state.caller_connections {
        Some(server) => {
            let connections = choice.connections.connections(server)?;
            blocking(move || runtime.resume_with(&run, options, connections)).await?
        }
        None if !choice.connections.is_empty() => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "connections.not_accepted",
                "this server runs with its own environment and takes no connection values",
            ));
        }
        None => blocking(move || runtime.resume(&run, options)).await?,
    };
    let answer = SubmitAnswer {
        run_id: receipt.run_id.as_str().to_owned(),
        created: receipt.created,
    };
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}
