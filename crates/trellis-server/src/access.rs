//! Who may talk to the server, chosen once at startup and checked on every request.
//!
//! `trellis ui` uses [`AccessPolicy::LocalPage`]: the server listens on loopback only, answers
//! only requests addressed to its own loopback host names (a DNS-rebinding page is turned away
//! by its `Host`), refuses requests that a browser marks as coming from another site (`Origin`,
//! `Sec-Fetch-Site`), and accepts a state change only as a JSON POST that carries the
//! per-process token it wrote into the page it served. `trellis serve` uses
//! [`AccessPolicy::Bearer`]: every request carries `Authorization: Bearer TOKEN` naming one of
//! the tokens the server was started with (see [`crate::bearer`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::bearer::BearerTokens;
use crate::problem::Problem;

/// The header a page sends its token in.
pub const TOKEN_HEADER: &str = "x-trellis-token";

/// A random per-process secret handed to the page (never logged).
#[derive(Clone)]
pub struct PageToken(String);

impl PageToken {
    /// 32 random bytes from the operating system, as hex.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Self(
            bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        ))
    }

    /// A fixed token, for tests.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the texts differ.
    fn matches(&self, offered: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        if expected.len() != offered.len() {
            return false;
        }
        expected
            .iter()
            .zip(offered)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
    }
}

impl std::fmt::Debug for PageToken {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("PageToken(…)")
    }
}

/// The access rules of one server process.
#[derive(Debug, Clone)]
pub enum AccessPolicy {
    /// A browser page on this machine: loopback, same origin, token on state changes.
    LocalPage(LocalPage),
    /// A team server: any host, every request authenticated by a bearer token.
    Bearer(BearerTokens),
}

/// The host names a loopback server answers to, and the page token.
#[derive(Debug, Clone)]
pub struct LocalPage {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: PageToken,
}

/// Why a listen address is refused for a local page server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a loopback address; `trellis ui` listens on loopback only")]
pub struct NotLoopback(pub SocketAddr);

impl LocalPage {
    /// The policy for a server bound to `address`, which must be a loopback address.
    pub fn new(address: SocketAddr, token: PageToken) -> Result<Self, NotLoopback> {
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
            token,
        })
    }

    pub fn token(&self) -> &PageToken {
        &self.token
    }

    /// The first problem with `request`'s headers, if any.
    fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Problem> {
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
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        if method != Method::POST {
            return Err(Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "only GET and POST are served",
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
        if !json {
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

    fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Problem> {
        match self {
            Self::LocalPage(local) => local.check(method, headers),
            Self::Bearer(tokens) => check_bearer(tokens, headers),
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

/// Middleware: refuses a request the policy does not allow, before any handler runs.
pub async fn enforce(
    State(policy): State<Arc<AccessPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    match policy.check(request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(problem) => {
            let challenge = problem.status == StatusCode::UNAUTHORIZED;
            let mut response = problem.into_response();
            if challenge {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            response
        }
    }
}
