//! The answers of signing in and out of a team server in a browser: the sign-in page (a plain
//! form, no script, which brings the browser back to the page it came from), the exchange of a
//! pasted token for a session cookie (throttled per client address after failures), signing
//! out, and the one-time sign-in links a bearer client makes (`trellis ui --target`). No answer
//! ever holds the token: a refused one is not quoted back.

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::BrowserSignIn;
use super::throttle::ClientKey;
use crate::bearer::{BearerTokens, MAX_TOKEN_BYTES};
use crate::problem::Problem;
use crate::session::LAUNCH_PREFIX;

/// The sign-in page may post its form to this server only, and be framed by nobody.
const SIGNIN_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The largest sign-in form accepted (a token is at most [`MAX_TOKEN_BYTES`], each byte at most
/// three when encoded).
pub(crate) const MAX_SIGNIN_FORM_BYTES: usize = MAX_TOKEN_BYTES * 3 + 64;

/// The longest page a sign-in may bring the browser back to.
const MAX_NEXT_BYTES: usize = 512;

#[derive(Deserialize)]
struct SignInForm {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// Where a sign-in may bring the browser back to: a path of this server (`/`, `/#/runs/ID`),
/// never another site (`//host`, `/\host`) nor anything needing more than plain URL
/// characters. None: the runs.
pub(crate) fn return_path(next: Option<&str>) -> Option<&str> {
    let next = next?;
    let plain = next
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || b"/-._~%#?=&+:@".contains(&byte));
    let local = next.starts_with('/') && !next.starts_with("//");
    (plain && local && next.len() <= MAX_NEXT_BYTES).then_some(next)
}

/// The page to come back to that the query of `GET /signin?next=PATH` names, if any.
pub(crate) fn next_of_query(query: Option<&str>) -> Option<String> {
    let fields = form_fields(query.unwrap_or_default().as_bytes());
    return_path(fields.get("next").and_then(|next| next.as_str())).map(str::to_owned)
}

/// `GET /signin`: the form (`message` says why it is shown again; `next` is where a sign-in
/// brings the browser back to).
pub(crate) fn signin_page(
    status: StatusCode,
    message: Option<&str>,
    next: Option<&str>,
) -> Response {
    let notice = message
        .map(|text| format!(r#"<p role="alert" class="notice">{}</p>"#, escape(text)))
        .unwrap_or_default();
    let next = return_path(next);
    let back = next
        .map(|next| {
            format!(
                r#"<input type="hidden" name="next" value="{}" />"#,
                escape(next)
            )
        })
        .unwrap_or_default();
    // Signed in meanwhile (in another tab): straight back, past the form.
    let already = match next {
        Some(next) => format!(
            r#"<a href="{}">Already signed in? Go back</a>"#,
            escape(next)
        ),
        None => r#"<a href="/">Already signed in? Open the runs</a>"#.to_owned(),
    };
    let page = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<link rel="icon" href="/favicon.ico" type="image/svg+xml" /><title>Sign in · Trellis</title>
<style>
body {{ font: 16px/1.5 system-ui, sans-serif; margin: 0; display: grid; place-items: center; min-height: 100vh; background: #f6f7f9; color: #1d232b; }}
main {{ background: #fff; padding: 2rem; border-radius: 8px; box-shadow: 0 1px 4px #0002; width: min(26rem, 90vw); }}
h1 {{ font-size: 1.3rem; margin-top: 0; }}
label {{ display: block; font-weight: 600; margin-bottom: .3rem; }}
input {{ width: 100%; box-sizing: border-box; padding: .5rem; font: inherit; border: 1px solid #8a94a3; border-radius: 4px; }}
button {{ margin-top: 1rem; padding: .5rem 1.2rem; font: inherit; border: 0; border-radius: 4px; background: #2456b8; color: #fff; cursor: pointer; }}
.notice {{ color: #9b1c1c; }}
.hint {{ color: #4a5563; font-size: .9rem; }}
@media (prefers-color-scheme: dark) {{ body {{ background: #15181d; color: #e4e7eb; }} main {{ background: #1f242b; }} .notice {{ color: #f19999; }} .hint {{ color: #a9b2bf; }} }}
</style></head><body><main>
<h1>Sign in to Trellis</h1>{notice}
<form method="post" action="/signin">
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required autofocus />{back}
<button type="submit">Sign in</button>
</form>
<p class="hint">Paste the token you were given (<code>trellis serve token create</code> makes one). It is checked once and not kept: this browser gets a session that ends when you sign out or after a while.</p>
<p class="hint">{already}</p>
</main></body></html>"#
    );
    let mut response = crate::assets::uncached_html(status, page);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SIGNIN_SECURITY_POLICY),
    );
    // Under `no-referrer` a browser sends `Origin: null` with the form, which the exact
    // origin check must refuse; `same-origin` names this server to itself and nobody else.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// `POST /signin` (a form with `token` and maybe `next`): a session and on to `next` (else
/// `/`), or the form again — `429` with `Retry-After`, the token unread, while `client` is
/// past its failed sign-ins.
pub(crate) fn sign_in(
    browser: &BrowserSignIn,
    tokens: &BearerTokens,
    client: ClientKey,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| {
            mime.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type || body.len() > MAX_SIGNIN_FORM_BYTES {
        return signin_page(
            StatusCode::BAD_REQUEST,
            Some("Sign in with the form on this page."),
            None,
        );
    }
    // The form's own rejection text is not used: it is not for people, and could quote input.
    let (token, next) = serde_json::from_value::<SignInForm>(form_fields(body))
        .map(|form| (form.token, form.next))
        .unwrap_or_default();
    let next = return_path(next.as_deref());
    // Checked before the token is: a throttled client learns nothing about its guess.
    if let Err(wait) = browser.failed_sign_ins().check(client) {
        return throttled(wait, next);
    }
    let Some(identity) = tokens.identify(token.trim().as_bytes()) else {
        browser.failed_sign_ins().record(client);
        return signin_page(
            StatusCode::UNAUTHORIZED,
            Some("That token is not accepted by this server."),
            next,
        );
    };
    start_session(browser, identity, next.unwrap_or("/"))
}

/// The form again, `429` with `Retry-After`: too many failed sign-ins from this address.
fn throttled(wait: std::time::Duration, next: Option<&str>) -> Response {
    // Whole seconds, rounded up, at least one.
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut response = signin_page(
        StatusCode::TOO_MANY_REQUESTS,
        Some(&format!(
            "Too many failed sign-ins from this address: try again in {seconds} seconds."
        )),
        next,
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The fields of a URL-encoded form as a JSON object of strings (the last of a repeated name).
fn form_fields(body: &[u8]) -> serde_json::Value {
    let mut fields = serde_json::Map::new();
    for pair in body.split(|byte| *byte == b'&') {
        let (name, value) = match pair.iter().position(|byte| *byte == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        if let (Some(name), Some(value)) = (percent_decode(name), percent_decode(value)) {
            fields.insert(name, serde_json::Value::String(value));
        }
    }
    serde_json::Value::Object(fields)
}

/// `+` is a space and `%XX` a byte; None when the result is not UTF-8 or an escape is broken.
fn percent_decode(text: &[u8]) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = text.get(at + 1..at + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                at += 2;
            }
            byte => bytes.push(byte),
        }
        at += 1;
    }
    String::from_utf8(bytes).ok()
}

/// A new session for `identity`: its cookie, and a same-origin move on to `next` (which a
/// `SameSite=Strict` cookie travels with).
fn start_session(browser: &BrowserSignIn, identity: &str, next: &str) -> Response {
    let cookie = match browser.sessions().start(identity) {
        Ok(cookie) => cookie,
        Err(_) => {
            return signin_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some("The server could not make a session (no randomness); try again."),
                None,
            );
        }
    };
    let mut response = moving_on(next);
    if let Some(value) = browser.session_cookie(cookie.as_str()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// A page that moves on to `next` at once (a same-origin navigation, unlike a redirect from a
/// link opened elsewhere, so the `SameSite=Strict` cookie is sent with it).
fn moving_on(next: &str) -> Response {
    let next = escape(next);
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\" />\
         <meta http-equiv=\"refresh\" content=\"0; url={next}\" /><title>Trellis</title></head>\
         <body><p>Signed in; <a href=\"{next}\">opening the runs</a>…</p></body></html>"
    );
    let mut response = (StatusCode::OK, page).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    crate::assets::secure(response)
}

/// `POST /signout`: ends the session and forgets its cookie.
pub(crate) fn sign_out(browser: &BrowserSignIn, headers: &HeaderMap) -> Response {
    browser.end_sessions(headers);
    let mut response = Json(serde_json::json!({"signedOut": true})).into_response();
    if let Some(value) = browser.cleared_cookie() {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /signin/link` (bearer clients only): a one-time link that signs a browser in as the
/// caller's token, without the token ever reaching the browser.
pub(crate) fn new_link(browser: &BrowserSignIn, identity: &str) -> Response {
    match browser.sessions().new_link(identity) {
        Ok(secret) => {
            let path = format!("{LAUNCH_PREFIX}{}", secret.as_str());
            let mut response = Json(serde_json::json!({
                "url": format!("{}{path}", browser.origin()),
                "expiresInSeconds": super::sessions::LINK_LIFETIME.as_secs(),
            }))
            .into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(_) => Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no_entropy",
            "the operating system gave no randomness for the link",
        )
        .into_response(),
    }
}

/// `GET /launch/{secret}`: a pending one-time link signs this browser in.
pub(crate) fn launch(browser: &BrowserSignIn, offered: &str) -> Response {
    match browser.sessions().redeem_link(offered.as_bytes()) {
        Some(identity) => start_session(browser, &identity, "/"),
        None => signin_page(
            StatusCode::FORBIDDEN,
            Some("This sign-in link was already used, has expired or is not this server's."),
            None,
        ),
    }
}

/// Text for an HTML element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded() {
        let fields = form_fields(b"token=trellis_ab%2Bc+d&other=1&token2");
        assert_eq!(fields["token"], "trellis_ab+c d");
        assert_eq!(fields["other"], "1");
        assert_eq!(fields["token2"], "");
        assert!(form_fields(b"token=%zz")["token"].is_null());
    }

    #[test]
    fn a_sign_in_comes_back_only_to_a_page_of_this_server() {
        for next in ["/", "/#/profiles/greeter", "/#/runs/abc?x=1&y=2"] {
            assert_eq!(return_path(Some(next)), Some(next));
        }
        for next in [
            "",
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "/#/x\"onload=\"",
            "/#/<script>",
            "/#/a b",
            "javascript:alert(1)",
        ] {
            assert_eq!(return_path(Some(next)), None, "{next}");
        }
        assert_eq!(return_path(Some(&format!("/#/{}", "a".repeat(600)))), None);
        assert_eq!(
            next_of_query(Some("next=%2F%23%2Fprofiles%2Fgreeter")).as_deref(),
            Some("/#/profiles/greeter")
        );
        assert_eq!(next_of_query(Some("next=%2F%2Fevil.example")), None);
        assert_eq!(next_of_query(None), None);
    }
}
