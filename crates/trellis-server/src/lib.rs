//! The HTTP face of the run API: one route set ([`api`]) serving JSON and Server-Sent Events
//! over `trellis_runtime`, mounted by both front ends behind the access policy chosen at
//! startup: `trellis ui` adds the embedded web UI and a local page token; `trellis serve` adds
//! submission, bearer tokens and the OpenAPI document ([`team`], [`openapi`]).

pub mod access;
pub mod api;
pub mod assets;
pub mod bearer;
pub mod openapi;
pub mod problem;
mod schemas;
pub mod streams;
pub mod team;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use access::{AccessPolicy, LocalPage, NotLoopback, PageToken, TOKEN_HEADER};
pub use api::{ApiState, routes};
pub use bearer::{BearerTokens, TokenError};
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

/// The app `trellis ui` serves: the API over `runtime` behind the [`LocalPage`] policy for a
/// server bound to `address` (a loopback address), with a fresh page token.
pub fn local_ui(
    runtime: Arc<trellis_runtime::Runtime>,
    address: std::net::SocketAddr,
) -> Result<Router, LocalUiError> {
    let token = PageToken::generate().map_err(|_| LocalUiError::NoEntropy)?;
    let policy = LocalPage::new(address, token)?;
    let api = routes(ApiState::new(
        runtime,
        StreamSlots::new(DEFAULT_MAX_STREAMS),
    ));
    Ok(app(api, AccessPolicy::LocalPage(policy)))
}

/// Why the local UI cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LocalUiError {
    #[error(transparent)]
    NotLoopback(#[from] NotLoopback),
    #[error("the operating system gave no randomness for the page token")]
    NoEntropy,
}

/// Serves `app` on `listener` until `shutdown` completes. Open event streams do not hold the
/// end back: they are cut, and a browser reconnects (resuming by cursor) to the next server.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::select! {
        served = axum::serve(listener, app) => served,
        () = shutdown => Ok(()),
    }
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
