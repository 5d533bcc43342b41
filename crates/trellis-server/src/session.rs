//! Who may use a `trellis ui` server: only the person who started it. At launch the server
//! makes three secrets: a one-time launch secret, which `trellis ui` prints (and `--open` hands
//! to the browser through a file only its user can read) as `/launch/SECRET`; the session
//! secret, which that link sets once as an `HttpOnly; SameSite=Strict` cookie (the link works
//! once); and the page token, written only into a page served to that session and required on
//! state changes. Without the cookie, no run data is served and the page holds no token.

use std::sync::{Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::secret::PageToken;

/// The path prefix of the one-time launch link.
pub const LAUNCH_PREFIX: &str = "/launch/";

/// The secrets of one `trellis ui` launch (never logged).
#[derive(Debug, Clone)]
pub struct LaunchSecrets {
    /// Written into the page served to the session; state changes carry it.
    pub page: PageToken,
    /// The one-time secret of the launch link.
    pub launch: PageToken,
    /// The session cookie's value.
    pub session: PageToken,
}

impl LaunchSecrets {
    /// Three fresh secrets from the operating system.
    pub fn generate() -> Result<Self, getrandom::Error> {
        Ok(Self {
            page: PageToken::generate()?,
            launch: PageToken::generate()?,
            session: PageToken::generate()?,
        })
    }
}

/// The session side of a local page: the launch secret until it is used, and the cookie.
#[derive(Debug)]
pub(crate) struct Session {
    cookie_name: String,
    value: PageToken,
    launch: Mutex<Option<PageToken>>,
}

impl Session {
    /// The cookie is named after the port, so two servers on one host keep their own.
    pub(crate) fn new(port: u16, value: PageToken, launch: PageToken) -> Self {
        Self {
            cookie_name: format!("trellis_ui_{port}"),
            value,
            launch: Mutex::new(Some(launch)),
        }
    }

    pub(crate) fn cookie_name(&self) -> &str {
        &self.cookie_name
    }

    /// Whether `headers` carry this session's cookie (among any others of the same name).
    pub(crate) fn admits(&self, headers: &HeaderMap) -> bool {
        cookie_values(headers, &self.cookie_name).any(|value| self.value.matches(value.as_bytes()))
    }

    /// Uses up the launch secret if `offered` is it; true at most once per launch.
    pub(crate) fn redeem(&self, offered: &str) -> bool {
        let mut launch = self.launch.lock().unwrap_or_else(PoisonError::into_inner);
        if launch
            .as_ref()
            .is_some_and(|secret| secret.matches(offered.as_bytes()))
        {
            *launch = None;
            true
        } else {
            false
        }
    }

    /// The answer to a launch link: the cookie and a page that moves on to `/` (a same-origin
    /// navigation, which carries a `SameSite=Strict` cookie), or a refusal.
    pub(crate) fn launch(&self, offered: &str) -> Response {
        if !self.redeem(offered) {
            return html(
                StatusCode::FORBIDDEN,
                "This launch link was already used or is not this server's. Stop `trellis ui` and \
                 start it again for a new link.",
                None,
            );
        }
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie_name,
            self.value.as_str()
        );
        let mut response = html(StatusCode::OK, "Signed in; opening the runs…", Some("/"));
        if let Ok(cookie) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        response
    }
}

/// The page a browser without the session gets instead of the app.
pub(crate) fn no_session_page() -> Response {
    html(
        StatusCode::UNAUTHORIZED,
        "This page is for the person who started `trellis ui`: open the one-time link it \
         printed (or start it with --open).",
        None,
    )
}

fn html(status: StatusCode, message: &str, next: Option<&str>) -> Response {
    let refresh = next
        .map(|to| format!(r#"<meta http-equiv="refresh" content="0; url={to}" />"#))
        .unwrap_or_default();
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\" />{refresh}\
         <title>Trellis</title></head><body><p>{message}</p></body></html>"
    );
    crate::assets::uncached_html(status, page)
}

/// The values of every cookie called `name` that `headers` carry, in order.
pub(crate) fn cookie_values<'a>(
    headers: &'a HeaderMap,
    name: &'a str,
) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(cookie, _)| *cookie == name)
        .map(|(_, value)| value)
}
