//! The fake's answers before they become HTTP responses: GitHub's success, failure and
//! validation shapes, and list pagination with `Link` headers.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};

/// GitHub's default and largest `per_page`.
const DEFAULT_PER_PAGE: usize = 30;
const MAX_PER_PAGE: usize = 100;

/// An answer before it becomes an HTTP response.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub link: Option<String>,
    /// Answer with GitHub's exhausted rate-limit headers.
    pub rate_limited: bool,
    /// A `Location` header (GitHub's 302 to a download URL).
    pub location: Option<String>,
    /// A plain-text body instead of `body` (a downloaded log).
    pub text: Option<String>,
    /// A `Retry-After` header, in seconds (a secondary rate limit).
    pub retry_after: Option<u64>,
}

pub(crate) fn ok(body: Value) -> Answer {
    Answer {
        status: StatusCode::OK,
        body,
        link: None,
        rate_limited: false,
        location: None,
        text: None,
        retry_after: None,
    }
}

/// GitHub's 302 to a download URL.
pub(crate) fn redirect(location: String) -> Answer {
    Answer {
        status: StatusCode::FOUND,
        location: Some(location),
        ..ok(Value::Null)
    }
}

/// A plain-text download.
pub(crate) fn plain(text: String) -> Answer {
    Answer {
        text: Some(text),
        ..ok(Value::Null)
    }
}

pub(crate) fn created(body: Value) -> Answer {
    Answer {
        status: StatusCode::CREATED,
        ..ok(body)
    }
}

pub(crate) fn fail(status: StatusCode, message: &str) -> Answer {
    Answer {
        status,
        body: json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": status.as_u16().to_string(),
        }),
        ..ok(Value::Null)
    }
}

/// A failure a test injected with `failNext`: a primary rate limit (`rate_limited`), a
/// secondary one (`retry_after`, GitHub's message for it), or a plain error status.
pub(crate) fn injected(status: u16, rate_limited: bool, retry_after: Option<u64>) -> Answer {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = if rate_limited {
        "API rate limit exceeded for installation."
    } else if retry_after.is_some() {
        "You have exceeded a secondary rate limit. Please wait a few minutes before you try \
         again."
    } else {
        status.canonical_reason().unwrap_or("Injected failure")
    };
    Answer {
        rate_limited,
        retry_after,
        ..fail(status, message)
    }
}

pub(crate) fn not_found() -> Answer {
    fail(StatusCode::NOT_FOUND, "Not Found")
}

/// GitHub's 422 with one validation error.
pub(crate) fn invalid(field: &str, code: &str, message: Option<&str>) -> Answer {
    let mut error = json!({"resource": "PullRequest", "field": field, "code": code});
    if let Some(message) = message {
        error["message"] = json!(message);
    }
    Answer {
        body: json!({"message": "Validation Failed", "errors": [error],
                     "documentation_url": "https://docs.github.com/rest", "status": "422"}),
        ..fail(StatusCode::UNPROCESSABLE_ENTITY, "")
    }
}

/// One page of `items` (GitHub's `per_page`/`page`), with a `Link: rel="next"` when more follow.
pub(crate) fn paged(items: Vec<Value>, query: &BTreeMap<String, String>) -> Answer {
    let per_page = query
        .get("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(DEFAULT_PER_PAGE)
        .clamp(1, MAX_PER_PAGE);
    let page = query
        .get("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let start = (page - 1).saturating_mul(per_page);
    let more = items.len() > start.saturating_add(per_page);
    let chunk: Vec<Value> = items.into_iter().skip(start).take(per_page).collect();
    Answer {
        link: more.then(|| format!("<?per_page={per_page}&page={}>; rel=\"next\"", page + 1)),
        ..ok(Value::Array(chunk))
    }
}
