//! What the local UI's server adds for the profile editor, on a real runtime with runs driven
//! in-process: `POST /runs` starts a run of a saved profile in the directory named (its default
//! input, or another), refusing a relative or missing directory, an unknown profile and a body
//! giving both an input and a task; `GET /workers` lists the built-in registry.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use trellis_runtime::{Runtime, RuntimeOptions, StartMode};
use trellis_server::{ApiState, StreamSlots, local_runs, routes};

struct Local {
    app: Router,
    home: tempfile::TempDir,
}

/// The local UI's API (without its access layer, which `access.rs` covers) in a fresh home.
fn local() -> Local {
    let home = tempfile::tempdir().expect("temp dir");
    let runtime = Runtime::open(RuntimeOptions {
        home: Some(home.path().join("state")),
        ledger: Some(trellis_runtime::LedgerLocation::Sqlite(
            home.path().join("ledger.sqlite3"),
        )),
        controller_program: None,
    })
    .expect("runtime");
    let state =
        ApiState::new(Arc::new(runtime), StreamSlots::new(4)).with_start(StartMode::InProcess);
    let api = routes(state.clone()).merge(local_runs::routes(state));
    Local {
        app: Router::new().nest("/api/v1", api),
        home,
    }
}

async fn call(local: &Local, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
        .expect("request");
    let response = local
        .app
        .clone()
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value)
}

/// A command step that writes its label and working directory into `here`; the run succeeds
/// with it (or fails when the step does).
fn definition() -> Value {
    let state = json!({"kind": "record", "fields": {
        "label": {"type": {"kind": "string"}, "required": true},
        "here": {"type": {"kind": "string"}, "required": false},
    }});
    let out = json!({"kind": "record", "fields": {"here": {"type": {"kind": "string"}, "required": true}}});
    let script = "import json,os,sys; r=json.load(sys.stdin); \
                  print(json.dumps({'output': {'here': r['input']['label'] + ':' + os.getcwd()}}))";
    json!({
        "graph": {
            "profile": "openengine.graph.full/v1",
            "initialInput": {"kind": "record", "fields": {"label": {"type": {"kind": "string"}, "required": true}}},
            "policy": {"policy": "policy.strict@1", "default": "deny"},
            "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [], "children": [
                {"kind": "step", "name": "where", "worker": "command.where@1",
                 "input": {"kind": "record", "fields": {"label": {"type": {"kind": "string"}, "required": true}}},
                 "output": out,
                 "inputBindings": [{"target": ["label"], "value": {"source": "state", "path": ["label"]}}],
                 "writeBindings": [{"target": ["here"], "value": {"node": "where", "channel": "out", "path": ["here"]}}],
                 "timeoutMs": 60000, "attempts": 1},
                {"kind": "choice", "name": "route", "state": state, "promotedStatePaths": [],
                 "branches": [{"when": {"kind": "in", "value": {"name": "where", "source": "error", "field": null},
                                        "labels": ["timeout", "crash", "malformed", "refusal"]},
                               "node": {"kind": "fail", "name": "failed", "reason": "worker_failed"}}],
                 "otherwise": {"kind": "succeed", "name": "done", "output": out,
                               "bindings": [{"target": ["here"], "value": {"source": "state", "path": ["here"]}}]}},
            ]},
        },
        "input": {"label": "default"},
        "plan": {"uniform": {"kind": "command", "command": ["python3", "-c", script]}},
    })
}

async fn output_of(local: &Local, run: &Value) -> Value {
    let run = run["runId"].as_str().expect("run id");
    let (status, body) = call(local, "GET", &format!("/api/v1/runs/{run}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["status"]["terminalResult"].clone()
}

#[tokio::test]
async fn a_saved_profile_runs_in_the_directory_named_with_its_default_input_or_another() {
    let local = local();
    let (status, saved) = call(
        &local,
        "PUT",
        "/api/v1/profiles/where",
        Some(json!({"definition": definition()})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");

    let workspace = local.home.path().join("work");
    std::fs::create_dir(&workspace).expect("workspace");
    let directory = workspace.canonicalize().expect("canonical");
    let body = json!({"profile": "where", "workspace": directory, "title": "where am I"});
    let (status, run) = call(&local, "POST", "/api/v1/runs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    let result = output_of(&local, &run).await;
    assert_eq!(result["status"], "succeeded", "{result}");
    assert_eq!(
        result["output"]["here"],
        format!("default:{}", directory.display())
    );
    let (_, listed) = call(&local, "GET", "/api/v1/runs", None).await;
    assert_eq!(listed["runs"][0]["title"], "where am I");

    let body = json!({"profile": "where", "workspace": directory, "input": {"label": "given"}});
    let (status, run) = call(&local, "POST", "/api/v1/runs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    assert_eq!(
        output_of(&local, &run).await["output"]["here"],
        format!("given:{}", directory.display())
    );
}

#[tokio::test]
async fn refusals_name_what_is_wrong() {
    let local = local();
    let absolute = local.home.path().to_path_buf();
    let cases = [
        (
            json!({"profile": "where", "workspace": "relative/dir"}),
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            json!({"profile": "where", "workspace": absolute.join("missing")}),
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            json!({"profile": "where", "input": {}, "task": "t"}),
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            json!({"profile": "where", "graph": {}}),
            StatusCode::BAD_REQUEST,
            "request.invalid",
        ),
        (
            json!({"profile": "nobody", "workspace": absolute}),
            StatusCode::NOT_FOUND,
            "profile.not_found",
        ),
    ];
    for (body, status, code) in cases {
        let (answered, problem) = call(&local, "POST", "/api/v1/runs", Some(body.clone())).await;
        assert_eq!(
            (answered, problem["code"].as_str()),
            (status, Some(code)),
            "{body} → {problem}"
        );
    }
}

#[tokio::test]
async fn the_built_in_worker_registry_is_listed() {
    let local = local();
    let (status, workers) = call(&local, "GET", "/api/v1/workers", None).await;
    assert_eq!(status, StatusCode::OK);
    let workers = workers.as_array().expect("a list");
    assert!(workers.contains(&json!({"worker": "builtin.agent.worker@1", "kind": "agent"})));
    assert!(
        workers.contains(&json!({"worker": "builtin.git-delivery.push@1", "kind": "delivery"}))
    );
    assert!(
        workers
            .iter()
            .all(|entry| entry["kind"] == "agent" || entry["kind"] == "delivery")
    );
}
