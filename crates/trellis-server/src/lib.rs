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
pub mod signin;
pub mod streams;
pub mod team;

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use access::{AccessPolicy, Caller, LocalPage, NotLoopback, TOKEN_HEADER};
pub use api::{ApiState, routes};
pub use bearer::{BearerTokens, TokenError};
pub use listen::body::MAX_BODY_BYTES;
pub use listen::{Limits, TlsConfig, TlsError, serve_with};
pub use problem::Problem;
pub use secret::PageToken;
pub use session::LaunchSecrets;
use signin::TeamAccess;
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
        .route("/embed.html", get(embed))
        .route("/signin", get(signin_page).post(sign_in))
        .route("/signin/link", post(signin_link))
        .route("/signout", post(sign_out))
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
/// server bound to `address` (a loopback address), with fresh launch secrets, whose run view
/// pages at `embed_origins` may frame; and the path of its one-time launch link
/// (`/launch/SECRET`, for its user only).
pub fn local_ui(
    runtime: Arc<trellis_runtime::Runtime>,
    address: std::net::SocketAddr,
    embed_origins: Vec<signin::PublicOrigin>,
) -> Result<(Router, String), LocalUiError> {
    let secrets = LaunchSecrets::generate().map_err(|_| LocalUiError::NoEntropy)?;
    let policy = LocalPage::new(address, secrets)?.with_embed_origins(embed_origins);
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

/// What a page served to this request carries: its page token and, for a team server's
/// browser session, who is signed in.
fn page_identity<'a>(
    policy: &'a AccessPolicy,
    caller: Option<&'a Caller>,
) -> (Option<&'a PageToken>, Option<&'a str>) {
    match (policy, caller) {
        (AccessPolicy::LocalPage(local), _) => (Some(local.token()), None),
        (AccessPolicy::Team(_), Some(Caller::Session(session))) => {
            (Some(&session.page_token), Some(session.identity.as_str()))
        }
        (AccessPolicy::Team(_), _) => (None, None),
    }
}

async fn index(
    State(policy): State<Arc<AccessPolicy>>,
    caller: Option<Extension<Caller>>,
) -> Response {
    let (token, identity) = page_identity(&policy, caller.as_ref().map(|c| &c.0));
    assets::index_page(token, identity)
}

/// The run view alone, for a frame in another page (see `docs/embedding.md`).
async fn embed(
    State(policy): State<Arc<AccessPolicy>>,
    caller: Option<Extension<Caller>>,
) -> Response {
    let (token, identity) = page_identity(&policy, caller.as_ref().map(|c| &c.0));
    assets::embed_page(token, identity, &policy.embed_origins())
}

async fn launch(State(policy): State<Arc<AccessPolicy>>, Path(secret): Path<String>) -> Response {
    match policy.as_ref() {
        AccessPolicy::LocalPage(local) => local.launch(&secret),
        AccessPolicy::Team(TeamAccess {
            browser: Some(browser),
            ..
        }) => signin::pages::launch(browser, &secret),
        AccessPolicy::Team(_) => Problem::not_found("such page").into_response(),
    }
}

/// The team server's browser sign-in, if it has one.
fn browser_of(policy: &AccessPolicy) -> Option<(&signin::BrowserSignIn, &BearerTokens)> {
    match policy {
        AccessPolicy::Team(TeamAccess {
            browser: Some(browser),
            tokens,
        }) => Some((browser.as_ref(), tokens)),
        _ => None,
    }
}

/// `GET /signin?next=PATH`: the form, bringing the browser back to `PATH` (a page of this
/// server: the web UI sends its route when its session ended).
async fn signin_page(
    State(policy): State<Arc<AccessPolicy>>,
    RawQuery(query): RawQuery,
) -> Response {
    match browser_of(&policy) {
        Some(_) => {
            let next = signin::pages::next_of_query(query.as_deref());
            signin::pages::signin_page(StatusCode::OK, None, next.as_deref())
        }
        None => Problem::not_found("such page").into_response(),
    }
}

async fn sign_in(
    State(policy): State<Arc<AccessPolicy>>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Failed sign-ins are counted per address of the connection (a proxy in front counts as
    // one client).
    let client = signin::ClientKey::of(peer.map(|Extension(ConnectInfo(address))| address.ip()));
    match browser_of(&policy) {
        Some((browser, tokens)) => signin::pages::sign_in(browser, tokens, client, &headers, &body),
        None => Problem::not_found("such page").into_response(),
    }
}

async fn sign_out(State(policy): State<Arc<AccessPolicy>>, headers: HeaderMap) -> Response {
    match browser_of(&policy) {
        Some((browser, _)) => signin::pages::sign_out(browser, &headers),
        None => Problem::not_found("such page").into_response(),
    }
}

/// `POST /signin/link`: for a bearer client only (a browser session may not mint sessions).
async fn signin_link(
    State(policy): State<Arc<AccessPolicy>>,
    caller: Option<Extension<Caller>>,
) -> Response {
    match (browser_of(&policy), caller) {
        (Some((browser, _)), Some(Extension(Caller::Bearer(name)))) => {
            signin::pages::new_link(browser, &name)
        }
        (Some(_), _) => Problem::new(
            StatusCode::FORBIDDEN,
            "bearer_required",
            "sign-in links are made for clients with a bearer token",
        )
        .into_response(),
        (None, _) => Problem::new(
            StatusCode::NOT_FOUND,
            "no_browser_signin",
            "this server serves no browser sign-in (start it with --public-origin URL)",
        )
        .into_response(),
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
