//! The team API (`trellis serve`) as a client meets it, on a real runtime with runs driven
//! in-process: bearer tokens, submit (idempotent on its key), list, status, graph, execution,
//! watch and logs as SSE resumable by cursor, problems, and the OpenAPI document checked
//! against real answers.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};

const TOKEN: &str = "trellis_canary_6f1d2c3b4a5968778695a4b3c2d1e0f1";

mod support;

use support::TeamServer as Server;

fn server() -> Server {
    Server::new(TOKEN)
}

fn authorized(method: &str, path: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
}

use support::Answer;

trait JsonAnswer {
    fn json(&self) -> Value;
}

impl JsonAnswer for Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

async fn send(server: &Server, request: Request<Body>) -> Answer {
    let answer = support::exchange(&server.app, request).await;
    assert!(
        !answer.text.contains(TOKEN),
        "the token leaked into an answer"
    );
    answer
}

async fn get(server: &Server, path: &str) -> Answer {
    send(
        server,
        authorized("GET", path)
            .body(Body::empty())
            .expect("request"),
    )
    .await
}

async fn post(server: &Server, path: &str, body: Value) -> Answer {
    send(
        server,
        authorized("POST", path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .expect("request"),
    )
    .await
}

fn record(fields: &[&str]) -> Value {
    let fields: serde_json::Map<String, Value> = fields
        .iter()
        .map(|name| {
            (
                (*name).to_owned(),
                json!({"type": {"kind": "integer"}, "required": true}),
            )
        })
        .collect();
    json!({"kind": "record", "fields": fields})
}

/// `double` (a command step) writes `result`, then the run succeeds with `{result}`.
fn doubling_graph() -> Value {
    let state = json!({"kind": "record", "fields": {
        "value": {"type": {"kind": "integer"}, "required": true},
        "result": {"type": {"kind": "integer"}, "required": false},
    }});
    json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": state,
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [], "children": [
            {"kind": "step", "name": "double", "worker": "command.double@1",
             "input": record(&["value"]), "output": record(&["result"]),
             "inputBindings": [{"target": ["value"], "value": {"source": "state", "path": ["value"]}}],
             "writeBindings": [{"target": ["result"], "value": {"node": "double", "channel": "out", "path": ["result"]}}],
             "timeoutMs": 60000, "attempts": 1},
            {"kind": "choice", "name": "route", "state": state, "promotedStatePaths": [],
             "branches": [{"when": {"kind": "in", "value": {"name": "double", "source": "error", "field": null},
                                    "labels": ["timeout", "crash", "malformed", "refusal"]},
                           "node": {"kind": "fail", "name": "failed", "reason": "worker_failed"}}],
             "otherwise": {"kind": "succeed", "name": "done", "output": record(&["result"]),
                           "bindings": [{"target": ["result"], "value": {"source": "state", "path": ["result"]}}]}},
        ]},
    })
}

/// A command that logs one line and doubles `value` (read with Python's JSON parser).
fn doubling_plan() -> Value {
    let script = "import json,sys; r=json.load(sys.stdin); print('doubling', file=sys.stderr); \
                  print(json.dumps({'output': {'result': r['input']['value'] * 2}}))";
    json!({"kind": "command", "command": ["python3", "-c", script]})
}

fn submission(key: &str, value: i64) -> Value {
    json!({
        "submissionKey": key,
        "title": format!("double {value}"),
        "graph": doubling_graph(),
        "input": {"value": value},
        "plan": {"uniform": doubling_plan()},
    })
}

#[tokio::test]
async fn requests_without_an_accepted_bearer_token_are_refused() {
    let server = server();
    let cases = [
        (None, "unauthenticated"),
        (Some("Bearer wrong"), "bad_token"),
        (Some("Basic dHJlbGxpczp4"), "bad_token"),
        (Some(&format!("Bearer {TOKEN}x")[..]), "bad_token"),
        (Some("Bearer "), "bad_token"),
    ];
    for (authorization, code) in cases {
        let mut request = Request::builder().uri("/api/v1/runs");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let answer = send(&server, request.body(Body::empty()).expect("request")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(answer.json()["code"], code, "{authorization:?}");
        assert_eq!(answer.headers[header::WWW_AUTHENTICATE], "Bearer");
    }
    // A second Authorization header is refused even when one of them is right.
    let request = Request::builder()
        .uri("/api/v1/runs")
        .header(header::AUTHORIZATION, "Bearer wrong")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    assert_eq!(
        send(&server, request).await.status,
        StatusCode::UNAUTHORIZED
    );
    // The scheme is case-insensitive, as HTTP says.
    let request = Request::builder()
        .uri("/api/v1/runs")
        .header(header::AUTHORIZATION, format!("bearer {TOKEN}"))
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&server, request).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_submitted_run_is_listed_read_and_idempotent_on_its_key() {
    let server = server();
    let first = post(&server, "/api/v1/runs", submission("key-a", 21)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let run = first.json()["runId"].as_str().expect("run id").to_owned();
    assert_eq!(first.json()["created"], true);

    let again = post(&server, "/api/v1/runs", submission("key-a", 21)).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.json()["runId"], run.as_str());
    assert_eq!(again.json()["created"], false);

    let conflict = post(&server, "/api/v1/runs", submission("key-a", 22)).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.text);
    assert_eq!(conflict.json()["code"], "submission.conflict");

    let status = get(&server, &format!("/api/v1/runs/{run}")).await;
    assert_eq!(status.status, StatusCode::OK);
    let status = status.json();
    assert_eq!(status["status"]["phase"], "finished");
    assert_eq!(status["status"]["terminalResult"]["status"], "succeeded");
    assert_eq!(
        status["status"]["terminalResult"]["output"],
        json!({"result": 42})
    );
    assert_eq!(status["executions"][0]["node"], "double");

    let list = get(&server, "/api/v1/runs?phase=finished&q=DOUBLE")
        .await
        .json();
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(1));
    assert_eq!(list["runs"][0]["runId"], run.as_str());
    let none = get(&server, "/api/v1/runs?phase=running").await.json();
    assert_eq!(none["runs"], json!([]));

    let graph = get(&server, &format!("/api/v1/runs/{run}/graph")).await;
    assert_eq!(graph.json()["kind"], "graphspec");
    let execution = get(&server, &format!("/api/v1/runs/{run}/executions/1")).await;
    assert_eq!(execution.status, StatusCode::OK, "{}", execution.text);
    assert_eq!(execution.json()["input"], json!({"value": 21}));
    assert_eq!(execution.json()["binding"]["kind"], "command");
}

#[tokio::test]
async fn refusals_are_problems_with_stable_codes() {
    let server = server();
    let cases = [
        (
            post(&server, "/api/v1/runs", json!({"graph": {"profile": 1}})).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "admission.invalid_graph",
        ),
        (
            post(&server, "/api/v1/runs", json!({"nonsense": true})).await,
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            post(
                &server,
                "/api/v1/runs",
                json!({"template": {"name": "no-such-template"}}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "admission.unknown_template",
        ),
        (
            post(
                &server,
                "/api/v1/runs",
                json!({"graph": doubling_graph(), "workspace": "../escape"}),
            )
            .await,
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            get(&server, "/api/v1/runs/-not-a-run").await,
            StatusCode::BAD_REQUEST,
            "run.invalid_id",
        ),
        (
            get(&server, "/api/v1/runs/01900000-0000-7000-8000-000000000000").await,
            StatusCode::NOT_FOUND,
            "run.not_found",
        ),
        (
            get(&server, "/api/v1/runs?phase=sleeping").await,
            StatusCode::BAD_REQUEST,
            "query.status",
        ),
        (
            post(&server, "/api/v1/runs", {
                let mut body = submission("bad-environment", 1);
                body["environment"] = json!({"setup": [{"name": "x", "run": ""}]});
                body
            })
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "runtime.invalid_environment",
        ),
        (
            post(&server, "/api/v1/runs/requirements", {
                let mut body = submission("bad-environment", 1);
                body["environment"] = json!({"startup": "not a list"});
                body
            })
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "runtime.invalid_environment",
        ),
        (
            post(&server, "/api/v1/runs", {
                let mut body = submission("both-environments", 1);
                body["environment"] = json!({});
                body["noEnvironment"] = json!(true);
                body
            })
            .await,
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
    ];
    for (answer, status, code) in cases {
        assert_eq!(answer.status, status, "{}", answer.text);
        assert_eq!(answer.json()["code"], code, "{}", answer.text);
        assert!(answer.json()["message"].is_string());
    }
}

/// The `(event, id, data)` triples of a finished SSE body (`message` for an unnamed event).
fn sse_events(text: &str) -> Vec<(String, Option<String>, Value)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .filter_map(|block| {
            let mut event = Some("message".to_owned());
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    event = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("id:") {
                    id = Some(value.trim().to_owned());
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim());
                }
            }
            Some((event?, id, serde_json::from_str(&data).ok()?))
        })
        .collect()
}

#[tokio::test]
async fn watch_and_logs_stream_events_with_cursor_ids_and_resume_after_one() {
    let server = server();
    let run = post(&server, "/api/v1/runs", submission("key-w", 5))
        .await
        .json()["runId"]
        .as_str()
        .expect("run id")
        .to_owned();

    let whole = get(&server, &format!("/api/v1/runs/{run}/watch")).await;
    assert_eq!(whole.status, StatusCode::OK);
    assert!(
        whole.headers[header::CONTENT_TYPE]
            .to_str()
            .is_ok_and(|t| t.starts_with("text/event-stream"))
    );
    let events = sse_events(&whole.text);
    let updates: Vec<_> = events.iter().filter(|(e, ..)| e == "message").collect();
    assert!(updates.len() >= 3, "{}", whole.text);
    assert_eq!(events.last().map(|(e, ..)| e.as_str()), Some("end"));
    for (_, id, data) in &updates {
        assert_eq!(id.as_deref(), data["cursor"].as_str());
    }
    assert_eq!(
        updates.last().map(|(_, _, d)| d["event"].clone()),
        Some(json!("terminal"))
    );

    // Resuming after the first update (Last-Event-ID, as a browser does) skips exactly it.
    let first_id = updates[0].1.clone().expect("id");
    let resumed = send(
        &server,
        authorized("GET", &format!("/api/v1/runs/{run}/watch"))
            .header("last-event-id", &first_id)
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    let resumed: Vec<_> = sse_events(&resumed.text)
        .into_iter()
        .filter(|(e, ..)| e == "message")
        .map(|(_, id, _)| id)
        .collect();
    let expected: Vec<_> = updates[1..].iter().map(|(_, id, _)| id.clone()).collect();
    assert_eq!(resumed, expected);
    let by_query = get(
        &server,
        &format!("/api/v1/runs/{run}/watch?after={first_id}"),
    )
    .await;
    assert_eq!(sse_events(&by_query.text).len(), expected.len() + 1);

    let logs = get(&server, &format!("/api/v1/runs/{run}/logs?node=double")).await;
    let lines: Vec<_> = sse_events(&logs.text)
        .into_iter()
        .filter(|(e, ..)| e == "message")
        .collect();
    assert!(
        lines
            .iter()
            .any(|(_, _, d)| d["record"]["message"] == "doubling"),
        "{}",
        logs.text
    );
    let bad = get(&server, &format!("/api/v1/runs/{run}/watch?after=c9:zz")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["code"], "cursor.invalid");
}

/// The keys of `value` not declared by the schema named `name`, and its required keys missing.
fn schema_mismatch(document: &Value, name: &str, value: &Value) -> (Vec<String>, Vec<String>) {
    let schema = &document["components"]["schemas"][name];
    let properties = schema["properties"].as_object().expect("properties");
    let object = value.as_object().expect("an object answer");
    let undeclared = object
        .keys()
        .filter(|key| !properties.contains_key(*key))
        .cloned()
        .collect();
    let missing = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|key| !object.contains_key(*key))
        .map(str::to_owned)
        .collect();
    (undeclared, missing)
}

#[tokio::test]
async fn the_health_check_answers_without_a_token() {
    let server = server();
    let answer = send(
        &server,
        Request::builder()
            .uri("/healthz")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.json()["status"], "ok");
    assert_eq!(answer.json()["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn the_openapi_document_is_public_and_matches_real_answers() {
    let server = server();
    let answer = send(
        &server,
        Request::builder()
            .uri("/openapi.json")
            .body(Body::empty())
            .expect("request"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let document = answer.json();
    assert!(
        document["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3."))
    );
    assert_eq!(document["security"], json!([{"bearer": []}]));
    for (path, method) in [
        ("/api/v1/runs", "post"),
        ("/api/v1/runs", "get"),
        ("/api/v1/runs/{run}", "get"),
        ("/api/v1/runs/{run}/graph", "get"),
        ("/api/v1/runs/{run}/executions/{execution}", "get"),
        ("/api/v1/runs/{run}/watch", "get"),
        ("/api/v1/runs/{run}/logs", "get"),
        ("/api/v1/runs/{run}/force-stop", "post"),
        ("/api/v1/runs/{run}/resume", "post"),
        ("/api/v1/runs/{run}/checkpoints", "get"),
        ("/api/v1/runs/{run}/discard-workspace", "post"),
        ("/api/v1/prune", "post"),
        ("/api/v1/runs/events", "get"),
        ("/api/v1/validate", "post"),
        ("/api/v1/templates", "get"),
        ("/api/v1/templates/{name}", "get"),
        ("/api/v1/runs/{run}/executions/{execution}/workspace", "get"),
        ("/api/v1/runs/{run}/executions/{execution}/result", "put"),
    ] {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    // Every `$ref` names a declared component.
    let text = document.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap_or("");
        assert!(
            document["components"]["schemas"][name].is_object(),
            "{name} is referenced but not declared"
        );
    }

    // The declared answers are the real ones, field for field.
    let run = post(&server, "/api/v1/runs", submission("key-o", 2))
        .await
        .json()["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    let status = get(&server, &format!("/api/v1/runs/{run}")).await.json();
    let list = get(&server, "/api/v1/runs").await.json();
    let detail = get(&server, &format!("/api/v1/runs/{run}/executions/1"))
        .await
        .json();
    let graph = get(&server, &format!("/api/v1/runs/{run}/graph"))
        .await
        .json();
    let problem = get(&server, "/api/v1/runs/-nope").await.json();
    let checkpoints = get(&server, &format!("/api/v1/runs/{run}/checkpoints"))
        .await
        .json();
    let watch = get(&server, &format!("/api/v1/runs/{run}/watch")).await;
    let update = sse_events(&watch.text)
        .into_iter()
        .find(|(e, ..)| e == "message")
        .map(|(_, _, data)| data)
        .expect("an update");
    let checks = [
        ("RunStatus", &status),
        ("RunSummary", &list["runs"][0]),
        ("ExecutionSummary", &status["executions"][0]),
        ("ExecutionDetail", &detail),
        ("TokenUsage", &status["tokenUsage"]),
        ("PhaseStatus", &status["status"]),
        ("RunGraph", &graph),
        ("WatchUpdate", &update),
        ("WatchStatus", &update["status"]),
        ("WatchCounts", &update["counts"]),
        ("Problem", &problem),
        ("CheckpointPage", &checkpoints),
    ];
    for (name, value) in checks {
        let (undeclared, missing) = schema_mismatch(&document, name, value);
        assert!(undeclared.is_empty(), "{name}: undeclared {undeclared:?}");
        assert!(
            missing.is_empty(),
            "{name}: required but absent {missing:?}"
        );
    }
}

#[tokio::test]
async fn the_team_server_mounts_the_same_routes_as_the_web_ui() {
    let server = server();
    let templates = get(&server, "/api/v1/templates").await;
    assert_eq!(templates.status, StatusCode::OK, "{}", templates.text);
    assert!(
        templates
            .json()
            .as_array()
            .is_some_and(|list| list.iter().any(|t| t["name"] == "software-change")),
        "{}",
        templates.text
    );
    let report = post(
        &server,
        "/api/v1/validate",
        json!({"document": doubling_graph()}),
    )
    .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.text);
    assert_eq!(report.json()["status"], "verified", "{}", report.text);
    // The list takes the web UI's outcome words as well as phases.
    let run = post(&server, "/api/v1/runs", submission("key-u", 3))
        .await
        .json()["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    let succeeded = get(&server, "/api/v1/runs?status=succeeded").await.json();
    assert_eq!(succeeded["runs"][0]["runId"], json!(run));
    let failed = get(&server, "/api/v1/runs?status=failed").await.json();
    assert_eq!(failed["runs"], json!([]));
}

#[tokio::test]
async fn checkpoints_discarding_and_resume_options_are_routes_too() {
    let server = server();
    let run = post(&server, "/api/v1/runs", submission("key-w", 2))
        .await
        .json()["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    // The run worked in place in a directory outside git: no checkpoints, no worktree kept.
    let page = get(&server, &format!("/api/v1/runs/{run}/checkpoints?limit=5")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert_eq!(page.json(), json!({"runId": run, "checkpoints": []}));
    let unknown = get(
        &server,
        "/api/v1/runs/01a23456-0000-7000-8000-000000000000/checkpoints",
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    let discard = post(
        &server,
        &format!("/api/v1/runs/{run}/discard-workspace"),
        json!({}),
    )
    .await;
    assert_eq!(discard.status, StatusCode::CONFLICT, "{}", discard.text);
    assert_eq!(discard.json()["code"], "run.no_retained_workspace");

    // Resume reads its own options and refuses any other field.
    let path = format!("/api/v1/runs/{run}/resume");
    let unknown_option = post(&server, &path, json!({"fromCheckpiont": 1})).await;
    assert_eq!(unknown_option.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown_option.json()["code"], "request.invalid");
    let succeeded = post(&server, &path, json!({"fromCheckpoint": 1, "force": true})).await;
    assert_eq!(succeeded.status, StatusCode::CONFLICT, "{}", succeeded.text);
    assert_eq!(succeeded.json()["code"], "run.nothing_to_resume");
}
