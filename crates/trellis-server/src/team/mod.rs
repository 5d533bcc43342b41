//! The team server (`trellis serve`): the one run API of [`crate::api`] plus submission
//! ([`runs`]) and the workspaces of worker hosts without its filesystem
//! ([`remote_workspaces`]), behind bearer tokens, with the OpenAPI document of [`crate::openapi`] beside it.
//! Every other route is the same code the web UI's server mounts.

pub(crate) mod remote_workspaces;
pub(crate) mod runs;
pub(crate) mod state;
pub(crate) mod workspaces;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};

use crate::access::AccessPolicy;
use crate::api;
use crate::bearer::BearerTokens;
use crate::signin::{BrowserSignIn, TeamAccess};

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

/// Where a load balancer or container engine asks whether the server answers.
pub const HEALTH_PATH: &str = "/healthz";

/// The whole team server: the team API under `/api/v1` behind bearer-token access, and the
/// OpenAPI document at [`OPENAPI_PATH`] and the health check at [`HEALTH_PATH`] beside it
/// (merged after the policy layer, so they answer without a token: they hold no run data).
pub fn app(state: TeamState, tokens: BearerTokens) -> Router {
    with_access(
        state,
        TeamAccess {
            tokens,
            browser: None,
        },
    )
}

/// The team server that people may also use from a browser, through `browser`'s sign-in.
pub fn app_with_browser(state: TeamState, tokens: BearerTokens, browser: BrowserSignIn) -> Router {
    with_access(
        state,
        TeamAccess {
            tokens,
            browser: Some(Arc::new(browser)),
        },
    )
}

fn with_access(state: TeamState, access: TeamAccess) -> Router {
    crate::app(router(state), AccessPolicy::Team(access))
        .merge(openapi_router())
        .route(HEALTH_PATH, get(health))
}

/// `{"status": "ok", "version"}`: the server accepts connections and answers requests.
async fn health() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}
