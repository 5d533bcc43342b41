//! The team server (`trellis serve`): the one run API of [`crate::api`] plus submission
//! ([`runs`]), behind bearer tokens, with the OpenAPI document of [`crate::openapi`] beside it.
//! Every other route is the same code the web UI's server mounts.

pub(crate) mod runs;
pub(crate) mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use trellis_runtime::{Runtime, StartMode};

use crate::access::AccessPolicy;
use crate::api::{self, ApiState};
use crate::bearer::BearerTokens;
use crate::streams::StreamSlots;

pub use crate::api::problem_of;
pub use crate::openapi::{OPENAPI_PATH, openapi_document, openapi_router};
pub use runs::{MAX_KEY_BYTES, PlanChoice, SubmitAnswer, SubmitRequest, TemplateChoice};
pub use workspaces::{WorkspaceError, WorkspaceRoot};

/// What the team routes share: the run API's state and where submitted runs work.
#[derive(Clone)]
pub struct TeamState {
    api: ApiState,
    workspaces: Arc<WorkspaceRoot>,
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
            api: ApiState::new(runtime, StreamSlots::new(max_streams)).with_start(start),
            workspaces: Arc::new(WorkspaceRoot::open(workspaces)?),
        })
    }
}

/// The team API, to be nested under `/api/v1` by [`crate::app`]: the run API's routes, and
/// `POST /runs` beside its `GET`.
pub fn router(state: TeamState) -> Router {
    let submission = Router::new()
        .route("/runs", post(runs::submit))
        .with_state(state.clone());
    api::routes(state.api).merge(submission)
}

/// The whole team server: the team API under `/api/v1` behind bearer-token access, and the
/// OpenAPI document at [`OPENAPI_PATH`] beside it (merged after the policy layer, so it is
/// readable without a token: it describes the API and holds no run data).
pub fn app(state: TeamState, tokens: BearerTokens) -> Router {
    crate::app(router(state), AccessPolicy::Bearer(tokens)).merge(openapi_router())
}
