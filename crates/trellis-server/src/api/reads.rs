//! The JSON routes: runs (list, status, graph, one execution), the two control actions
//! (force-stop, resume), validation of a pasted document, and the template gallery.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use trellis_runtime::{
    GraphSource, Phase, ResumeOptions, RunListFilter, RunSummary, StartMode, TerminalResult,
    ValidateRequest,
};

use super::{ApiState, admission_problem, blocking, internal, run_id};
use crate::problem::Problem;

/// Runs a list answers by default, and at most.
const DEFAULT_LIST_LIMIT: usize = 100;
const MAX_LIST_LIMIT: usize = 1000;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    status: Option<String>,
    q: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
}

/// A status filter word: a phase, or a finished run's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusFilter {
    Phase(Phase),
    Succeeded,
    Failed,
    ForceStopped,
}

impl StatusFilter {
    fn parse(word: Option<&str>) -> Result<Option<Self>, Problem> {
        Ok(Some(match word {
            None | Some("" | "all") => return Ok(None),
            Some("admitted") => Self::Phase(Phase::Admitted),
            Some("running") => Self::Phase(Phase::Running),
            Some("stopping") => Self::Phase(Phase::Stopping),
            Some("finished") => Self::Phase(Phase::Finished),
            Some("succeeded") => Self::Succeeded,
            Some("failed") => Self::Failed,
            Some("force_stopped") => Self::ForceStopped,
            Some(other) => {
                return Err(Problem::new(
                    StatusCode::BAD_REQUEST,
                    "query.status",
                    format!(
                        "unknown status filter {other:?}: admitted, running, stopping, finished, \
                         succeeded, failed or force_stopped"
                    ),
                ));
            }
        }))
    }

    fn phase(self) -> Phase {
        match self {
            Self::Phase(phase) => phase,
            Self::Succeeded | Self::Failed | Self::ForceStopped => Phase::Finished,
        }
    }

    fn admits(self, run: &RunSummary) -> bool {
        let terminal = run.terminal();
        match self {
            Self::Phase(_) => true,
            Self::Succeeded => matches!(terminal, Some(TerminalResult::Succeeded { .. })),
            Self::Failed => matches!(terminal, Some(TerminalResult::Failed { .. })),
            Self::ForceStopped => matches!(
                terminal,
                Some(TerminalResult::Failed { reason }) if reason.as_str() == "force_stopped"
            ),
        }
    }
}

pub(super) async fn list_runs(
    State(state): State<ApiState>,
    Query(query): Query<ListQuery>,
) -> Result<Response, Problem> {
    let status = StatusFilter::parse(query.status.as_deref())?;
    let after = query.after.as_deref().map(run_id).transpose()?;
    let filter = RunListFilter {
        phase: status.map(StatusFilter::phase),
        after,
        title_contains: query.q.filter(|text| !text.is_empty()),
        limit: query
            .limit
            .unwrap_or(DEFAULT_LIST_LIMIT)
            .clamp(1, MAX_LIST_LIMIT),
        ..RunListFilter::default()
    };
    let runtime = Arc::clone(&state.runtime);
    let mut runs = blocking(move || runtime.list(&filter)).await?.runs;
    if let Some(status) = status {
        runs.retain(|run| status.admits(run));
    }
    Ok(Json(json!({ "runs": runs })).into_response())
}

pub(super) async fn run_status(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.status(&run)).await?).into_response())
}

pub(super) async fn run_graph(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.run_graph(&run)).await?).into_response())
}

pub(super) async fn execution(
    State(state): State<ApiState>,
    Path((run, execution)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let execution: u64 = execution.parse().map_err(|_| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "run.unknown_execution",
            "an execution is named by its number within the run",
        )
    })?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.execution(&run, execution)).await?).into_response())
}

/// The body of a control action: an empty JSON object (the route names the run).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoOptions {}

pub(super) async fn force_stop(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Json(NoOptions {}): Json<NoOptions>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.force_stop(&run)).await?).into_response())
}

pub(super) async fn resume(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Json(NoOptions {}): Json<NoOptions>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    let options = ResumeOptions {
        start: StartMode::Detached,
        ..ResumeOptions::default()
    };
    let receipt = blocking(move || runtime.resume(&run, options)).await?;
    Ok(Json(json!({ "runId": receipt.run_id, "created": receipt.created })).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ValidateBody {
    document: Value,
    /// `graphspec` or `gap`; found from the document when absent.
    #[serde(default)]
    kind: Option<String>,
}

pub(super) async fn validate(
    State(state): State<ApiState>,
    Json(body): Json<ValidateBody>,
) -> Result<Response, Problem> {
    match body.kind.as_deref() {
        None | Some("graphspec" | "gap") => {}
        Some(other) => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "validate.kind",
                format!("unknown document kind {other:?}: graphspec or gap"),
            ));
        }
    }
    let runtime = Arc::clone(&state.runtime);
    let request = ValidateRequest::new(GraphSource::Document(body.document));
    let report = tokio::task::spawn_blocking(move || runtime.validate(request))
        .await
        .map_err(|_| internal("validation failed to run"))?
        .map_err(admission_problem)?;
    Ok(Json(report.to_json()).into_response())
}

pub(super) async fn templates() -> Response {
    Json(trellis_runtime::templates()).into_response()
}

pub(super) async fn template(Path(name): Path<String>) -> Result<Response, Problem> {
    let template = trellis_runtime::template(&name).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "admission.unknown_template",
            format!("no built-in template is named {name:?}"),
        )
    })?;
    let graph = template
        .document(false)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .ok_or_else(|| internal("the template's document does not read"))?;
    let mut answer = serde_json::to_value(template).map_err(|_| internal("template"))?;
    answer["graph"] = graph;
    Ok(Json(answer).into_response())
}
