//! The Server-Sent Events routes. Every data event of a run's stream is an unnamed (`message`)
//! event whose SSE `id` is its cursor, so a browser that reconnects by itself resumes with
//! `Last-Event-ID` and nothing is seen twice or lost; a client that starts afresh passes
//! `?after=CURSOR`. A stream that reached the end of a finished run says `event: end`; a
//! failure mid-stream is one `event: problem` (not `error`, which a browser's `EventSource`
//! would take for a broken connection). Each open stream holds one of the server's bounded
//! stream slots until it ends or its client goes away (503 beyond the bound).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde::{Deserialize, Serialize};
use trellis_runtime::{Cursor, LogFilter, LogLevel, RunListFilter, RuntimeError};
use utoipa::IntoParams;

use super::extract::{Path, Query};
use super::problems::{bad_request, blocking, problem_of, run_id};
use super::state::ApiState;
use crate::problem::Problem;
use crate::schemas::ProblemDoc;
use crate::streams::StreamSlot;

/// A comment line this often keeps proxies and the browser from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How many runs the live list follows (the newest).
const RUN_CHANGES_WINDOW: usize = 500;

type EventStream = Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>;

/// Where a stream resumes: `Last-Event-ID` (the browser's own reconnect) wins over `?after=`.
fn resume_cursor(headers: &HeaderMap, after: Option<&str>) -> Result<Cursor, Problem> {
    let text = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .or(after);
    match text.map(str::trim) {
        None | Some("") => Ok(Cursor::START),
        Some(text) => Cursor::parse(text)
            .map_err(|_| bad_request("cursor.invalid", "not a cursor this server handed out")),
    }
}

/// One data event, with the cursor as its id when it has one.
fn data_event(name: Option<&str>, cursor: Option<Cursor>, value: &impl Serialize) -> Event {
    let mut event = Event::default();
    if let Some(name) = name {
        event = event.event(name);
    }
    if let Some(cursor) = cursor {
        event = event.id(cursor.to_string());
    }
    event
        .json_data(value)
        .unwrap_or_else(|_| Event::default().event("problem").data("{}"))
}

fn problem_event(error: RuntimeError) -> Event {
    data_event(Some("problem"), None, &problem_of(&error))
}

/// The response for `events`, holding `slot` for as long as the client listens; `end` is
/// sent after the last event when the stream ends by itself.
fn respond(events: EventStream, slot: StreamSlot, end: bool) -> Response {
    let tail: EventStream = if end {
        Box::pin(stream::once(async {
            Ok(Event::default().event("end").data("{}"))
        }))
    } else {
        Box::pin(stream::empty())
    };
    let held = events.chain(tail).map(move |event| {
        let _held_until_the_stream_is_dropped = &slot;
        event
    });
    Sse::new(held)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Where a watch stream starts.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AfterQuery {
    /// Start strictly after this cursor (`Last-Event-ID` wins when both are given).
    pub after: Option<String>,
}

/// Which log lines to stream, and from where.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Start strictly after this cursor (`Last-Event-ID` wins when both are given).
    pub after: Option<String>,
    /// Only lines of executions of this node.
    pub node: Option<String>,
    /// Only lines at least this severe: `debug` (all), `info`, `warn` or `error`.
    pub level: Option<String>,
    /// Only lines of this execution: its id, its public reference (`ex-…`) or its node (the
    /// node's one active execution, else its latest).
    pub execution: Option<String>,
    /// With `execution`: end the stream once that execution has settled (`attach`), not when
    /// the run finishes.
    #[serde(default, rename = "untilSettled")]
    #[param(rename = "untilSettled")]
    pub until_settled: bool,
}

/// The run's recorded changes: one unnamed event per change (its data a `WatchUpdate`, its
/// id the cursor), then `end` once the run has finished.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/watch", tag = "events",
    params(("run" = String, Path, description = "run id"), AfterQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "resume after this cursor")),
    responses(
        (status = 200, content_type = "text/event-stream",
         description = "unnamed events whose data is a WatchUpdate and whose id is its cursor; `problem` on failure; `end` last"),
        (status = 400, body = ProblemDoc),
        (status = 404, body = ProblemDoc),
        (status = 503, description = "too many open streams", body = ProblemDoc),
    ),
)]
pub async fn watch(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Query(query): Query<AfterQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let after = resume_cursor(&headers, query.after.as_deref())?;
    let slot = state.slots.take()?;
    let runtime = Arc::clone(&state.runtime);
    let updates = blocking(move || runtime.watch(&run, after)).await?;
    let events = updates.subscribe().map(|item| {
        Ok(match item {
            Ok(update) => data_event(None, Some(update.cursor), &update),
            Err(error) => problem_event(error),
        })
    });
    Ok(respond(Box::pin(events), slot, true))
}

fn level_of(text: Option<&str>) -> Result<Option<LogLevel>, Problem> {
    Ok(match text {
        None | Some("" | "debug") => None,
        Some("info") => Some(LogLevel::Info),
        Some("warn") => Some(LogLevel::Warn),
        Some("error") => Some(LogLevel::Error),
        Some(other) => {
            return Err(bad_request(
                "query.level",
                format!("unknown log level {other:?}: debug, info, warn or error"),
            ));
        }
    })
}

/// The run's log lines: one unnamed event per line (its data a `LogEntry`, its id the
/// cursor), filtered by node, execution and least level, then `end` once the run has finished.
#[utoipa::path(
    get, path = "/api/v1/runs/{run}/logs", tag = "events",
    params(("run" = String, Path, description = "run id"), LogsQuery,
           ("Last-Event-ID" = Option<String>, Header, description = "resume after this cursor")),
    responses(
        (status = 200, content_type = "text/event-stream",
         description = "unnamed events whose data is a LogEntry and whose id is its cursor; `problem` on failure; `end` last"),
        (status = 400, body = ProblemDoc),
        (status = 404, body = ProblemDoc),
        (status = 503, description = "too many open streams", body = ProblemDoc),
    ),
)]
pub async fn logs(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Query(query): Query<LogsQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let after = resume_cursor(&headers, query.after.as_deref())?;
    let min_level = level_of(query.level.as_deref())?;
    let slot = state.slots.take()?;
    let runtime = Arc::clone(&state.runtime);
    let lines = blocking(move || {
        let execution = match query.execution.as_deref().filter(|e| !e.is_empty()) {
            Some(reference) => Some(runtime.resolve_execution(&run, reference)?),
            None => None,
        };
        let filter = LogFilter {
            node: query.node.filter(|node| !node.is_empty()),
            execution,
            min_level,
            until_settled: query.until_settled && execution.is_some(),
        };
        runtime.logs(&run, after, filter)
    })
    .await?;
    let events = lines.subscribe().map(|item| {
        Ok(match item {
            Ok(line) => data_event(None, Some(line.cursor), &line),
            Err(error) => problem_event(error),
        })
    });
    Ok(respond(Box::pin(events), slot, true))
}

/// The live run list: a `run` event (a `RunSummary`) for each of the newest runs when the
/// stream opens, then again whenever one is created or moves. It has no cursor and no end: a
/// client that reconnects gets the window again.
#[utoipa::path(
    get, path = "/api/v1/runs/events", tag = "events",
    responses(
        (status = 200, content_type = "text/event-stream",
         description = "`run` events whose data is a RunSummary; `problem` on failure"),
        (status = 503, description = "too many open streams", body = ProblemDoc),
    ),
)]
pub async fn run_changes(State(state): State<ApiState>) -> Result<Response, Problem> {
    let slot = state.slots.take()?;
    let filter = RunListFilter {
        limit: RUN_CHANGES_WINDOW,
        ..RunListFilter::default()
    };
    let changes = state.runtime.watch_runs(&filter).subscribe().map(|item| {
        Ok(match item {
            Ok(summary) => data_event(Some("run"), None, &summary),
            Err(error) => problem_event(error),
        })
    });
    Ok(respond(Box::pin(changes), slot, false))
}
