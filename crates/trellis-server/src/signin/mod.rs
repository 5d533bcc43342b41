//! People on a team server (`trellis serve`) in a browser: a sign-in page where a bearer token
//! is exchanged for a session cookie ([`BrowserSignIn`]), exact `Host` and `Origin` checks
//! against the server's public origin ([`origin`]), the in-memory sessions ([`sessions`]), the
//! throttle on failed sign-ins ([`throttle`]) and the pages and answers of signing in and out
//! ([`pages`]). The token itself is read once, from
//! the sign-in form, and never kept, logged or written into a page: the session holds only the
//! token's name.

pub mod origin;
pub(crate) mod pages;
pub mod sessions;
pub mod throttle;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::bearer::BearerTokens;
use crate::problem::Problem;
pub use origin::{OriginError, PublicOrigin};
pub use sessions::{SessionTimes, SessionView, Sessions};
pub use throttle::{ClientKey, FailedSignIns, SignInLimit};

/// The browser side of a team server: its public origin, sessions and embedding parents.
#[derive(Debug)]
pub struct BrowserSignIn {
    origin: PublicOrigin,
    sessions: Sessions,
    cookie_name: String,
    embed_origins: Vec<PublicOrigin>,
    failed_sign_ins: FailedSignIns,
}

impl BrowserSignIn {
    pub fn new(origin: PublicOrigin, times: SessionTimes) -> Self {
        // `__Host-` makes browsers keep the cookie only if it is Secure, for this host and path
        // `/`; over http (loopback, a trusted network) the name carries the port instead,
        // since browsers do not separate cookies by port.
        let cookie_name = if origin.is_secure() {
            "__Host-trellis_session".to_owned()
        } else {
            format!("trellis_session_{}", origin.port())
        };
        Self {
            origin,
            sessions: Sessions::new(times),
            cookie_name,
            embed_origins: Vec::new(),
            failed_sign_ins: FailedSignIns::new(SignInLimit::default()),
        }
    }

    /// The same, allowing each client address `limit`'s failed sign-ins per window.
    pub fn with_sign_in_limit(mut self, limit: SignInLimit) -> Self {
        self.failed_sign_ins = FailedSignIns::new(limit);
        self
    }

    pub fn failed_sign_ins(&self) -> &FailedSignIns {
        &self.failed_sign_ins
    }

    /// The same, letting pages at `origins` embed the run view (`/embed.html`).
    pub fn with_embed_origins(mut self, origins: Vec<PublicOrigin>) -> Self {
        self.embed_origins = origins;
        self
    }

    pub fn origin(&self) -> &PublicOrigin {
        &self.origin
    }

    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    pub fn cookie_name(&self) -> &str {
        &self.cookie_name
    }

    pub fn embed_origins(&self) -> &[PublicOrigin] {
        &self.embed_origins
    }

    /// The values of every cookie of this server's name that `headers` carry.
    fn cookie_values<'a>(&'a self, headers: &'a HeaderMap) -> impl Iterator<Item = &'a str> {
        crate::session::cookie_values(headers, &self.cookie_name)
    }

    /// Whether `headers` carry a cookie of this server's name (live or not).
    pub(crate) fn has_cookie(&self, headers: &HeaderMap) -> bool {
        self.cookie_values(headers).next().is_some()
    }

    /// The live session `headers` carry the cookie of, if any.
    pub(crate) fn session(&self, headers: &HeaderMap) -> Option<SessionView> {
        self.cookie_values(headers)
            .find_map(|value| self.sessions.find(value.as_bytes()))
    }

    /// Ends every session `headers` carry a cookie of.
    pub(crate) fn end_sessions(&self, headers: &HeaderMap) {
        for value in self.cookie_values(headers) {
            self.sessions.end(value.as_bytes());
        }
    }

    /// `Host` must be exactly the public origin's host (and port): a page on another name
    /// that resolves here (DNS rebinding) is turned away.
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> Result<(), Problem> {
        let mut hosts = headers.get_all(header::HOST).iter();
        match (hosts.next(), hosts.next()) {
            (Some(host), None) if self.origin.matches_host(host.as_bytes()) => Ok(()),
            _ => Err(forbidden(
                "forbidden_host",
                format!(
                    "this server's browser pages are served only at {}",
                    self.origin
                ),
            )),
        }
    }

    /// A browser request from another origin is refused: `Origin`, when sent, must be exactly
    /// the public origin, and `Sec-Fetch-Site`, when sent, `same-origin` or `none` (a typed
    /// address or bookmark) — or `same-site` for a frame of the run view (`embedding`).
    pub(crate) fn check_site(&self, headers: &HeaderMap, embedding: bool) -> Result<(), Problem> {
        if let Some(origin) = headers.get(header::ORIGIN)
            && !self.origin.matches_origin(origin.as_bytes())
        {
            return Err(forbidden(
                "forbidden_origin",
                "requests from other origins are refused",
            ));
        }
        if let Some(site) = headers.get("sec-fetch-site") {
            let site = site.as_bytes();
            let allowed =
                site == b"same-origin" || site == b"none" || (embedding && site == b"same-site");
            if !allowed {
                return Err(forbidden(
                    "forbidden_origin",
                    "requests from other sites are refused",
                ));
            }
        }
        Ok(())
    }

    /// A state change from a browser must say where it comes from: exactly one `Origin`,
    /// the public origin (every browser sends it on POST, PUT and DELETE).
    pub(crate) fn require_origin(&self, headers: &HeaderMap) -> Result<(), Problem> {
        let mut origins = headers.get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (Some(origin), None) if self.origin.matches_origin(origin.as_bytes()) => Ok(()),
            _ => Err(forbidden(
                "forbidden_origin",
                format!(
                    "a change from a browser must come from a page of {}",
                    self.origin
                ),
            )),
        }
    }

    /// The `Set-Cookie` value that keeps `value` as this browser's session.
    pub(crate) fn session_cookie(&self, value: &str) -> Option<HeaderValue> {
        let secure = if self.origin.is_secure() {
            "; Secure"
        } else {
            ""
        };
        HeaderValue::from_str(&format!(
            "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            self.cookie_name,
            self.sessions.times().lifetime.as_secs()
        ))
        .ok()
    }

    /// The `Set-Cookie` value that makes the browser forget its session cookie.
    pub(crate) fn cleared_cookie(&self) -> Option<HeaderValue> {
        let secure = if self.origin.is_secure() {
            "; Secure"
        } else {
            ""
        };
        HeaderValue::from_str(&format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}",
            self.cookie_name
        ))
        .ok()
    }
}

/// A team server's access: its bearer tokens and, when people may use it from a browser, the
/// sign-in.
#[derive(Debug, Clone)]
pub struct TeamAccess {
    pub tokens: BearerTokens,
    pub browser: Option<std::sync::Arc<BrowserSignIn>>,
}

fn forbidden(code: &'static str, message: impl Into<String>) -> Problem {
    Problem::new(StatusCode::FORBIDDEN, code, message)
}
