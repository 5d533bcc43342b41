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

/// The page itself, with the page token (and the signed-in name) written into it.
pub fn index_page(token: Option<&PageToken>, identity: Option<&str>) -> Response {
    page("index.html", token, identity, None).map_or_else(not_built, secure)
}

/// The run view for a frame (`embed.html`), which pages at `parents` may frame and talk to
/// (their origins written into it for its message bridge).
pub fn embed_page(
    token: Option<&PageToken>,
    identity: Option<&str>,
    parents: &[String],
) -> Response {
    let Some(response) = page("embed.html", token, identity, Some(parents)) else {
        return not_built();
    };
    let mut response = secure(response);
    let mut ancestors = String::from("'self'");
    for parent in parents {
        ancestors.push(' ');
        ancestors.push_str(parent);
    }
    let policy = CONTENT_SECURITY_POLICY.replace(
        "frame-ancestors 'none'",
        &format!("frame-ancestors {ancestors}"),
    );
    let headers = response.headers_mut();
    headers.remove(header::X_FRAME_OPTIONS);
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

fn not_built() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "the web UI was not built into this binary",
    )
        .into_response()
}

/// A page of the bundle with its slots filled: the token, the signed-in name, and the
/// origins allowed to embed it.
fn page(
    name: &str,
    token: Option<&PageToken>,
    identity: Option<&str>,
    parents: Option<&[String]>,
) -> Option<Response> {
    let text = BUNDLE.get_file(name)?.contents_utf8()?;
    let mut filled = format!(
        r#"<meta name="trellis-token" content="{}" />"#,
        token.map_or("", PageToken::as_str)
    );
    if let Some(identity) = identity {
        filled.push_str(&format!(
            r#"<meta name="trellis-user" content="{}" />"#,
            attribute(identity)
        ));
    }
    if let Some(parents) = parents {
        filled.push_str(&format!(
            r#"<meta name="trellis-embed-origins" content="{}" />"#,
            attribute(&parents.join(" "))
        ));
    }
    let mut response = text.replacen(TOKEN_SLOT, &filled, 1).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Some(response)
}

/// Text for an HTML attribute value.
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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

/// An HTML page answered with `status`, never cached, with the headers every page carries.
pub(crate) fn uncached_html(status: StatusCode, page: String) -> Response {
    let mut response = (status, page).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    secure(response)
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
