//! The HTTP face of the run API: one route set ([`api`]) serving JSON and Server-Sent Events
//! over `trellis_runtime`, mounted by both front ends behind the access policy chosen at
//! startup: `trellis ui` adds the embedded web UI and a per-launch session ([`session`]);
//! `trellis serve` adds submission, bearer tokens and the OpenAPI document ([`team`],
//! [`openapi`]). Both are served by [`listen`], with timeouts and a connection cap.

pub mod access;
pub mod api;
pub mod assets;
pub mod bearer;
pub mod caller;
pub mod listen;
pub mod local_runs;
pub mod openapi;
pub mod problem;
mod schemas;
pub mod secret;
pub mod session;
pub mod streams;
pub mod team;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use access::{AccessPolicy, LocalPage, NotLoopback, TOKEN_HEADER};
pub use api::{ApiState, routes};
pub use bearer::{BearerTokens, TokenError};
pub use listen::body::MAX_BODY_BYTES;
pub use listen::{Limits, TlsConfig, TlsError, serve_with};
pub use problem::Problem;
pub use secret::PageToken;
pub use session::LaunchSecrets;
pub use streams::{DEFAULT_MAX_STREAMS, StreamSlot, StreamSlots};

/// The whole application: `api` under `/api/v1`, the page and its assets, all behind `policy`.
pub fn app(api: Router, policy: AccessPolicy) -> Router {
    let policy = Arc::new(policy);
    let page = Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/assets/{*path}", get(asset))
        .route("/favicon.ico", get(favicon))
        .route("/launch/{secret}", get(launch))
        .with_state(Arc::clone(&policy));
    // Layers run outside in: the policy first, then the body is read (within its limits).
    Router::new()
        .nest("/api/v1", api.fallback(unknown_api_route))
        .merge(page)
        .fallback(unknown_path)
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn(listen::body::read_body))
        .layer(middleware::from_fn_with_state(policy, access::enforce))
}

/// The app `trellis ui` serves: the API over `runtime` behind the [`LocalPage`] policy for a
/// server bound to `address` (a loopback address), with fresh launch secrets; and the path of
/// its one-time launch link (`/launch/SECRET`, for its user only).
pub fn local_ui(
    runtime: Arc<trellis_runtime::Runtime>,
    address: std::net::SocketAddr,
) -> Result<(Router, String), LocalUiError> {
    let secrets = LaunchSecrets::generate().map_err(|_| LocalUiError::NoEntropy)?;
    let policy = LocalPage::new(address, secrets)?;
    let launch_path = policy.launch_path().to_owned();
    let state = ApiState::new(runtime, StreamSlots::new(DEFAULT_MAX_STREAMS));
    // The page's profile editor starts runs of saved profiles (`POST /runs`).
    let api = routes(state.clone()).merge(local_runs::routes(state));
    Ok((app(api, AccessPolicy::LocalPage(policy)), launch_path))
}

/// Why the local UI cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LocalUiError {
    #[error(transparent)]
    NotLoopback(#[from] NotLoopback),
    #[error("the operating system gave no randomness for the page token")]
    NoEntropy,
}

/// Serves `app` on `listener` with the default [`Limits`] until `shutdown` completes. Open
/// event streams do not hold the end back: they are cut, and a browser reconnects (resuming
/// by cursor) to the next server.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, app, Limits::default(), None, shutdown).await
}

async fn index(State(policy): State<Arc<AccessPolicy>>) -> Response {
    assets::index_page(policy.page_token())
}

async fn launch(State(policy): State<Arc<AccessPolicy>>, Path(secret): Path<String>) -> Response {
    match policy.as_ref() {
        AccessPolicy::LocalPage(local) => local.launch(&secret),
        AccessPolicy::Bearer(_) => Problem::not_found("such page").into_response(),
    }
}

async fn asset(Path(path): Path<String>) -> Response {
    assets::asset(&format!("assets/{path}"))
        .unwrap_or_else(|| Problem::not_found("such asset").into_response())
}

/// The tab icon: browsers ask for `/favicon.ico` whatever the page names, so it is served
/// (as the bundle's SVG) rather than answered 404.
async fn favicon() -> Response {
    assets::asset("favicon.svg").unwrap_or_else(|| Problem::not_found("such asset").into_response())
}

async fn unknown_api_route() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "not_found", "no such API route")
}

async fn unknown_path() -> Problem {
    Problem::not_found("such page")
}
