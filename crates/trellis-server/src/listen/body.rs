//! The request body, read whole (up to the size limit, within the body timeout) before any
//! handler runs, and only for a request the access policy already let through: a slow or
//! oversized body gets a problem answer and its connection closed.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::problem::Problem;

/// The largest request body accepted: a graph document at its parse limit plus its envelope.
pub const MAX_BODY_BYTES: usize = trellis_graph::limits::MAX_DOCUMENT_BYTES + 64 * 1024;

/// Default: how long a request body may take to arrive.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request body may take and how large it may be, per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    pub timeout: Duration,
    pub max_bytes: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_BODY_TIMEOUT,
            max_bytes: MAX_BODY_BYTES,
        }
    }
}

/// Middleware: reads the body under the limits the connection carries (the defaults when the
/// app is called without a listener, as in tests), then hands the request on with it.
pub async fn read_body(request: Request, next: Next) -> Response {
    let limits = request
        .extensions()
        .get::<Arc<BodyLimits>>()
        .map_or_else(BodyLimits::default, |limits| **limits);
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_bytes as u64) {
        return closing(too_large(limits.max_bytes));
    }
    let read = Limited::new(body, limits.max_bytes).collect();
    let bytes = match tokio::time::timeout(limits.timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<LengthLimitError>() => {
            return closing(too_large(limits.max_bytes));
        }
        Ok(Err(_)) => {
            return closing(Problem::new(
                StatusCode::BAD_REQUEST,
                "request.body_unreadable",
                "the request body could not be read",
            ));
        }
        Err(_) => {
            return closing(Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request.body_timeout",
                format!(
                    "the request body did not arrive within {} s",
                    limits.timeout.as_secs_f64()
                ),
            ));
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn too_large(max_bytes: usize) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request.too_large",
        format!("the request body is larger than {max_bytes} bytes"),
    )
}

/// A problem answer after which the connection is closed (its unread body makes it unusable).
pub(crate) fn closing(problem: Problem) -> Response {
    let mut response = problem.into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
