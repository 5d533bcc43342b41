//! The Server-Sent Events routes. Every event of a run's stream carries its cursor as the SSE
//! `id`, so a browser that reconnects by itself resumes with `Last-Event-ID`; a client that
//! starts afresh passes `?after=CURSOR`. A stream that reached the end of a finished run says
//! `event: end`; a failure mid-stream is one `event: problem`. Each open stream holds one of
//! the server's bounded stream slots until it ends or its client goes away.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde::{Deserialize, Serialize};
use trellis_runtime::{Cursor, LogFilter, LogLevel, RunListFilter, RuntimeError};

use super::{ApiState, blocking, run_id, runtime_problem};
use crate::problem::Problem;
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
        Some(text) => Cursor::parse(text).map_err(|_| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "cursor.invalid",
                "not a cursor this server handed out",
            )
        }),
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
    data_event(Some("problem"), None, &runtime_problem(error))
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

#[derive(Debug, Deserialize)]
pub(super) struct StreamQuery {
    after: Option<String>,
    node: Option<String>,
    level: Option<String>,
    execution: Option<u64>,
}

/// `GET /runs/{run}/watch`: one event per recorded change of the run (`WatchUpdate`).
pub(super) async fn watch(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Query(query): Query<StreamQuery>,
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
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "query.level",
                format!("unknown log level {other:?}: debug, info, warn or error"),
            ));
        }
    })
}

/// `GET /runs/{run}/logs`: the run's log lines (`LogEntry`), filtered by node, execution and
/// least level.
pub(super) async fn logs(
    State(state): State<ApiState>,
    Path(run): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let run = run_id(&run)?;
    let after = resume_cursor(&headers, query.after.as_deref())?;
    let filter = LogFilter {
        node: query.node.filter(|node| !node.is_empty()),
        execution: query.execution,
        min_level: level_of(query.level.as_deref())?,
    };
    let slot = state.slots.take()?;
    let runtime = Arc::clone(&state.runtime);
    let lines = blocking(move || runtime.logs(&run, after, filter)).await?;
    let events = lines.subscribe().map(|item| {
        Ok(match item {
            Ok(line) => data_event(None, Some(line.cursor), &line),
            Err(error) => problem_event(error),
        })
    });
    Ok(respond(Box::pin(events), slot, true))
}

/// `GET /runs/events`: a `run` event (`RunSummary`) for each of the newest runs when the
/// stream opens, then again whenever one is created or moves. It has no cursor: a client that
/// reconnects gets the window again.
pub(super) async fn run_changes(State(state): State<ApiState>) -> Result<Response, Problem> {
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
