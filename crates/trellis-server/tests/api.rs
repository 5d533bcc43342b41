//! The run API over HTTP as a page meets it, against a real runtime on a temporary home: JSON
//! reads of a finished run, SSE streams resumed by cursor (`Last-Event-ID` and `?after=`), the
//! control actions behind the page token, validation, templates, bounded streams, and no
//! secret value in any answer (a canary run in a child process whose environment holds it).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use trellis_runtime::{
    AdmitRequest, ConfigSource, GraphSource, InputSource, PlanSource, RunId, Runtime,
    RuntimeOptions, StartMode, SubmitOptions,
};
use trellis_server::{
    AccessPolicy, ApiState, LaunchSecrets, LocalPage, PageToken, StreamSlots, TOKEN_HEADER, app,
    routes,
};

const TOKEN: &str = "fedcba9876543210fedcba9876543210";
const HOST: &str = "127.0.0.1:4173";
const SESSION: &str = "00112233445566778899aabbccddeeff";

/// The session cookie the server's one-time launch link would have set.
fn cookie() -> String {
    format!("trellis_ui_4173={SESSION}")
}
const CANARY_VARIABLE: &str = "TRELLIS_UI_CANARY_SECRET";

fn nothing() -> Value {
    json!({"kind": "null"})
}

fn step(name: &str) -> Value {
    json!({"kind": "step", "name": name, "worker": format!("command.{name}@1"),
           "input": nothing(), "output": nothing(), "inputBindings": [], "writeBindings": [],
           "timeoutMs": 60_000, "attempts": 1})
}

/// `root = seq[first, second, done]`.
fn two_steps() -> Value {
    json!({
        "profile": "openengine.graph.full/v1",
        "initialInput": nothing(),
        "policy": {"policy": "policy.strict@1", "default": "deny"},
        "root": {"kind": "seq", "name": "root", "state": nothing(), "promotedStatePaths": [],
                 "children": [step("first"), step("second"),
                              {"kind": "succeed", "name": "done", "output": nothing(),
                               "bindings": []}]},
    })
}

/// A worker that names its node on stderr and replies `null`; with `secret`, the binding is
/// handed the canary variable and the worker prints its value too.
fn plan(secret: bool) -> Value {
    if secret {
        json!({"kind": "command", "connections": [CANARY_VARIABLE], "command": ["sh", "-c",
            format!("cat >/dev/null; echo \"working on $TRELLIS_NODE\" >&2; \
                     echo \"secret ${{{CANARY_VARIABLE}:-none}}\" >&2; echo '{{\"output\":null}}'")]})
    } else {
        json!({"kind": "command", "command": ["sh", "-c",
            "cat >/dev/null; echo \"working on $TRELLIS_NODE\" >&2; echo '{\"output\":null}'"]})
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: Arc<Runtime>,
    run: RunId,
}

/// A runtime on a fresh home with one finished run of [`two_steps`], driven to its end on a
/// thread of its own (an in-process run starts its own async runtime).
fn finished_run() -> Fixture {
    std::thread::spawn(|| drive_run(false))
        .join()
        .expect("the run was driven")
}

fn drive_run(secret: bool) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(dir.path().join("home")),
        ..RuntimeOptions::default()
    })
    .expect("runtime");
    let admitted = runtime
        .admit(AdmitRequest {
            graph: GraphSource::Document(two_steps()),
            input: InputSource::Default,
            plan: PlanSource::Uniform(ConfigSource::Document(plan(secret))),
            workspace: Some(dir.path().to_path_buf()),
        })
        .expect("admitted");
    let receipt = runtime
        .submit(
            admitted,
            SubmitOptions {
                submission_key: None,
                title: Some("two steps".to_owned()),
                start: StartMode::InProcess,
                ..SubmitOptions::default()
            },
        )
        .expect("submitted");
    Fixture {
        _dir: dir,
        runtime: Arc::new(runtime),
        run: receipt.run_id,
    }
}

fn server_with(runtime: &Arc<Runtime>, slots: StreamSlots) -> Router {
    let address = HOST.parse().expect("address");
    let secrets = LaunchSecrets {
        page: PageToken::from_text(TOKEN),
        launch: PageToken::from_text("launch-secret"),
        session: PageToken::from_text(SESSION),
    };
    let policy = LocalPage::new(address, secrets).expect("loopback");
    let api = routes(ApiState::new(Arc::clone(runtime), slots));
    app(api, AccessPolicy::LocalPage(policy))
}

fn server(runtime: &Arc<Runtime>) -> Router {
    server_with(runtime, StreamSlots::new(8))
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie())
        .body(Body::empty())
        .expect("request")
}

fn post(path: &str, body: &Value) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie())
        .header(header::CONTENT_TYPE, "application/json")
        .header(TOKEN_HEADER, TOKEN)
        .body(Body::from(body.to_string()))
        .expect("request")
}

async fn text(router: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn json_of(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let (status, body) = text(router, request).await;
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, value)
}

/// One SSE event: its name (`message` when unnamed), id and data.
#[derive(Debug, Clone, PartialEq)]
struct SseEvent {
    name: String,
    id: Option<String>,
    data: Value,
}

fn parse_sse(body: &str) -> Vec<SseEvent> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut event = SseEvent {
                name: "message".to_owned(),
                id: None,
                data: Value::Null,
            };
            let mut any = false;
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event.name = name.to_owned();
                    any = true;
                } else if let Some(id) = line.strip_prefix("id: ") {
                    event.id = Some(id.to_owned());
                } else if let Some(data) = line.strip_prefix("data: ") {
                    event.data = serde_json::from_str(data).unwrap_or(Value::Null);
                    any = true;
                }
            }
            any.then_some(event)
        })
        .collect()
}

#[tokio::test]
async fn a_finished_run_reads_back_as_the_runtime_shapes() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let run = fixture.run.as_str();

    let (status, list) = json_of(&router, get("/api/v1/runs")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["runs"][0]["runId"], run);
    assert_eq!(list["runs"][0]["status"]["phase"], "finished");
    for (filter, count) in [("succeeded", 1), ("failed", 0), ("running", 0), ("all", 1)] {
        let (_, filtered) = json_of(&router, get(&format!("/api/v1/runs?status={filter}"))).await;
        assert_eq!(
            filtered["runs"].as_array().map(Vec::len),
            Some(count),
            "{filter}"
        );
    }
    let (_, searched) = json_of(&router, get("/api/v1/runs?q=STEPS")).await;
    assert_eq!(searched["runs"].as_array().map(Vec::len), Some(1));
    let (status, bad) = json_of(&router, get("/api/v1/runs?status=sideways")).await;
    assert_eq!(
        (status, bad["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("query.status"))
    );

    let (status, detail) = json_of(&router, get(&format!("/api/v1/runs/{run}"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["title"], "two steps");
    let nodes: Vec<&str> = detail["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .filter_map(|e| e["node"].as_str())
        .collect();
    assert_eq!(nodes, ["first", "second"]);

    let (_, graph) = json_of(&router, get(&format!("/api/v1/runs/{run}/graph"))).await;
    assert_eq!(graph["kind"], "graphspec");
    assert_eq!(graph["identity"].as_str().map(str::len), Some(64));
    assert_eq!(graph["graph"]["root"]["name"], "root");

    let (_, execution) = json_of(&router, get(&format!("/api/v1/runs/{run}/executions/2"))).await;
    assert_eq!(execution["node"], "second");
    assert_eq!(execution["binding"]["kind"], "command");
    assert_eq!(execution["binding"]["kind"], "command");

    let (status, missing) =
        json_of(&router, get(&format!("/api/v1/runs/{run}/executions/9"))).await;
    assert_eq!(
        (status, missing["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("run.unknown_execution"))
    );
    let unknown = "01a00000-0000-7000-8000-000000000000";
    let (status, missing) = json_of(&router, get(&format!("/api/v1/runs/{unknown}"))).await;
    assert_eq!(
        (status, missing["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("run.not_found"))
    );
    let (status, _) = json_of(&router, get("/api/v1/runs/not%20a%20run")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_watch_stream_resumes_after_the_cursor_it_is_given() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let watch = format!("/api/v1/runs/{}/watch", fixture.run.as_str());

    let (status, body) = text(&router, get(&watch)).await;
    assert_eq!(status, StatusCode::OK);
    let events = parse_sse(&body);
    let (last, updates) = events.split_last().expect("events");
    assert_eq!(
        last.name, "end",
        "a finished run's stream says so at its end"
    );
    assert!(updates.len() >= 5, "{updates:?}");
    for update in updates {
        assert_eq!(update.name, "message");
        assert_eq!(
            update.id.as_deref(),
            update.data["cursor"].as_str(),
            "the SSE id is the cursor"
        );
        assert!(update.data["atMs"].as_u64().is_some_and(|at| at > 0));
    }
    assert_eq!(
        updates.last().map(|u| &u.data["event"]),
        Some(&json!("terminal"))
    );
    // Watch updates carry the execution's phase and outcome as of that event.
    let completed = updates
        .iter()
        .find(|u| u.data["event"] == "node_completed")
        .expect("a completion");
    assert_eq!(completed.data["execution"]["phase"], "completed");
    assert_eq!(completed.data["execution"]["outcome"]["status"], "verified");
    let started = updates
        .iter()
        .find(|u| u.data["event"] == "node_started")
        .expect("a dispatch");
    assert_eq!(started.data["execution"]["phase"], "active");

    // A browser's reconnect: Last-Event-ID names the last event it saw.
    let seen = &updates[2];
    let resumed = Request::get(&watch)
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie())
        .header("last-event-id", seen.id.clone().expect("id"))
        .body(Body::empty())
        .expect("request");
    let again = parse_sse(&text(&router, resumed).await.1);
    assert_eq!(again[..again.len() - 1], updates[3..]);
    // A fresh client passes ?after=; Last-Event-ID wins when both are present.
    let after = format!("{watch}?after={}", seen.id.clone().expect("id"));
    assert_eq!(parse_sse(&text(&router, get(&after)).await.1), again);
    let both = Request::get(format!("{watch}?after=c1:1"))
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie())
        .header("last-event-id", seen.id.clone().expect("id"))
        .body(Body::empty())
        .expect("request");
    assert_eq!(parse_sse(&text(&router, both).await.1), again);

    for (cursor, code) in [
        ("c1:999999", "cursor.ahead"),
        ("yesterday", "cursor.invalid"),
    ] {
        let (status, problem) = json_of(&router, get(&format!("{watch}?after={cursor}"))).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code))
        );
    }
}

#[tokio::test]
async fn the_logs_stream_filters_by_node_and_level_and_resumes() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let logs = format!("/api/v1/runs/{}/logs", fixture.run.as_str());

    let all = parse_sse(&text(&router, get(&logs)).await.1);
    let lines: Vec<&SseEvent> = all.iter().filter(|e| e.name == "message").collect();
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|e| e.data["record"]["message"].as_str())
        .collect();
    assert!(messages.contains(&"working on first"), "{messages:?}");
    assert!(messages.contains(&"working on second"), "{messages:?}");

    let second = parse_sse(&text(&router, get(&format!("{logs}?node=second"))).await.1);
    assert!(
        second
            .iter()
            .filter(|e| e.name == "message")
            .all(|e| e.data["node"] == "second")
    );
    assert!(second.iter().any(|e| e.data["node"] == "second"));

    let first_id = lines[0].id.clone().expect("id");
    let rest = parse_sse(
        &text(&router, get(&format!("{logs}?after={first_id}")))
            .await
            .1,
    );
    assert_eq!(rest.len(), all.len() - 1);

    let (status, problem) = json_of(&router, get(&format!("{logs}?level=loud"))).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("query.level"))
    );
}

#[tokio::test]
async fn the_runs_stream_opens_with_the_window_of_runs() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let response = router
        .clone()
        .oneshot(get("/api/v1/runs/events"))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    // The stream never ends by itself: read until the first event arrived.
    let mut body = response.into_body();
    let mut seen = String::new();
    while !seen.contains("\n\n") {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(10), body.frame())
            .await
            .expect("an event within the poll interval")
            .expect("a frame")
            .expect("no error");
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    let events = parse_sse(&seen);
    assert_eq!(events[0].name, "run");
    assert_eq!(events[0].data["runId"], fixture.run.as_str());
}

#[tokio::test]
async fn control_actions_need_the_token_and_answer_with_codes() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let run = fixture.run.as_str();

    let without_token = Request::post(format!("/api/v1/runs/{run}/force-stop"))
        .header(header::HOST, HOST)
        .header(header::COOKIE, cookie())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .expect("request");
    let (status, problem) = json_of(&router, without_token).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("bad_token"))
    );

    // Stopping a finished run changes nothing and says how it ended.
    let (status, stopped) = json_of(
        &router,
        post(&format!("/api/v1/runs/{run}/force-stop"), &json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stopped["status"]["terminalResult"]["status"], "succeeded");

    let (status, problem) = json_of(
        &router,
        post(&format!("/api/v1/runs/{run}/resume"), &json!({})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::CONFLICT, Some("run.nothing_to_resume"))
    );
    let (status, _) = json_of(
        &router,
        post(&format!("/api/v1/runs/{run}/resume"), &json!({"why": 1})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "unknown options are refused"
    );
}

#[tokio::test]
async fn validation_reports_diagnostics_with_the_nodes_they_name() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);

    let (status, verified) = json_of(
        &router,
        post("/api/v1/validate", &json!({"document": two_steps()})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(verified["status"], "verified");
    assert_eq!(verified["identity"].as_str().map(str::len), Some(64));
    assert!(verified["bounds"]["maxExecutions"].as_u64().is_some());

    let mut duplicate = two_steps();
    duplicate["root"]["children"][1]["name"] = json!("first");
    let (_, rejected) = json_of(
        &router,
        post("/api/v1/validate", &json!({"document": duplicate})),
    )
    .await;
    assert_eq!(rejected["status"], "rejected");
    let named: Vec<&Value> = rejected["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .flat_map(|d| d["relatedNodes"].as_array().into_iter().flatten())
        .collect();
    assert!(named.contains(&&json!("first")), "{rejected}");

    // A pasted GaP workflow is validated by the GaP rules (no file on disk needed).
    let gap = json!({"version": 3, "nodes": {"a": {"type": "noop"}}, "edges": [["START", "a"]]});
    let (status, report) = json_of(
        &router,
        post("/api/v1/validate", &json!({"document": gap, "kind": "gap"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["status"], "rejected");
    assert!(report["issues"].to_string().contains("(W5)"), "{report}");

    let (_, unparseable) = json_of(
        &router,
        post("/api/v1/validate", &json!({"document": [1, 2]})),
    )
    .await;
    assert_eq!(unparseable["status"], "unparseable");
    let (status, problem) = json_of(&router, post("/api/v1/validate", &json!({"graph": {}}))).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("request.invalid"))
    );
}

#[tokio::test]
async fn templates_are_listed_and_shown_with_their_graph() {
    let fixture = finished_run();
    let router = server(&fixture.runtime);
    let (_, list) = json_of(&router, get("/api/v1/templates")).await;
    let names: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"software-change"), "{names:?}");
    let (_, shown) = json_of(&router, get("/api/v1/templates/software-change")).await;
    assert_eq!(shown["name"], "software-change");
    assert!(shown["graph"]["root"].is_object());
    let (status, _) = json_of(&router, get("/api/v1/templates/none-such")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn event_streams_beyond_the_bound_are_refused() {
    let fixture = finished_run();
    let slots = StreamSlots::new(1);
    let router = server_with(&fixture.runtime, slots.clone());
    let held = slots.take().expect("the only slot");
    let (status, problem) = json_of(
        &router,
        get(&format!("/api/v1/runs/{}/watch", fixture.run.as_str())),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("too_many_streams"))
    );
    drop(held);
    let (status, _) = text(
        &router,
        get(&format!("/api/v1/runs/{}/watch", fixture.run.as_str())),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        slots.available(),
        1,
        "a finished stream gives its slot back"
    );
}

/// Every answer about a run whose worker saw a secret, as one text.
async fn every_answer(fixture: &Fixture) -> String {
    let router = server(&fixture.runtime);
    let run = fixture.run.as_str();
    let mut all = String::new();
    for path in [
        "/api/v1/runs".to_owned(),
        format!("/api/v1/runs/{run}"),
        format!("/api/v1/runs/{run}/graph"),
        format!("/api/v1/runs/{run}/executions/1"),
        format!("/api/v1/runs/{run}/executions/2"),
        format!("/api/v1/runs/{run}/watch"),
        format!("/api/v1/runs/{run}/logs"),
    ] {
        let (status, body) = text(&router, get(&path)).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        all.push_str(&body);
    }
    all
}

#[test]
fn no_answer_carries_a_secret_value() {
    // The secret must be in the environment of the process that drives the run (as in a
    // shell that exported it); this test cannot set its own, so it runs its half in a child.
    let canary = "canary-4f1d9c2e-not-for-browsers";
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "secret_canary_half", "--ignored", "--nocapture"])
        .env(CANARY_VARIABLE, canary)
        .output()
        .expect("child test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by no_answer_carries_a_secret_value with the canary in its environment"]
async fn secret_canary_half() {
    let canary = std::env::var(CANARY_VARIABLE).expect("started by the canary test");
    let fixture = std::thread::spawn(|| drive_run(true))
        .join()
        .expect("the run was driven");
    let answers = every_answer(&fixture).await;
    assert!(
        !answers.contains(&canary),
        "the secret value reached an answer"
    );
    assert!(
        answers.contains("secret "),
        "the worker's line about it was served (masked)"
    );
    assert!(
        !answers.contains("secret none"),
        "the worker saw the variable"
    );
}
