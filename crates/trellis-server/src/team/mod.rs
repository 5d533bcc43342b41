//! The team server (`trellis serve`): the one run API of [`crate::api`] plus submission
//! ([`runs`]) and the workspaces of worker hosts without its filesystem
//! ([`remote_workspaces`]), behind bearer tokens, with the OpenAPI document of [`crate::openapi`] beside it.
//! Every other route is the same code the web UI's server mounts.

pub(crate) mod remote_workspaces;
pub(crate) mod runs;
pub(crate) mod state;
pub(crate) mod workspaces;

use axum::Router;
use axum::routing::{get, post, put};

use crate::access::AccessPolicy;
use crate::api;
use crate::bearer::BearerTokens;

pub use crate::api::problems::problem_of;
pub use crate::openapi::{OPENAPI_PATH, openapi_document, openapi_router};
pub use runs::{MAX_KEY_BYTES, PlanChoice, SubmitAnswer, SubmitRequest, TemplateChoice};
pub use state::TeamState;
pub use workspaces::{WorkspaceError, WorkspaceRoot};

/// The team API, to be nested under `/api/v1` by [`crate::app`]: the run API's routes, and
/// `POST /runs` beside its `GET`.
pub fn router(state: TeamState) -> Router {
    let submission = Router::new()
        .route("/runs", post(runs::submit))
        .route("/runs/requirements", post(runs::requirements))
        .route(
            "/runs/{run}/executions/{execution}/workspace",
            get(remote_workspaces::workspace),
        )
        .route(
            "/runs/{run}/executions/{execution}/result",
            put(remote_workspaces::result),
        )
        .with_state(state.clone());
    api::routes(state.api).merge(submission)
}

/// The whole team server: the team API under `/api/v1` behind bearer-token access, and the
/// OpenAPI document at [`OPENAPI_PATH`] beside it (merged after the policy layer, so it is
/// readable without a token: it describes the API and holds no run data).
pub fn app(state: TeamState, tokens: BearerTokens) -> Router {
    crate::app(router(state), AccessPolicy::Bearer(tokens)).merge(openapi_router())
}
