//! The run routes of the team API: submit (idempotent on its key), list, status, graph,
//! one execution, force-stop and resume. Each is one runtime call on a blocking thread.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_runtime::{
    AdmitRequest, ConfigSource, DeliveryMode, GraphSource, InputSource, Phase, PlanSource,
    ResumeOptions, RunKind, RunListFilter, SubmitOptions, TemplateDelivery, WorkspaceOptions,
    parse_run_id,
};
use utoipa::{IntoParams, ToSchema};

use super::openapi::{ExecutionDetailDoc, ProblemDoc, RunGraphDoc, RunStatusDoc, RunSummaryDoc};
use super::{TeamState, blocking};
use crate::problem::Problem;

/// The longest submission key or title a client may send.
pub const MAX_KEY_BYTES: usize = 256;

/// A run to start. Give `graph` (a GraphSpec document) or `template`; the input is `input`
/// (a JSON document) or `task` (a template's task text); `plan` binds executables (none: the
/// server detects an agent CLI on its own `PATH`). Plans name environment variables only: the
/// values come from the server's environment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmitRequest {
    /// Retrying with the same key and the same submission returns the same run.
    pub submission_key: Option<String>,
    pub title: Option<String>,
    /// A GraphSpec `openengine.graph.full/v1` document.
    #[schema(value_type = Option<Object>)]
    pub graph: Option<Value>,
    pub template: Option<TemplateChoice>,
    /// The initial input (any JSON value).
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    /// A template's task (instead of `input`).
    pub task: Option<String>,
    pub plan: Option<PlanChoice>,
    /// The run's workspace directory under the server's workspace root (created when
    /// missing); none: derived from the submission key, or fresh.
    pub workspace: Option<String>,
    /// The repository revision to work on, checked out into the run's workspace (none: the
    /// workspace starts empty).
    pub source: Option<super::workspaces::SourceChoice>,
    /// Start without the agent lane's preflight (CLI installed and signed in, declared
    /// variables set); a failed preflight answers 422 `run.preflight`, one line per problem.
    #[serde(default)]
    pub no_preflight: bool,
}

/// A built-in template (`GET`-able with `trellis template list`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateChoice {
    pub name: String,
    /// How the run hands over its result: `none`, `push`, `pull_request` (`pr`), `merge`
    /// (`ship`) or `comment`; none: the template's own default.
    pub delivery: Option<String>,
    /// With `pull_request`/`merge`: do not send review feedback back for repair.
    #[serde(default)]
    pub ignore_pr_feedback: bool,
}

/// Exactly one of `exact` (one binding per executable) or `uniform` (one binding for all).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanChoice {
    #[schema(value_type = Option<Object>)]
    pub exact: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub uniform: Option<Value>,
}

/// What a submission did: 201 with `created: true` for a new run, 200 with `created: false`
/// when the key already named this submission's run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitAnswer {
    pub run_id: String,
    pub created: bool,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    #[schema(value_type = Vec<RunSummaryDoc>)]
    pub runs: Vec<trellis_runtime::RunSummary>,
}

/// Which runs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `admitted`, `running`, `stopping` or `finished`.
    pub phase: Option<String>,
    /// `graphspec` or `gap`.
    pub kind: Option<String>,
    /// Only titles containing this text (case-insensitive).
    pub q: Option<String>,
    /// At most this many runs (default 50, at most 1,000).
    pub limit: Option<usize>,
    /// Keyset paging: runs listed after this run id.
    pub after: Option<String>,
}

fn bad_request(code: &'static str, message: impl Into<String>) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, code, message)
}

/// Parses a JSON body with a problem answer (not axum's plain-text rejection) on failure.
pub(super) fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, Problem> {
    serde_json::from_slice(body).map_err(|error| {
        bad_request(
            "request.invalid",
            format!("the request body is not a valid request: {error}"),
        )
    })
}

fn run_id(text: &str) -> Result<trellis_runtime::RunId, Problem> {
    parse_run_id(text).map_err(|error| super::problem_of(&error))
}

fn admit_request(
    request: SubmitRequest,
    workspace: std::path::PathBuf,
) -> Result<AdmitRequest, Problem> {
    let graph = match (request.graph, request.template) {
        (Some(document), None) => GraphSource::Document(document),
        (None, Some(template)) => {
            let mode = match template.delivery.as_deref() {
                None => None,
                Some(text) => Some(DeliveryMode::parse(text).ok_or_else(|| {
                    bad_request(
                        "request.invalid",
                        format!(
                            "unknown delivery {text:?}: use none, push, pull_request, merge or comment"
                        ),
                    )
                })?),
            };
            GraphSource::Template {
                name: template.name,
                delivery: TemplateDelivery {
                    mode,
                    ignore_pr_feedback: template.ignore_pr_feedback,
                },
            }
        }
        _ => {
            return Err(bad_request(
                "request.invalid",
                "give exactly one of `graph` and `template`",
            ));
        }
    };
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
    let plan = match request.plan {
        None => PlanSource::Detect,
        Some(PlanChoice {
            exact: Some(plan),
            uniform: None,
        }) => PlanSource::Exact(ConfigSource::Document(plan)),
        Some(PlanChoice {
            exact: None,
            uniform: Some(plan),
        }) => PlanSource::Uniform(ConfigSource::Document(plan)),
        Some(_) => {
            return Err(bad_request(
                "request.invalid",
                "a plan is exactly one of `exact` and `uniform`",
            ));
        }
    };
    Ok(AdmitRequest {
        graph,
        input,
        plan,
        workspace: Some(workspace),
    })
}

/// Admits and starts a run.
#[utoipa::path(
    post, path = "/api/v1/runs", tag = "runs",
    request_body = SubmitRequest,
    responses(
        (status = 201, description = "a new run", body = SubmitAnswer),
        (status = 200, description = "the key already named this submission's run", body = SubmitAnswer),
        (status = 409, description = "the key names another submission", body = ProblemDoc),
        (status = 400, description = "a malformed request or source (a URL with credentials among them)", body = ProblemDoc),
        (status = 422, description = "the graph, input or plan was refused, or the source cannot be fetched", body = ProblemDoc),
    ),
)]
pub async fn submit(State(state): State<TeamState>, body: Bytes) -> Result<Response, Problem> {
    let mut request: SubmitRequest = json_body(&body)?;
    for (what, text) in [
        ("submissionKey", &request.submission_key),
        ("title", &request.title),
    ] {
        if text.as_ref().is_some_and(|text| text.len() > MAX_KEY_BYTES) {
            return Err(bad_request(
                "request.invalid",
                format!("`{what}` is longer than {MAX_KEY_BYTES} bytes"),
            ));
        }
    }
    let workspace = state
        .workspaces
        .directory(
            request.workspace.as_deref(),
            request.submission_key.as_deref(),
        )
        .map_err(|error| match error {
            super::WorkspaceError::BadName(_) => bad_request("request.invalid", error.to_string()),
            super::WorkspaceError::Create { .. } => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "runtime.io",
                error.to_string(),
            ),
        })?;
    if let Some(source) = request.source.take() {
        super::workspaces::prepare_source(&state.workspaces, &workspace, source).await?;
    }
    let options = SubmitOptions {
        submission_key: request.submission_key.clone(),
        title: request.title.clone(),
        start: state.start,
        workspace: WorkspaceOptions::default(),
        skip_preflight: request.no_preflight,
    };
    let admit = admit_request(request, workspace)?;
    let runtime = state.runtime.clone();
    let receipt = blocking(move || {
        let admitted = runtime.admit(admit)?;
        runtime.submit(admitted, options)
    })
    .await?;
    let status = if receipt.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = SubmitAnswer {
        run_id: receipt.run_id.as_str().to_owned(),
        created: receipt.created,
    };
    Ok((status, Json(answer)).into_response())
}

/// Lists runs, newest first.
#[utoipa::path(
    get, path = "/api/v1/runs", tag = "runs", params(ListQuery),
    responses((status = 200, body = RunList), (status = 400, body = ProblemDoc)),
)]
pub async fn list(
    State(state): State<TeamState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<RunList>, Problem> {
    let phase = match query.phase.as_deref() {
        None => None,
        Some("admitted") => Some(Phase::Admitted),
        Some("running") => Some(Phase::Running),
        Some("stopping") => Some(Phase::Stopping),
        Some("finished") => Some(Phase::Finished),
        Some(_) => {
            return Err(bad_request(
                "request.invalid",
                "`phase` is admitted, running, stopping or finished",
            ));
        }
    };
    let kind = match query.kind.as_deref() {
        None => None,
        Some("graphspec") => Some(RunKind::Graphspec),
        Some("gap") => Some(RunKind::Gap),
        Some(_) => return Err(bad_request("request.invalid", "`kind` is graphspec or gap")),
    };
    let after = query.after.as_deref().map(run_id).transpose()?;
    let filter = RunListFilter {
        phase,
        kind,
        after,
        title_contains: query.q,
        limit: query.limit.unwrap_or(50).clamp(1, 1000),
    };
    let runtime = state.runtime.clone();
    let runs = blocking(move || runtime.list(&filter)).await?.runs;
    Ok(Json(RunList { runs }))
}

/// One run with every execution.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}", tag = "runs",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = RunStatusDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn status(
    State(state): State<TeamState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = state.runtime.clone();
    let status = blocking(move || runtime.status(&run)).await?;
    Ok(Json(status).into_response())
}

/// The run's graph with identity, bounds and layout.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/graph", tag = "runs",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = RunGraphDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn graph(
    State(state): State<TeamState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = state.runtime.clone();
    let graph = blocking(move || runtime.run_graph(&run)).await?;
    Ok(Json(graph).into_response())
}

/// One execution in full (input, outcome, binding — never a secret value).
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/executions/{execution}", tag = "runs",
    params(
        ("run" = String, Path, description = "run id"),
        ("execution" = u64, Path, description = "execution id within the run"),
    ),
    responses((status = 200, body = ExecutionDetailDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn execution(
    State(state): State<TeamState>,
    Path((run, execution)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let execution: u64 = execution
        .parse()
        .map_err(|_| bad_request("request.invalid", "an execution id is a number"))?;
    let runtime = state.runtime.clone();
    let detail = blocking(move || runtime.execution(&run, execution)).await?;
    Ok(Json(detail).into_response())
}

/// Stops a run now: its workers are killed and it ends `failed/force_stopped`.
#[utoipa::path(
    post, path = "/api/v1/runs/{run}/force-stop", tag = "control",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = RunStatusDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn force_stop(
    State(state): State<TeamState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = state.runtime.clone();
    let status = blocking(move || runtime.force_stop(&run)).await?;
    Ok(Json(status).into_response())
}

/// Continues a failed run in a successor that reuses every settled outcome.
#[utoipa::path(
    post, path = "/api/v1/runs/{run}/resume", tag = "control",
    params(("run" = String, Path, description = "run id")),
    responses(
        (status = 201, body = SubmitAnswer),
        (status = 404, body = ProblemDoc),
        (status = 409, description = "still active, succeeded or already resumed", body = ProblemDoc),
    ),
)]
pub async fn resume(
    State(state): State<TeamState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = state.runtime.clone();
    let start = state.start;
    let receipt = blocking(move || {
        runtime.resume(
            &run,
            ResumeOptions {
                start,
                ..ResumeOptions::default()
            },
        )
    })
    .await?;
    let answer = SubmitAnswer {
        run_id: receipt.run_id.as_str().to_owned(),
        created: receipt.created,
    };
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}
