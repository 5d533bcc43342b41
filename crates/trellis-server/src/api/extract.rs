//! The path and query extractors of the routes: axum's, with a problem answer (`400
//! request.invalid_path` / `request.invalid_query`, JSON like every other error) instead of
//! axum's plain-text rejection.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::problems::bad_request;
use crate::problem::Problem;

/// The query string, deserialized into `T`.
pub(crate) struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(bad_request(
                "request.invalid_query",
                format!("the query string is not valid: {}", rejection.body_text()),
            )),
        }
    }
}

/// The path's parameters, deserialized into `T`.
pub(crate) struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(bad_request(
                "request.invalid_path",
                format!("the path is not valid: {}", rejection.body_text()),
            )),
        }
    }
}
