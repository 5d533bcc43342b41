//! Submission, the one route the team server adds to the run API: admits and starts a run,
//! idempotent on its submission key, in a workspace under the server's root.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use trellis_runtime::{
    AdmitRequest, ConfigSource, DeliveryMode, EnvironmentSpec, GraphSource, InputSource,
    PlanSource, RuntimeError, SubmitOptions, TemplateDelivery, WorkspaceOptions,
};
use utoipa::ToSchema;

use super::state::TeamState;
use super::workspaces::WorkspaceError;
pub use crate::api::control::SubmitAnswer;
use crate::api::problems::{bad_request, blocking, json_body, problem_of};
use crate::caller::{CallerValues, Requirements};
use crate::problem::Problem;
use crate::schemas::ProblemDoc;

/// The longest submission key or title a client may send.
pub const MAX_KEY_BYTES: usize = 256;

/// A run to start. Give `graph` (a GraphSpec document), `template` or `profile`; the input is `input`
/// (a JSON document) or `task` (a template's task text); `plan` binds executables (none: the
/// server detects an agent CLI on its own `PATH`). Plans name environment variables only; their
/// values are the caller's `connections` (for the variables `POST /runs/requirements`
/// reported), else the server's environment as far as its operator allows.
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
    /// A profile saved on this server (`/profiles`), instead of `graph`, `template` and
    /// `plan`: its definition is read here and admitted; `input` or `task` replace its
    /// default input.
    pub profile: Option<String>,
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
    /// The caller's values of the variables the run requires, held in memory only (handed to
    /// the run's controller in its environment; never stored, logged or answered).
    #[serde(default)]
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub connections: CallerValues,
    /// An environment file (`{"setup": [...], "startup": [...]}`, docs/environment.md): hooks
    /// the run's controller runs on this host before it dispatches anything, and again on
    /// every resume. None: the server's default environment, if it has one; an invalid one
    /// answers 422 `runtime.invalid_environment`.
    #[schema(value_type = Option<Object>)]
    pub environment: Option<Value>,
    /// Run without any environment file, the server's default included.
    #[serde(default)]
    pub no_environment: bool,
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

/// The input a request gives: a document, a task, or neither.
fn input_source(input: Option<Value>, task: Option<String>) -> Result<InputSource, Problem> {
    match (input, task) {
        (None, None) => Ok(InputSource::Default),
        (Some(document), None) => Ok(InputSource::Document(document)),
        (None, Some(task)) => Ok(InputSource::Task(task)),
        (Some(_), Some(_)) => Err(bad_request(
            "request.invalid",
            "give at most one of `input` and `task`",
        )),
    }
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
    let input = input_source(request.input, request.task)?;
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

/// The admission request of a run of the profile `name`, stored on this server.
async fn profile_request(
    state: &TeamState,
    name: String,
    request: SubmitRequest,
    workspace: std::path::PathBuf,
) -> Result<AdmitRequest, Problem> {
    if request.graph.is_some() || request.template.is_some() || request.plan.is_some() {
        return Err(bad_request(
            "request.invalid",
            "a profile brings its graph or template and its plan: give `profile` without \
             `graph`, `template` and `plan`",
        ));
    }
    let input = input_source(request.input, request.task)?;
    let runtime = state.api.runtime.clone();
    blocking(move || runtime.profile_request(&name, input, Some(workspace))).await
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
        (status = 422, description = "the graph, input, plan or environment was refused, or the source cannot be fetched", body = ProblemDoc),
    ),
)]
pub async fn submit(State(state): State<TeamState>, body: Bytes) -> Result<Response, Problem> {
    let request: SubmitRequest = json_body(&body)?;
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
        // A control character (NUL among them) cannot travel to the run's controller.
        if text
            .as_ref()
            .is_some_and(|text| text.chars().any(char::is_control))
        {
            return Err(bad_request(
                "request.invalid",
                format!("`{what}` holds a control character"),
            ));
        }
    }
    let (workspace, created) = state
        .workspaces
        .directory_created(
            request.workspace.as_deref(),
            request.submission_key.as_deref(),
        )
        .map_err(|error| match error {
            WorkspaceError::BadName(_) => bad_request("request.invalid", error.to_string()),
            WorkspaceError::Create { .. } => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "runtime.io",
                error.to_string(),
            ),
        })?;
    let receipt = match start(&state, request, workspace.clone()).await {
        Ok(receipt) => receipt,
        Err(Refused {
            problem,
            before_run,
        }) => {
            // A refused submission leaves no directory behind, unless it was there before or
            // a run may already work in it.
            if created && before_run {
                let _ = tokio::fs::remove_dir_all(&workspace).await;
            }
            return Err(problem);
        }
    };
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

/// A refused submission: its problem, and whether it was refused before any run was created.
struct Refused {
    problem: Problem,
    before_run: bool,
}

impl From<Problem> for Refused {
    fn from(problem: Problem) -> Self {
        Self {
            problem,
            before_run: true,
        }
    }
}

/// Refusals of `submit` that come before it creates the run.
const BEFORE_RUN: [&str; 6] = [
    "run.not_submittable",
    "run.preflight",
    "run.invalid",
    "connections.invalid",
    "connections.not_required",
    "connections.reserved",
];

/// The environment a submission's run prepares: its own, none when it asks for none, else the
/// server's default.
fn environment_of(
    state: &TeamState,
    request: &mut SubmitRequest,
) -> Result<Option<EnvironmentSpec>, Problem> {
    match (request.environment.take(), request.no_environment) {
        (Some(_), true) => Err(bad_request(
            "request.invalid",
            "give at most one of `environment` and `noEnvironment`",
        )),
        (None, true) => Ok(None),
        (Some(document), false) => EnvironmentSpec::from_value(document)
            .map(Some)
            .map_err(|error| problem_of(&RuntimeError::Environment(error))),
        (None, false) => Ok(state.default_environment.as_deref().cloned()),
    }
}

/// Checks out the source, admits and submits the run working in `workspace`.
async fn start(
    state: &TeamState,
    mut request: SubmitRequest,
    workspace: std::path::PathBuf,
) -> Result<trellis_runtime::Receipt, Refused> {
    // The values and the environment are checked first: a malformed one is refused before
    // any fetch.
    let connections =
        std::mem::take(&mut request.connections).connections(&state.server_connections())?;
    let environment = environment_of(state, &mut request)?;
    if let Some(source) = request.source.take() {
        super::workspaces::prepare_source(&state.workspaces, &workspace, source).await?;
    }
    let options = SubmitOptions {
        submission_key: request.submission_key.clone(),
        title: request.title.clone(),
        start: state.api.start,
        workspace: WorkspaceOptions::default(),
        skip_preflight: request.no_preflight,
        environment,
    };
    let admit = match request.profile.take() {
        Some(name) => profile_request(state, name, request, workspace).await?,
        None => admit_request(request, workspace)?,
    };
    let runtime = state.api.runtime.clone();
    let admitted = blocking(move || {
        runtime
            .admit_for(admit, connections)
            .map_err(RuntimeError::Admission)
    })
    .await?;
    let runtime = state.api.runtime.clone();
    blocking(move || runtime.submit(admitted, options))
        .await
        .map_err(|problem| Refused {
            before_run: BEFORE_RUN.contains(&problem.code),
            problem,
        })
}

/// The environment variables the run a submission describes would require: the caller reads
/// exactly these from its own environment and sends their values with `POST /runs`. Admits
/// the graph, input and plan (nothing is created, no source is fetched, no variable needs a
/// value yet).
#[utoipa::path(
    post, path = "/api/v1/runs/requirements", tag = "runs",
    request_body = SubmitRequest,
    responses(
        (status = 200, body = Requirements),
        (status = 400, description = "a malformed request", body = ProblemDoc),
        (status = 422, description = "the graph, input or plan was refused", body = ProblemDoc),
    ),
)]
pub async fn requirements(
    State(state): State<TeamState>,
    body: Bytes,
) -> Result<Response, Problem> {
    let mut request: SubmitRequest = json_body(&body)?;
    if !request.connections.is_empty() {
        return Err(bad_request(
            "request.invalid",
            "ask for requirements without `connections`: values go with the submission only",
        ));
    }
    request.source = None;
    // The environment is checked as the submission would check it.
    environment_of(&state, &mut request)?;
    // Admission only needs some directory to stand for the run's workspace.
    let workspace = state.workspaces.root().to_path_buf();
    let admit = match request.profile.take() {
        Some(name) => profile_request(&state, name, request, workspace).await?,
        None => admit_request(request, workspace)?,
    };
    let runtime = state.api.runtime.clone();
    let connections =
        blocking(move || runtime.requirements(admit).map_err(RuntimeError::Admission)).await?;
    Ok(Json(Requirements { connections }).into_response())
}
