//! The web UI, embedded in the binary at build time from `ui/dist` (built and committed by the
//! UI's own build; CI checks the committed bundle is what the locked sources build).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use include_dir::{Dir, include_dir};

use crate::secret::PageToken;

static BUNDLE: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../ui/dist");

/// The empty token slot in the bundle's `index.html`, filled per process.
const TOKEN_SLOT: &str = r#"<meta name="trellis-token" content="" />"#;

/// What the page may load and talk to: only this server. Inline styles are allowed because the
/// graph canvas positions its nodes with them.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// The page itself, with this process's token written into it.
pub fn index_page(token: Option<&PageToken>) -> Response {
    let Some(index) = BUNDLE
        .get_file("index.html")
        .and_then(|file| file.contents_utf8())
    else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the web UI was not built into this binary",
        )
            .into_response();
    };
    let page = match token {
        Some(token) => index.replacen(
            TOKEN_SLOT,
            &format!(
                r#"<meta name="trellis-token" content="{}" />"#,
                token.as_str()
            ),
            1,
        ),
        None => index.to_owned(),
    };
    let mut response = page.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    secure(response)
}

/// A file of the bundle (`assets/index-…js`), cached for good: its name carries its hash.
pub fn asset(path: &str) -> Option<Response> {
    let file = BUNDLE.get_file(path)?;
    let mut response = file.contents().into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    Some(secure(response))
}

/// Adds the headers every page response carries.
pub fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Whether the bundle holds a page (false only in a build made without `ui/dist`).
pub fn bundled() -> bool {
    BUNDLE.get_file("index.html").is_some()
}
