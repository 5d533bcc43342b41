//! Who may talk to the server, chosen once at startup and checked on every request.
//!
//! `trellis ui` uses [`AccessPolicy::LocalPage`]: the server listens on loopback only, answers
//! only requests addressed to its own loopback host names (a DNS-rebinding page is turned away
//! by its `Host`), refuses requests that a browser marks as coming from another site (`Origin`,
//! `Sec-Fetch-Site`), serves run data and the page only to the browser session that used the
//! launch link (see [`crate::session`]: other local accounts get nothing), and accepts a state
//! change only as a JSON POST that carries the per-launch token it wrote into that page.
//! `trellis serve` uses [`AccessPolicy::Bearer`]: every request carries `Authorization: Bearer
//! TOKEN` naming one of the tokens the server was started with (see [`crate::bearer`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::bearer::BearerTokens;
use crate::listen::body::closing;
use crate::listen::connections::Connection;
use crate::problem::Problem;
use crate::secret::PageToken;
use crate::session::{LAUNCH_PREFIX, LaunchSecrets, Session, no_session_page};

/// The header a page sends its token in.
pub const TOKEN_HEADER: &str = "x-trellis-token";

/// The access rules of one server process.
#[derive(Debug, Clone)]
pub enum AccessPolicy {
    /// A browser page on this machine: loopback, same origin, token on state changes.
    LocalPage(LocalPage),
    /// A team server: any host, every request authenticated by a bearer token.
    Bearer(BearerTokens),
}

/// The host names a loopback server answers to, its session and the page token.
#[derive(Debug, Clone)]
pub struct LocalPage {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: PageToken,
    launch_path: String,
    session: Arc<Session>,
}

/// Why a listen address is refused for a local page server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a loopback address; `trellis ui` listens on loopback only")]
pub struct NotLoopback(pub SocketAddr);

impl LocalPage {
    /// The policy for a server bound to `address`, which must be a loopback address.
    pub fn new(address: SocketAddr, secrets: LaunchSecrets) -> Result<Self, NotLoopback> {
        if !address.ip().is_loopback() {
            return Err(NotLoopback(address));
        }
        let port = address.port();
        let mut hosts = vec![format!("localhost:{port}")];
        hosts.push(match address {
            SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
            SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
        });
        let origins = hosts.iter().map(|host| format!("http://{host}")).collect();
        Ok(Self {
            hosts,
            origins,
            token: secrets.page,
            launch_path: format!("{LAUNCH_PREFIX}{}", secrets.launch.as_str()),
            session: Arc::new(Session::new(port, secrets.session, secrets.launch)),
        })
    }

    pub fn token(&self) -> &PageToken {
        &self.token
    }

    /// The path of the one-time launch link (`/launch/SECRET`): never log it.
    pub fn launch_path(&self) -> &str {
        &self.launch_path
    }

    /// The name of the session cookie the launch link sets.
    pub fn cookie_name(&self) -> &str {
        self.session.cookie_name()
    }

    /// The answer to `GET /launch/{offered}`.
    pub(crate) fn launch(&self, offered: &str) -> Response {
        self.session.launch(offered)
    }

    /// The first problem with a request, if any, as the refusal that answers it; else whether
    /// it came from the session (`false` for the launch link, whose handler checks its secret,
    /// and for assets fetched without the cookie).
    fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<bool, Refusal> {
        self.check_host(headers).map_err(Refusal::Plain)?;
        // The launch link is opened from outside (a file, a terminal): no site checks, its
        // handler checks the one-time secret.
        if method == Method::GET && path.starts_with(LAUNCH_PREFIX) {
            return Ok(false);
        }
        self.check_site(headers).map_err(Refusal::Plain)?;
        // The bundle's scripts and styles are the same for everyone and hold no data.
        if (method == Method::GET || method == Method::HEAD)
            && (path.starts_with("/assets/") || path == "/favicon.ico")
        {
            return Ok(self.session.admits(headers));
        }
        if !self.session.admits(headers) {
            return Err(if path.starts_with("/api/") {
                Refusal::Closing(Problem::new(
                    StatusCode::UNAUTHORIZED,
                    "no_session",
                    "this server serves only the browser that opened the one-time link \
                     `trellis ui` printed",
                ))
            } else {
                Refusal::NoSession
            });
        }
        self.check_change(method, headers).map_err(Refusal::Plain)?;
        Ok(true)
    }

    fn check_host(&self, headers: &HeaderMap) -> Result<(), Problem> {
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_ascii_lowercase);
        if !host.is_some_and(|host| self.hosts.contains(&host)) {
            return Err(forbidden(
                "forbidden_host",
                "this server answers only to its own loopback address",
            ));
        }
        Ok(())
    }

    fn check_site(&self, headers: &HeaderMap) -> Result<(), Problem> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
            if !self.origins.contains(&origin) {
                return Err(forbidden(
                    "forbidden_origin",
                    "requests from other origins are refused",
                ));
            }
        }
        if let Some(site) = headers.get("sec-fetch-site") {
            let site = site.to_str().unwrap_or("");
            if site != "same-origin" && site != "none" {
                return Err(forbidden(
                    "forbidden_origin",
                    "requests from other sites are refused",
                ));
            }
        }
        Ok(())
    }

    /// A state change is a POST or PUT with a JSON body, or a DELETE, carrying the page token
    /// (the profile routes replace and delete with PUT and DELETE).
    fn check_change(&self, method: &Method, headers: &HeaderMap) -> Result<(), Problem> {
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        if ![Method::POST, Method::PUT, Method::DELETE].contains(method) {
            return Err(Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "only GET, POST, PUT and DELETE are served",
            ));
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                value
                    .split(';')
                    .next()
                    .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
            });
        // A DELETE carries no body; a body-carrying change must be JSON, which a cross-site
        // form cannot send without CORS.
        if method != Method::DELETE && !json {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "json_required",
                "state changes take a JSON body (Content-Type: application/json)",
            ));
        }
        // Exactly one token header: a second value must not get a chance to be read instead.
        let mut offered = headers.get_all(TOKEN_HEADER).iter();
        let token_ok = match (offered.next(), offered.next()) {
            (Some(value), None) => self.token.matches(value.as_bytes()),
            _ => false,
        };
        if !token_ok {
            return Err(forbidden(
                "bad_token",
                "state changes need the token of the page this server served",
            ));
        }
        Ok(())
    }
}

fn forbidden(code: &'static str, message: &str) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, code, message)
}

impl AccessPolicy {
    /// The page token to write into the served page, if this policy uses one.
    pub fn page_token(&self) -> Option<&PageToken> {
        match self {
            Self::LocalPage(local) => Some(local.token()),
            Self::Bearer(_) => None,
        }
    }

    /// `Ok(trusted)`: the request may go on (and came from an authenticated client).
    fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<bool, Refusal> {
        match self {
            Self::LocalPage(local) => local.check(method, path, headers),
            Self::Bearer(tokens) => check_bearer(tokens, headers)
                .map(|()| true)
                .map_err(Refusal::Bearer),
        }
    }
}

/// Why a request is refused, and so how it is answered.
enum Refusal {
    /// A problem answer.
    Plain(Problem),
    /// A problem answer after which the connection is closed.
    Closing(Problem),
    /// A refused bearer token: closing, with a `WWW-Authenticate` challenge on a 401.
    Bearer(Problem),
    /// A browser without the session: the page saying how to get in.
    NoSession,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::Plain(problem) => problem.into_response(),
            Self::Closing(problem) => closing(problem),
            Self::Bearer(problem) => {
                let challenge = problem.status == StatusCode::UNAUTHORIZED;
                let mut response = closing(problem);
                if challenge {
                    response.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        header::HeaderValue::from_static("Bearer"),
                    );
                }
                response
            }
            Self::NoSession => no_session_page(),
        }
    }
}

/// Exactly one `Authorization: Bearer TOKEN` header naming an accepted token. The offered
/// token is never logged nor quoted back.
fn check_bearer(tokens: &BearerTokens, headers: &HeaderMap) -> Result<(), Problem> {
    let mut offered = headers.get_all(header::AUTHORIZATION).iter();
    let token = match (offered.next(), offered.next()) {
        (Some(value), None) => value.as_bytes(),
        (None, _) => {
            return Err(unauthorized(
                "unauthenticated",
                "this server needs `Authorization: Bearer TOKEN`",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(unauthorized(
                "bad_token",
                "exactly one Authorization header is accepted",
            ));
        }
    };
    let secret = token
        .split_at_checked(7)
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"bearer "))
        .map(|(_, secret)| secret.trim_ascii());
    match secret {
        Some(secret) if tokens.identify(secret).is_some() => Ok(()),
        _ => Err(unauthorized(
            "bad_token",
            "the bearer token is not accepted",
        )),
    }
}

fn unauthorized(code: &'static str, message: &str) -> Problem {
    Problem::new(StatusCode::UNAUTHORIZED, code, message)
}

/// Middleware: refuses a request the policy does not allow, before any handler runs (and
/// before its body is read). A refused bearer request closes its connection; an accepted one
/// marks its connection trusted, so it is not closed to make room for others.
pub async fn enforce(
    State(policy): State<Arc<AccessPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.method(), request.uri().path(), request.headers()) {
        Ok(trusted) => {
            if trusted && let Some(connection) = request.extensions().get::<Arc<Connection>>() {
                connection.mark_trusted();
            }
            next.run(request).await
        }
        Err(refusal) => refusal.into_response(),
    }
}
