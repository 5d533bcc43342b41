//! A team server with the browser sign-in on, as the sign-in tests meet it: requests sent the
//! way a browser sends them (Host, Origin, Sec-Fetch-Site, the session cookie, the page token),
//! every answer kept to look for the token in.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use trellis_runtime::{Runtime, RuntimeOptions, StartMode};
use trellis_server::BearerTokens;
use trellis_server::TOKEN_HEADER;
use trellis_server::signin::{BrowserSignIn, PublicOrigin, SessionTimes, SignInLimit};
use trellis_server::team::{self, TeamState};

use super::{Answer, exchange};

pub const TOKEN: &str = "trellis_canary_7d1f0c9a5be24e68";
pub const ORIGIN: &str = "http://127.0.0.1:8420";
pub const HOST: &str = "127.0.0.1:8420";

pub struct Browser {
    pub app: Router,
    _home: tempfile::TempDir,
    /// Every answer seen, to look for the token in.
    pub seen: Vec<String>,
}

pub fn server_with(origin: &str, times: SessionTimes, embed: &[&str]) -> Browser {
    server_limited(origin, times, embed, SignInLimit::default())
}

/// The same, allowing `limit`'s failed sign-ins per client address.
pub fn server_limited(
    origin: &str,
    times: SessionTimes,
    embed: &[&str],
    limit: SignInLimit,
) -> Browser {
    let home = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(home.path().join("state")),
        ledger: Some(trellis_runtime::LedgerLocation::Sqlite(
            home.path().join("ledger.sqlite3"),
        )),
        controller_program: None,
    })
    .expect("runtime");
    let state = TeamState::new(
        Arc::new(runtime),
        home.path().join("workspaces"),
        StartMode::InProcess,
        2,
    )
    .expect("state");
    let mut tokens = BearerTokens::new();
    tokens.add_secret("alice", TOKEN).expect("token");
    let origins = embed
        .iter()
        .map(|origin| PublicOrigin::parse(origin).expect("origin"))
        .collect();
    let browser = BrowserSignIn::new(PublicOrigin::parse(origin).expect("origin"), times)
        .with_embed_origins(origins)
        .with_sign_in_limit(limit);
    Browser {
        app: team::app_with_browser(state, tokens, browser),
        _home: home,
        seen: Vec::new(),
    }
}

pub fn server() -> Browser {
    server_with(ORIGIN, SessionTimes::default(), &[])
}

impl Browser {
    pub async fn send(&mut self, request: Request<Body>) -> Answer {
        let answer = exchange(&self.app, request).await;
        self.seen
            .push(format!("{:?}\n{}", answer.headers, answer.text));
        answer
    }

    /// Signs in with `token` from the sign-in page: the answer.
    pub async fn sign_in(&mut self, token: &str) -> Answer {
        self.post_form(&format!("token={token}"), None).await
    }

    /// Posts the sign-in form `form` (URL-encoded), over a connection from `peer` when given
    /// (as the listener marks every request), else from an unknown address.
    pub async fn post_form(&mut self, form: &str, peer: Option<SocketAddr>) -> Answer {
        let mut request = Request::builder()
            .method("POST")
            .uri("/signin")
            .header(header::HOST, HOST)
            .header(header::ORIGIN, ORIGIN)
            .header("sec-fetch-site", "same-origin")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::CONTENT_LENGTH, form.len())
            .body(Body::from(form.to_owned()))
            .expect("request");
        if let Some(peer) = peer {
            request.extensions_mut().insert(ConnectInfo(peer));
        }
        self.send(request).await
    }

    /// Signs in and returns the `name=value` of the session cookie.
    pub async fn session(&mut self) -> String {
        let answer = self.sign_in(TOKEN).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        set_cookie(&answer)
            .split(';')
            .next()
            .expect("pair")
            .to_owned()
    }

    /// The page token written into `/` for the session `cookie`.
    pub async fn page_token(&mut self, cookie: &str) -> String {
        let answer = self
            .send(get("/", cookie).body(Body::empty()).expect("request"))
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        meta(&answer.text, "trellis-token").expect("a page token")
    }

    /// No answer so far carried the token.
    pub fn assert_token_never_shown(&self) {
        for seen in &self.seen {
            assert!(!seen.contains(TOKEN), "the token leaked into: {seen}");
        }
    }
}

pub fn set_cookie(answer: &Answer) -> String {
    answer
        .headers
        .get(header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .expect("a Set-Cookie header")
        .to_owned()
}

pub fn meta(page: &str, name: &str) -> Option<String> {
    let needle = format!(r#"<meta name="{name}" content=""#);
    let start = page.find(&needle)? + needle.len();
    let end = start + page[start..].find('"')?;
    Some(page[start..end].to_owned()).filter(|value| !value.is_empty())
}

/// A same-origin GET from a signed-in browser.
pub fn get(path: &str, cookie: &str) -> axum::http::request::Builder {
    Request::builder()
        .uri(path)
        .header(header::HOST, HOST)
        .header("sec-fetch-site", "same-origin")
        .header(header::COOKIE, cookie)
}

/// A same-origin JSON POST from a signed-in browser carrying `page_token`.
pub fn change(path: &str, cookie: &str, page_token: &str) -> axum::http::request::Builder {
    Request::builder()
        .method("POST")
        .uri(path)
        .header(header::HOST, HOST)
        .header(header::ORIGIN, ORIGIN)
        .header("sec-fetch-site", "same-origin")
        .header(header::COOKIE, cookie)
        .header(header::CONTENT_TYPE, "application/json")
        .header(TOKEN_HEADER, page_token)
}

pub fn code(answer: &Answer) -> String {
    serde_json::from_str::<serde_json::Value>(&answer.text)
        .ok()
        .and_then(|body| body["code"].as_str().map(str::to_owned))
        .unwrap_or_default()
}
