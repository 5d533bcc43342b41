//! The HTTP face of the run API: one axum router serving JSON and Server-Sent Events over
//! `trellis_runtime`, the embedded web UI, and the access policy chosen at startup (a local page
//! for `trellis ui`; other policies for `trellis serve`).

pub mod access;
pub mod assets;
pub mod problem;
pub mod streams;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use access::{AccessPolicy, LocalPage, NotLoopback, PageToken, TOKEN_HEADER};
pub use problem::Problem;
pub use streams::{DEFAULT_MAX_STREAMS, StreamSlot, StreamSlots};

/// The largest request body accepted: a graph document at its parse limit plus its envelope.
pub const MAX_BODY_BYTES: usize = trellis_graph::limits::MAX_DOCUMENT_BYTES + 64 * 1024;

/// The whole application: `api` under `/api/v1`, the page and its assets, all behind `policy`.
pub fn app(api: Router, policy: AccessPolicy) -> Router {
    let policy = Arc::new(policy);
    let page = Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/assets/{*path}", get(asset))
        .with_state(Arc::clone(&policy));
    Router::new()
        .nest("/api/v1", api.fallback(unknown_api_route))
        .merge(page)
        .fallback(unknown_path)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(policy, access::enforce))
}

async fn index(State(policy): State<Arc<AccessPolicy>>) -> Response {
    assets::index_page(policy.page_token())
}

async fn asset(Path(path): Path<String>) -> Response {
    assets::asset(&format!("assets/{path}"))
        .unwrap_or_else(|| Problem::not_found("such asset").into_response())
}

async fn unknown_api_route() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not_found", "no such API route")
}

async fn unknown_path() -> Problem {
    Problem::not_found("such page")
}
