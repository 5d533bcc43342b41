//! The loopback HTTP server: routes requests, answers from the script and records everything.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::matching::{Chosen, Matcher};
use crate::record::{Outcome, RecordedRequest};
use crate::request::{RequestView, view};
use crate::resolve::resolve;
use crate::script::{Api, Hang, Script};
use crate::sse::{SseEvent, encode_all};
use crate::{anthropic, openai};

/// Largest request body accepted (Claude Code sends ~90 KB per turn; resumed sessions grow).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// How long `shutdown` waits for open connections before dropping them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Optional behaviour of a server.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Print one line per request to stderr (refusals and unknown endpoints are always printed).
    pub log_requests: bool,
    /// Append every recorded request as one JSON line to this file.
    pub record_path: Option<PathBuf>,
    /// The only key accepted (as `x-api-key` or `Authorization: Bearer`): model and model-list
    /// requests with another key get the provider's 401, as a real provider or gateway does.
    pub api_key: Option<String>,
}

/// A running scripted model server on `127.0.0.1`. Dropping it stops the server.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Shared {
    matcher: Mutex<Matcher>,
    records: Mutex<Vec<RecordedRequest>>,
    recorded: Notify,
    seq: AtomicU64,
    started: Instant,
    stopping: watch::Receiver<bool>,
    options: ServerOptions,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ModelServer {
    /// Starts a server for `script` on an ephemeral loopback port, inside the current Tokio
    /// runtime.
    pub async fn start(script: Script) -> std::io::Result<ModelServer> {
        ModelServer::start_with(script, ServerOptions::default()).await
    }

    /// Like [`ModelServer::start`], with options.
    pub async fn start_with(
        script: Script,
        options: ServerOptions,
    ) -> std::io::Result<ModelServer> {
        ModelServer::start_on(script, options, 0).await
    }

    /// Like [`ModelServer::start_with`], on a fixed port (0 for an ephemeral one).
    pub async fn start_on(
        script: Script,
        options: ServerOptions,
        port: u16,
    ) -> std::io::Result<ModelServer> {
        script
            .validate()
            .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
        let addr = listener.local_addr()?;
        let (stop, stopping) = watch::channel(false);
        let shared = Arc::new(Shared {
            matcher: Mutex::new(Matcher::new(script)),
            records: Mutex::new(Vec::new()),
            recorded: Notify::new(),
            seq: AtomicU64::new(0),
            started: Instant::now(),
            stopping: stopping.clone(),
            options,
        });
        let app = axum::Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(shared.clone());
        let mut until_stop = stopping;
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = until_stop.wait_for(|stop| *stop).await;
            };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                eprintln!("trellis-testkit: model server stopped with error: {error}");
            }
        });
        Ok(ModelServer {
            addr,
            shared,
            stop,
            task: Some(task),
            runtime: None,
        })
    }

    /// Starts a server on its own background runtime, for synchronous tests.
    pub fn start_blocking(script: Script) -> std::io::Result<ModelServer> {
        ModelServer::start_blocking_with(script, ServerOptions::default())
    }

    /// Like [`ModelServer::start_blocking`], with options.
    pub fn start_blocking_with(
        script: Script,
        options: ServerOptions,
    ) -> std::io::Result<ModelServer> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let mut server = runtime.block_on(ModelServer::start_with(script, options))?;
        server.runtime = Some(runtime);
        Ok(server)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the value for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL for an OpenAI-style provider (Codex).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.records).clone()
    }

    /// Model requests (Messages / Responses calls) only.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.filtered(RecordedRequest::is_model_request)
    }

    /// Requests answered by the named conversation.
    pub fn requests_for(&self, conversation: &str) -> Vec<RecordedRequest> {
        self.filtered(|r| r.conversation.as_deref() == Some(conversation))
    }

    /// Model requests the script could not answer.
    pub fn refused(&self) -> Vec<RecordedRequest> {
        self.filtered(|r| matches!(r.outcome, Outcome::Refused(_)))
    }

    /// Turns not yet served, per conversation, in script order.
    pub fn remaining_turns(&self) -> Vec<(String, usize)> {
        lock(&self.shared.matcher).remaining()
    }

    /// True when every scripted turn has been served.
    pub fn script_finished(&self) -> bool {
        self.remaining_turns().iter().all(|(_, left)| *left == 0)
    }

    /// Waits until at least `count` model requests were recorded; false on timeout.
    pub async fn wait_for_model_requests(&self, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.recorded.notified();
            if self.model_requests().len() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.model_requests().len() >= count;
            }
        }
    }

    /// Stops accepting requests, releases hanging requests and waits briefly for connections.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, task).await.is_err() {
                abort.abort();
            }
        }
    }

    fn filtered(&self, keep: impl Fn(&RecordedRequest) -> bool) -> Vec<RecordedRequest> {
        lock(&self.shared.records)
            .iter()
            .filter(|r| keep(r))
            .cloned()
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// What a request is, by method and path (suffix match, so base URLs may carry a prefix).
enum Route {
    Model(Api),
    CountTokens,
    WebSocketUpgrade,
    Models,
    Health,
    Unknown,
}

fn route(method: &Method, path: &str, headers: &HeaderMap) -> Route {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    match (method.as_str(), path.trim_end_matches('/')) {
        (_, _) if upgrade => Route::WebSocketUpgrade,
        ("POST", p) if p.ends_with("/v1/messages/count_tokens") => Route::CountTokens,
        ("POST", p) if p.ends_with("/v1/messages") => Route::Model(Api::Anthropic),
        ("POST", p) if p.ends_with("/v1/responses") => Route::Model(Api::Openai),
        ("GET", p) if p.ends_with("/v1/models") || p.contains("/v1/models/") => Route::Models,
        ("GET" | "HEAD", p) if p.is_empty() || p.ends_with("/api/hello") => Route::Health,
        _ => Route::Unknown,
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let mut headers = BTreeMap::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|joined: &mut String| {
                joined.push_str(", ");
                joined.push_str(&value);
            })
            .or_insert(value);
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .unwrap_or_default();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let mut record = RecordedRequest {
        seq: 0,
        elapsed_ms: 0,
        method: parts.method.to_string(),
        path: path.clone(),
        headers,
        body,
        api: None,
        model: None,
        session: None,
        user_text: String::new(),
        latest_input: String::new(),
        tools: Vec::new(),
        reply_schema: None,
        workdir: None,
        conversation: None,
        turn: None,
        outcome: Outcome::Probe,
    };
    let path_only = parts.uri.path();
    let route = route(&parts.method, path_only, &parts.headers);
    if let (Route::Model(_) | Route::Models, Some(key)) = (&route, &shared.options.api_key)
        && !carries_key(&record.headers, key)
    {
        record.outcome = Outcome::HttpError(401);
        shared.record(record);
        let body = if path_only.ends_with("/v1/messages") {
            anthropic::error_body(401, None, "invalid x-api-key")
        } else {
            openai::error_body(401, Some("invalid_api_key"), "Incorrect API key provided.")
        };
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    }
    match route {
        Route::Model(api) => model_request(&shared, api, record).await,
        Route::CountTokens => {
            let estimate = record.body.to_string().len() / 4;
            shared.record(record);
            axum::Json(json!({"input_tokens": estimate})).into_response()
        }
        Route::WebSocketUpgrade => {
            // 426 makes Codex fall back to HTTP streaming at once (404/405 make it retry).
            shared.record(record);
            let body = openai::error_body(426, None, "WebSockets are not supported; use HTTP");
            (StatusCode::UPGRADE_REQUIRED, axum::Json(body)).into_response()
        }
        Route::Models => {
            shared.record(record);
            axum::Json(models_body()).into_response()
        }
        Route::Health => {
            shared.record(record);
            StatusCode::OK.into_response()
        }
        Route::Unknown => {
            record.outcome = Outcome::Unknown;
            shared.record(record);
            let body = json!({"error": {"type": "not_found_error", "message": "unknown endpoint"}});
            (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
        }
    }
}

/// Whether the request authenticates with `key` the way either provider's clients send it.
fn carries_key(headers: &BTreeMap<String, String>, key: &str) -> bool {
    headers.get("x-api-key").is_some_and(|given| given == key)
        || headers
            .get("authorization")
            .is_some_and(|given| given.strip_prefix("Bearer ") == Some(key))
}

fn models_body() -> Value {
    let entry = |id: &str| {
        json!({"id": id, "object": "model", "type": "model", "display_name": id,
               "created": 0, "created_at": "1970-01-01T00:00:00Z", "owned_by": "trellis-testkit"})
    };
    let data = vec![entry("trellis-scripted")];
    json!({"object": "list", "data": data, "models": [], "has_more": false,
           "first_id": "trellis-scripted", "last_id": "trellis-scripted"})
}

async fn model_request(shared: &Shared, api: Api, mut record: RecordedRequest) -> Response {
    if !record.body.is_object() {
        return shared.refuse(api, record, "the request body is not a JSON object".into());
    }
    let view = view(api, &record.headers, &record.body);
    fill_record(&mut record, api, &view);
    let chosen = lock(&shared.matcher).choose(api, &view);
    let Chosen {
        conversation,
        index,
        turn,
    } = match chosen {
        Ok(chosen) => chosen,
        Err(none) => {
            record.conversation = none.conversation;
            return shared.refuse(api, record, none.reason);
        }
    };
    record.conversation = Some(conversation);
    record.turn = Some(index);
    if let Some(delay) = turn.delay_ms {
        let mut stopping = shared.stopping.clone();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay)) => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
    }
    let model = view.model.clone().unwrap_or_default();
    let outputs = match (&turn.reply, &turn.http_error, turn.hang) {
        (_, Some(error), _) => {
            record.outcome = Outcome::HttpError(error.status);
            shared.record(record);
            let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::BAD_REQUEST);
            let body = match api {
                Api::Anthropic => {
                    anthropic::error_body(error.status, error.error_type.as_deref(), &error.message)
                }
                Api::Openai => {
                    openai::error_body(error.status, error.error_type.as_deref(), &error.message)
                }
            };
            return (status, axum::Json(body)).into_response();
        }
        (_, None, Some(hang)) => {
            record.outcome = Outcome::Hung;
            let seq = shared.record(record);
            return hang_response(shared, api, hang, seq, &model).await;
        }
        (Some(blocks), None, None) => match resolve(api, blocks, &view) {
            Ok(outputs) => outputs,
            Err(reason) => return shared.refuse(api, record, reason),
        },
        (None, None, None) => return shared.refuse(api, record, "empty turn".into()),
    };
    record.outcome = Outcome::Replied;
    let seq = shared.record(record);
    let events_or_whole = match api {
        Api::Anthropic => {
            let reply = anthropic::Reply {
                seq,
                model: &model,
                outputs: &outputs,
                usage: turn.usage,
            };
            if view.stream {
                Ok(reply.events())
            } else {
                Err(reply.message())
            }
        }
        Api::Openai => {
            let reply = openai::Reply {
                seq,
                model: &model,
                outputs: &outputs,
                usage: turn.usage,
                created_at: now_secs(),
            };
            if view.stream {
                Ok(reply.events())
            } else {
                Err(reply.whole())
            }
        }
    };
    match events_or_whole {
        Ok(events) => sse_response(Body::from(encode_all(&events))),
        Err(whole) => axum::Json(whole).into_response(),
    }
}

fn fill_record(record: &mut RecordedRequest, api: Api, view: &RequestView) {
    record.api = Some(api);
    record.model = view.model.clone();
    record.session = view.session.clone();
    record.user_text = view.user_text.clone();
    record.latest_input = view.latest_input.clone();
    record.tools = view.tools.clone();
    record.reply_schema = view.reply_schema.clone();
    record.workdir = view.workdir.clone();
}

async fn hang_response(shared: &Shared, api: Api, hang: Hang, seq: u64, model: &str) -> Response {
    let mut stopping = shared.stopping.clone();
    match hang {
        Hang::NoResponse => {
            let _ = stopping.wait_for(|stop| *stop).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Hang::MidStream => {
            let opening: Vec<SseEvent> = match api {
                Api::Anthropic => anthropic::Reply {
                    seq,
                    model,
                    outputs: &[],
                    usage: Default::default(),
                }
                .opening(),
                Api::Openai => openai::Reply {
                    seq,
                    model,
                    outputs: &[],
                    usage: Default::default(),
                    created_at: now_secs(),
                }
                .opening(),
            };
            let first = futures_util::stream::iter([Ok::<Bytes, Infallible>(Bytes::from(
                encode_all(&opening),
            ))]);
            let rest = futures_util::stream::once(async move {
                let _ = stopping.wait_for(|stop| *stop).await;
                Ok(Bytes::new())
            });
            sse_response(Body::from_stream(first.chain(rest)))
        }
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

impl Shared {
    /// Stores a record (assigning its sequence number) and returns that number.
    fn record(&self, mut record: RecordedRequest) -> u64 {
        record.elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut records = lock(&self.records);
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        record.seq = seq;
        let loud = matches!(record.outcome, Outcome::Refused(_) | Outcome::Unknown);
        if self.options.log_requests || loud {
            eprintln!("trellis-testkit: {}", record.summary());
        }
        if let Some(path) = &self.options.record_path {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| {
                    let line = serde_json::to_string(&record).map_err(std::io::Error::other)?;
                    writeln!(file, "{line}")
                });
            if let Err(error) = appended {
                eprintln!(
                    "trellis-testkit: cannot append to {}: {error}",
                    path.display()
                );
            }
        }
        records.push(record);
        drop(records);
        self.recorded.notify_waiters();
        seq
    }

    fn refuse(&self, api: Api, mut record: RecordedRequest, reason: String) -> Response {
        let message = format!("trellis-testkit script: {reason}");
        record.outcome = Outcome::Refused(reason);
        self.record(record);
        let body = match api {
            Api::Anthropic => anthropic::error_body(400, None, &message),
            Api::Openai => openai::error_body(400, None, &message),
        };
        (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
    }
}
