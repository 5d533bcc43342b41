//! The JSON routes: runs (list, status, graph, GaP bodies, one execution), validation of a pasted
//! document, and the template gallery.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_runtime::{
    GraphSource, Phase, RunKind, RunListFilter, RunSummary, SkippedRun, TerminalResult,
    ValidateRequest,
};
use utoipa::{IntoParams, ToSchema};

use super::extract::{Path, Query};
use super::problems::{admission_problem, bad_request, blocking, internal, json_body, run_id};
use super::state::ApiState;
use crate::problem::Problem;
use crate::schemas::{
    ExecutionDetailDoc, GapBodyDoc, ProblemDoc, RunGraphDoc, RunStatusDoc, RunSummaryDoc,
    SkippedRunDoc,
};

/// Runs a list answers by default, and at most.
const DEFAULT_LIST_LIMIT: usize = 100;
const MAX_LIST_LIMIT: usize = 1000;

/// Which runs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `admitted`, `running`, `stopping`, `finished`, or a finished run's outcome:
    /// `succeeded`, `failed` or `force_stopped` (`all` or none: every run).
    pub status: Option<String>,
    /// The same words as `status` (an older name); give one of the two.
    pub phase: Option<String>,
    /// `graphspec` or `gap`.
    pub kind: Option<String>,
    /// Only titles containing this text (case-insensitive).
    pub q: Option<String>,
    /// At most this many runs (default 100, at most 1,000).
    pub limit: Option<usize>,
    /// Keyset paging: runs listed after this run id.
    pub after: Option<String>,
}

/// A page of runs, newest first, and the runs left out because their rows are damaged (so a
/// client can say so instead of silently showing fewer runs).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    #[schema(value_type = Vec<RunSummaryDoc>)]
    pub runs: Vec<RunSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<SkippedRunDoc>)]
    pub skipped: Vec<SkippedRun>,
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
                return Err(bad_request(
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

/// Lists runs, newest first.
#[utoipa::path(
    get, path = "/api/v1/runs", tag = "runs", params(ListQuery),
    responses((status = 200, body = RunList), (status = 400, body = ProblemDoc)),
)]
pub async fn list(
    State(state): State<ApiState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<RunList>, Problem> {
    let word = match (query.status, query.phase) {
        (Some(_), Some(_)) => {
            return Err(bad_request(
                "query.status",
                "give `status` or `phase`, not both",
            ));
        }
        (status, phase) => status.or(phase),
    };
    let status = StatusFilter::parse(word.as_deref())?;
    let kind = match query.kind.as_deref() {
        None | Some("") => None,
        Some("graphspec") => Some(RunKind::Graphspec),
        Some("gap") => Some(RunKind::Gap),
        Some(_) => return Err(bad_request("query.kind", "`kind` is graphspec or gap")),
    };
    let after = query.after.as_deref().map(run_id).transpose()?;
    let filter = RunListFilter {
        phase: status.map(StatusFilter::phase),
        kind,
        after,
        title_contains: query.q.filter(|text| !text.is_empty()),
        limit: query
            .limit
            .unwrap_or(DEFAULT_LIST_LIMIT)
            .clamp(1, MAX_LIST_LIMIT),
    };
    let runtime = Arc::clone(&state.runtime);
    let listing = blocking(move || runtime.list(&filter)).await?;
    let mut runs = listing.runs;
    if let Some(status) = status {
        runs.retain(|run| status.admits(run));
    }
    Ok(Json(RunList {
        runs,
        skipped: listing.skipped,
    }))
}

/// One run with every execution.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}", tag = "runs",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = RunStatusDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn status(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.status(&run)).await?).into_response())
}

/// The run's graph with identity, bounds and layout.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/graph", tag = "runs",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = RunGraphDoc), (status = 404, body = ProblemDoc)),
)]
pub async fn graph(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.run_graph(&run)).await?).into_response())
}

/// A GaP run's node bodies, visit by visit, as the ledger recorded them (empty for GraphSpec).
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/gap-bodies", tag = "runs",
    params(("run" = String, Path, description = "run id")),
    responses((status = 200, body = Vec<GapBodyDoc>), (status = 404, body = ProblemDoc)),
)]
pub async fn gap_bodies(
    State(state): State<ApiState>,
    Path(run): Path<String>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.gap_bodies(&run)).await?).into_response())
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
    State(state): State<ApiState>,
    Path((run, execution)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let execution: u64 = execution.parse().map_err(|_| {
        bad_request(
            "run.unknown_execution",
            "an execution is named by its number within the run",
        )
    })?;
    let runtime = Arc::clone(&state.runtime);
    Ok(Json(blocking(move || runtime.execution(&run, execution)).await?).into_response())
}

/// A document to check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateBody {
    /// A GraphSpec or GaP document.
    #[schema(value_type = Object)]
    document: Value,
    /// `graphspec` or `gap`; found from the document when absent.
    #[serde(default)]
    kind: Option<String>,
}

/// Checks a document as admission would, without starting anything: the verdict and every
/// diagnostic with the nodes it names.
#[utoipa::path(
    post, path = "/api/v1/validate", tag = "documents",
    request_body = ValidateBody,
    responses(
        (status = 200, description = "the validation report", body = Object),
        (status = 400, body = ProblemDoc),
    ),
)]
pub async fn validate(State(state): State<ApiState>, body: Bytes) -> Result<Response, Problem> {
    let body: ValidateBody = json_body(&body)?;
    match body.kind.as_deref() {
        None | Some("graphspec" | "gap") => {}
        Some(other) => {
            return Err(bad_request(
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

/// The built-in templates.
#[utoipa::path(
    get, path = "/api/v1/templates", tag = "documents",
    responses((status = 200, description = "every built-in template", body = Vec<Object>)),
)]
pub async fn templates() -> Response {
    Json(trellis_runtime::templates()).into_response()
}

/// The built-in worker registry (an editor's worker picker); `command.<name>@N` references,
/// bound to commands by a plan, are open-ended and not listed.
#[utoipa::path(
    get, path = "/api/v1/workers", tag = "documents",
    responses((status = 200, description = "every built-in worker: `[{\"worker\", \"kind\": \"agent\" | \"delivery\"}]`", body = Vec<Object>)),
)]
pub async fn workers() -> Response {
    Json(trellis_runtime::builtin_workers()).into_response()
}

/// One built-in template with its graph document.
#[utoipa::path(
    get, path = "/api/v1/templates/{name}", tag = "documents",
    params(("name" = String, Path, description = "template name")),
    responses(
        (status = 200, description = "the template and its `graph`", body = Object),
        (status = 404, body = ProblemDoc),
    ),
)]
pub async fn template(Path(name): Path<String>) -> Result<Response, Problem> {
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
