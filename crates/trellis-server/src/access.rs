//! Who may talk to the server, chosen once at startup and checked on every request.
//!
//! `trellis ui` uses [`AccessPolicy::LocalPage`]: the server listens on loopback only, answers
//! only requests addressed to its own loopback host names (a DNS-rebinding page is turned away
//! by its `Host`), refuses requests that a browser marks as coming from another site (`Origin`,
//! `Sec-Fetch-Site`), serves run data and the page only to the browser session that used the
//! launch link (see [`crate::session`]: other local accounts get nothing), and accepts a state
//! change only as a JSON POST that carries the per-launch token it wrote into that page.
//! `trellis serve` uses [`AccessPolicy::Team`]: a request carrying `Authorization: Bearer
//! TOKEN` must name one of the tokens the server was started with (see [`crate::bearer`]);
//! when people may sign in from a browser ([`crate::signin`]), a request without one is a
//! browser's: exact `Host` and `Origin`, a live session cookie, and the session's page token
//! on state changes.

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
use crate::signin::pages::MAX_SIGNIN_FORM_BYTES;
use crate::signin::{PublicOrigin, SessionView, TeamAccess};

/// The header a page sends its token in.
pub const TOKEN_HEADER: &str = "x-trellis-token";

/// The access rules of one server process.
#[derive(Debug, Clone)]
pub enum AccessPolicy {
    /// A browser page on this machine: loopback, same origin, token on state changes.
    LocalPage(LocalPage),
    /// A team server: bearer tokens from any host; browsers through a sign-in.
    Team(TeamAccess),
}

/// Who a request that passed the policy came from (a request extension for the handlers).
#[derive(Debug, Clone)]
pub enum Caller {
    /// A client with a bearer token (its name).
    Bearer(String),
    /// A browser signed in to a team server.
    Session(SessionView),
}

/// A request the policy let through: whether it came from an authenticated client, and who.
struct Admitted {
    trusted: bool,
    caller: Option<Caller>,
}

impl Admitted {
    fn anonymous() -> Self {
        Self {
            trusted: false,
            caller: None,
        }
    }
}

/// The host names a loopback server answers to, its session and the page token.
#[derive(Debug, Clone)]
pub struct LocalPage {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: PageToken,
    launch_path: String,
    session: Arc<Session>,
    embed_origins: Vec<PublicOrigin>,
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
            embed_origins: Vec::new(),
        })
    }

    /// The same, letting pages at `origins` embed the run view (`/embed.html`).
    pub fn with_embed_origins(mut self, origins: Vec<PublicOrigin>) -> Self {
        self.embed_origins = origins;
        self
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
        let embedding = (method == Method::GET || method == Method::HEAD) && path == "/embed.html";
        self.check_site(headers, embedding)
            .map_err(Refusal::Plain)?;
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
        check_change(method, headers, &self.token).map_err(Refusal::Plain)?;
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

    /// `Origin` must be this server's; `Sec-Fetch-Site` `same-origin` or `none`, or
    /// `same-site` for a frame of the run view (`embedding`: its parents are named by the
    /// page's `frame-ancestors`).
    fn check_site(&self, headers: &HeaderMap, embedding: bool) -> Result<(), Problem> {
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
            if site != "same-origin" && site != "none" && !(embedding && site == "same-site") {
                return Err(forbidden(
                    "forbidden_origin",
                    "requests from other sites are refused",
                ));
            }
        }
        Ok(())
    }
}

/// A state change is a POST or PUT with a JSON body, or a DELETE, carrying the page token
/// (the profile routes replace and delete with PUT and DELETE).
fn check_change(method: &Method, headers: &HeaderMap, token: &PageToken) -> Result<(), Problem> {
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
        (Some(value), None) => token.matches(value.as_bytes()),
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

fn forbidden(code: &'static str, message: &str) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, code, message)
}

impl AccessPolicy {
    /// The page token of `trellis ui`'s page (a team server's is per session: see
    /// [`Caller::Session`]).
    pub fn page_token(&self) -> Option<&PageToken> {
        match self {
            Self::LocalPage(local) => Some(local.token()),
            Self::Team(_) => None,
        }
    }

    /// The origins whose pages may frame the run view (`/embed.html`).
    pub fn embed_origins(&self) -> Vec<String> {
        let origins = match self {
            Self::LocalPage(local) => &local.embed_origins[..],
            Self::Team(TeamAccess {
                browser: Some(browser),
                ..
            }) => browser.embed_origins(),
            Self::Team(_) => &[],
        };
        origins
            .iter()
            .map(|origin| origin.as_str().to_owned())
            .collect()
    }

    /// The request may go on: whether from an authenticated client, and who it is.
    fn check(&self, method: &Method, path: &str, headers: &HeaderMap) -> Result<Admitted, Refusal> {
        match self {
            Self::LocalPage(local) => local.check(method, path, headers).map(|trusted| Admitted {
                trusted,
                caller: None,
            }),
            Self::Team(team) => check_team(team, method, path, headers),
        }
    }
}

/// A team server's rules. A request with an `Authorization` header (or to a server without
/// browser sign-in) is a bearer client's, checked exactly as it always was; any other is a
/// browser's. A browser's call of the API without a session cookie gets the same 401 a client
/// without a token does.
fn check_team(
    team: &TeamAccess,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<Admitted, Refusal> {
    let browser = match &team.browser {
        Some(browser) if !headers.contains_key(header::AUTHORIZATION) => browser,
        _ => {
            return check_bearer(&team.tokens, headers)
                .map(|name| Admitted {
                    trusted: true,
                    caller: Some(Caller::Bearer(name)),
                })
                .map_err(Refusal::Bearer);
        }
    };
    let api = path.starts_with("/api/");
    if api && !browser.has_cookie(headers) {
        return Err(Refusal::Bearer(unauthorized(
            "unauthenticated",
            "this server needs `Authorization: Bearer TOKEN` (or a browser signed in at /signin)",
        )));
    }
    browser.check_host(headers).map_err(Refusal::Plain)?;
    let reading = method == Method::GET || method == Method::HEAD;
    // A one-time link is opened from outside (a terminal, a file): its handler checks it.
    if method == Method::GET && path.starts_with(LAUNCH_PREFIX) {
        return Ok(Admitted::anonymous());
    }
    browser
        .check_site(headers, reading && path == "/embed.html")
        .map_err(Refusal::Plain)?;
    if reading && (path.starts_with("/assets/") || path == "/favicon.ico" || path == "/signin") {
        return Ok(Admitted::anonymous());
    }
    if path == "/signin" {
        if method != Method::POST {
            return Err(Refusal::Plain(method_not_allowed()));
        }
        browser.require_origin(headers).map_err(Refusal::Plain)?;
        // Anyone may post the form: its body is read only when declared and small, so an
        // anonymous client cannot make the server hold a large body.
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok());
        if declared.is_none_or(|length| length > MAX_SIGNIN_FORM_BYTES) {
            return Err(Refusal::Closing(Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request.too_large",
                "the sign-in form is a small body with its Content-Length",
            )));
        }
        return Ok(Admitted::anonymous());
    }
    let Some(session) = browser.session(headers) else {
        return Err(if api || !reading {
            Refusal::Closing(unauthorized(
                "no_session",
                "this browser is not signed in (or its session ended): sign in again at /signin",
            ))
        } else {
            Refusal::SignIn
        });
    };
    if !reading {
        browser.require_origin(headers).map_err(Refusal::Plain)?;
        check_change(method, headers, &session.page_token).map_err(Refusal::Plain)?;
    }
    Ok(Admitted {
        trusted: true,
        caller: Some(Caller::Session(session)),
    })
}

fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "only GET, POST, PUT and DELETE are served",
    )
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
    /// A browser not signed in to a team server: on to the sign-in page.
    SignIn,
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
            Self::SignIn => {
                let mut response = StatusCode::SEE_OTHER.into_response();
                let headers = response.headers_mut();
                headers.insert(
                    header::LOCATION,
                    header::HeaderValue::from_static("/signin"),
                );
                headers.insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static("no-store"),
                );
                response
            }
        }
    }
}

/// Exactly one `Authorization: Bearer TOKEN` header naming an accepted token. The offered
/// token is never logged nor quoted back.
fn check_bearer(tokens: &BearerTokens, headers: &HeaderMap) -> Result<String, Problem> {
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
    match secret.and_then(|secret| tokens.identify(secret)) {
        Some(name) => Ok(name.to_owned()),
        None => Err(unauthorized(
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
        Ok(admitted) => {
            let mut request = request;
            if admitted.trusted
                && let Some(connection) = request.extensions().get::<Arc<Connection>>()
            {
                connection.mark_trusted();
            }
            if let Some(caller) = admitted.caller {
                request.extensions_mut().insert(caller);
            }
            next.run(request).await
        }
        Err(refusal) => refusal.into_response(),
    }
}
