//! What the team-API tests share: a team server on a real runtime (runs driven in-process, a
//! SQLite ledger in a temporary home) and one request sent to it with a bearer token.
// Each test file uses part of this.
#![allow(dead_code)]

pub mod browser;

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;
use trellis_runtime::{Runtime, RuntimeOptions, StartMode};
use trellis_server::BearerTokens;
use trellis_server::team::{self, TeamState};

/// The team API over a runtime whose state and ledger live in `home`, accepting `token`.
pub fn team_app(home: &Path, token: &str) -> Router {
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(home.join("state")),
        ledger: Some(trellis_runtime::LedgerLocation::Sqlite(
            home.join("ledger.sqlite3"),
        )),
        controller_program: None,
    })
    .expect("runtime");
    let state = TeamState::new(
        Arc::new(runtime),
        home.join("workspaces"),
        StartMode::InProcess,
        2,
    )
    .expect("state");
    let mut tokens = BearerTokens::new();
    tokens.add_secret("tests", token).expect("token");
    team::app(state, tokens)
}

/// A team API in a temporary home of its own (kept as long as this is).
pub struct TeamServer {
    pub app: Router,
    pub home: tempfile::TempDir,
}

impl TeamServer {
    pub fn new(token: &str) -> Self {
        let home = tempfile::tempdir().expect("temp dir");
        Self {
            app: team_app(home.path(), token),
            home,
        }
    }
}

/// `method path` with `token` as its bearer and, when given, a JSON `body`.
pub fn request(method: &str, path: &str, token: &str, body: Option<String>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    builder
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request")
}

/// What an answer was: its status, headers and text.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

/// Sends `request` to `app` and reads the whole answer.
pub async fn exchange(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        headers,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}
