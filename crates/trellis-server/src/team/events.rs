//! The event streams of the team API as Server-Sent Events: `watch` (one `update` event per
//! status change) and `logs` (one `log` event per line). Each event's `id` is its cursor, so a
//! client that lost the connection resumes with `Last-Event-ID` (or `?after=CURSOR`) and sees
//! nothing twice and nothing lost. A stream ends with an `end` event once the run has finished
//! and everything was sent; open streams are bounded (503 beyond the bound).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use trellis_runtime::{Cursor, LogFilter, LogLevel, RuntimeError, Subscription, parse_run_id};
use utoipa::IntoParams;

use super::openapi::ProblemDoc;
use super::{TeamState, blocking, problem_of};
use crate::problem::Problem;
use crate::streams::StreamSlot;

/// How often an idle stream sends a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Where to start a stream.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AfterQuery {
    /// Start strictly after this cursor (`Last-Event-ID` wins when both are given).
    pub after: Option<String>,
}

/// Which log lines to stream.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Start strictly after this cursor (`Last-Event-ID` wins when both are given).
    pub after: Option<String>,
    /// Only lines of executions of this node.
    pub node: Option<String>,
    /// Only lines of this execution id.
    pub execution: Option<u64>,
    /// Only lines at least this severe: `error`, `warn`, `info` or `debug`.
    pub level: Option<String>,
}

fn start_cursor(headers: &HeaderMap, after: Option<&str>) -> Result<Cursor, Problem> {
    let resumed = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok());
    match resumed.or(after) {
        None => Ok(Cursor::START),
        Some(text) => Cursor::parse(text.trim()).map_err(|error| {
            Problem::new(StatusCode::BAD_REQUEST, "cursor.invalid", error.to_string())
        }),
    }
}

/// The SSE answer of a subscription: `kind` events with the item's cursor as id, an `error`
/// event (a problem) if the stream fails, and `end` when it is done.
fn sse_of<T, F>(
    subscription: Subscription<T>,
    slot: StreamSlot,
    kind: &'static str,
    cursor_of: F,
) -> Response
where
    T: Serialize + Send + 'static,
    F: Fn(&T) -> Cursor + Send + 'static,
{
    let items = subscription.map(move |item| {
        let event = match item {
            Ok(item) => Event::default()
                .event(kind)
                .id(cursor_of(&item).to_string())
                .json_data(&item),
            Err(error) => Event::default()
                .event("error")
                .json_data(problem_of(&error)),
        };
        Ok::<_, Infallible>(event.unwrap_or_else(|_| Event::default().event("error")))
    });
    // The slot lives as long as the stream: dropped with it when the client goes away.
    let end = stream::once(async move {
        drop(slot);
        Ok::<_, Infallible>(Event::default().event("end").data("{}"))
    });
    let events: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(items.chain(end));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The run's status changes as `update` events (a WatchUpdate each), then `end`.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/watch", tag = "events",
    params(("run" = String, Path, description = "run id"), AfterQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "resume after this cursor")),
    responses(
        (status = 200, content_type = "text/event-stream",
         description = "`update` events whose data is a WatchUpdate and whose id is its cursor; `end` last"),
        (status = 404, body = ProblemDoc),
        (status = 503, description = "too many open streams", body = ProblemDoc),
    ),
)]
pub async fn watch(
    State(state): State<TeamState>,
    Path(run): Path<String>,
    Query(query): Query<AfterQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = parse_run_id(&run).map_err(|error| problem_of(&error))?;
    let after = start_cursor(&headers, query.after.as_deref())?;
    let slot = state.streams.take()?;
    let runtime = state.runtime.clone();
    let subscription = blocking(move || Ok(runtime.watch(&run, after)?.subscribe())).await?;
    Ok(sse_of(subscription, slot, "update", |update| update.cursor))
}

/// The run's log lines as `log` events (a LogEntry each), then `end`.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/logs", tag = "events",
    params(("run" = String, Path, description = "run id"), LogsQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "resume after this cursor")),
    responses(
        (status = 200, content_type = "text/event-stream",
         description = "`log` events whose data is a LogEntry and whose id is its cursor; `end` last"),
        (status = 404, body = ProblemDoc),
        (status = 503, description = "too many open streams", body = ProblemDoc),
    ),
)]
pub async fn logs(
    State(state): State<TeamState>,
    Path(run): Path<String>,
    Query(query): Query<LogsQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = parse_run_id(&run).map_err(|error| problem_of(&error))?;
    let after = start_cursor(&headers, query.after.as_deref())?;
    let min_level = match query.level.as_deref() {
        None => None,
        Some("error") => Some(LogLevel::Error),
        Some("warn") => Some(LogLevel::Warn),
        Some("info") => Some(LogLevel::Info),
        Some("debug") => Some(LogLevel::Debug),
        Some(_) => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "request.invalid",
                "`level` is error, warn, info or debug",
            ));
        }
    };
    let filter = LogFilter {
        node: query.node,
        execution: query.execution,
        min_level,
    };
    let slot = state.streams.take()?;
    let runtime = state.runtime.clone();
    let subscription: Subscription<_> =
        blocking(move || Ok::<_, RuntimeError>(runtime.logs(&run, after, filter)?.subscribe()))
            .await?;
    Ok(sse_of(subscription, slot, "log", |entry| entry.cursor))
}
