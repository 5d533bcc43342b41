//! The one run API route set (`/api/v1/…`) over `trellis_runtime::Runtime`, mounted by both
//! front ends: `trellis ui` (with the page and local access) and `trellis serve` (with bearer
//! tokens, submission and the OpenAPI document, see [`crate::team`]). JSON reads and
//! validation ([`reads`]), the two control actions ([`control`]) and the Server-Sent Events
//! streams resumable by cursor ([`events`]). The routes know nothing of who may call them: the
//! access policy is a layer [`crate::app`] puts around them. What the handlers share lives
//! below them: their state in [`state`], how they answer failures in [`problems`].

pub(crate) mod control;
pub(crate) mod events;
pub(crate) mod extract;
pub(crate) mod problems;
pub(crate) mod profiles;
pub(crate) mod reads;
pub(crate) mod state;
pub(crate) mod workspace;

use axum::Router;
use axum::routing::{get, post};

pub use problems::problem_of;
pub use state::ApiState;

/// The routes, to be nested under `/api/v1` by [`crate::app`].
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route("/runs", get(reads::list))
        .route("/runs/events", get(events::run_changes))
        .route("/runs/{run}", get(reads::status))
        .route("/runs/{run}/graph", get(reads::graph))
        .route("/runs/{run}/watch", get(events::watch))
        .route("/runs/{run}/logs", get(events::logs))
        .route("/runs/{run}/gap-bodies", get(reads::gap_bodies))
        .route("/runs/{run}/executions/{execution}", get(reads::execution))
        .route("/runs/{run}/force-stop", post(control::force_stop))
        .route("/runs/{run}/resume", post(control::resume))
        .route("/runs/{run}/requirements", get(control::requirements))
        .route("/runs/{run}/checkpoints", get(workspace::checkpoints))
        .route(
            "/runs/{run}/discard-workspace",
            post(workspace::discard_workspace),
        )
        .route("/prune", post(workspace::prune))
        .route("/validate", post(reads::validate))
        .route("/templates", get(reads::templates))
        .route("/templates/{name}", get(reads::template))
        .route("/workers", get(reads::workers))
        .route("/profiles", get(profiles::list).post(profiles::create))
        .route(
            "/profiles/{name}",
            get(profiles::show)
                .put(profiles::replace)
                .delete(profiles::delete),
        )
        .with_state(state)
}
