//! A caller's connection values at the team API's edge: the requirements routes name the
//! variables an admitted run (or a resumption) requires, and every refusal of the values sent —
//! unrequired, the runtime's own, malformed — names the variable and never quotes its value.
//! (Runs that carry values are driven by detached controllers; see the CLI's
//! `caller_connections` test for the whole path.)

use axum::Router;
use axum::http::StatusCode;
use serde_json::{Value, json};

const TOKEN: &str = "trellis_callers_6a5b4c3d2e1f";
const CANARY: &str = "caller-value-canary-8c7d6e5f";

mod support;

fn app(home: &std::path::Path) -> Router {
    support::team_app(home, TOKEN)
}

/// The answer's status and text; no answer may quote the canary.
async fn send(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<String>,
) -> (StatusCode, String) {
    let answer = support::exchange(app, support::request(method, path, TOKEN, body)).await;
    assert!(
        !answer.text.contains(CANARY),
        "an answer quoted a value: {}",
        answer.text
    );
    (answer.status, answer.text)
}

/// One command step whose binding names `connections`.
fn submission(connections: &[&str]) -> Value {
    let state = json!({"kind": "record", "fields": {
        "value": {"type": {"kind": "integer"}, "required": true},
    }});
    json!({
        "graph": {
            "profile": "openengine.graph.full/v1",
            "initialInput": state,
            "policy": {"policy": "policy.strict@1", "default": "deny"},
            "root": {"kind": "seq", "name": "root", "state": state, "promotedStatePaths": [],
                     "children": [
                {"kind": "step", "name": "use", "worker": "command.use@1",
                 "input": {"kind": "null"}, "output": {"kind": "null"},
                 "inputBindings": [], "writeBindings": [], "timeoutMs": 60000, "attempts": 1},
                {"kind": "succeed", "name": "done", "output": {"kind": "null"}, "bindings": []},
            ]},
        },
        "input": {"value": 1},
        "plan": {"uniform": {"kind": "command", "command": ["true"], "connections": connections}},
    })
}

fn code(text: &str) -> String {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    value["code"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_requirements_name_the_variables_an_admitted_run_needs() {
    let home = tempfile::tempdir().expect("temp dir");
    let app = app(home.path());
    let body = submission(&["TRELLIS_TEST_UNSET_B", "TRELLIS_TEST_UNSET_A"]);
    // Nothing needs a value to be told what to send.
    let (status, text) = send(
        &app,
        "POST",
        "/api/v1/runs/requirements",
        Some(body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        answer,
        json!({"connections": ["TRELLIS_TEST_UNSET_A", "TRELLIS_TEST_UNSET_B"]})
    );
    // Values go with the submission only.
    let mut with_values = body.clone();
    with_values["connections"] = json!({"TRELLIS_TEST_UNSET_A": CANARY});
    let (status, text) = send(
        &app,
        "POST",
        "/api/v1/runs/requirements",
        Some(with_values.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    // A graph that cannot run is refused as a submission would be.
    let (status, text) = send(
        &app,
        "POST",
        "/api/v1/runs/requirements",
        Some(json!({"graph": {"profile": 1}}).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{text}");

    // A stored run's requirements: its plan's (a run without any, here).
    let (status, text) = send(
        &app,
        "POST",
        "/api/v1/runs",
        Some(submission(&[]).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    let run: Value = serde_json::from_str(&text).expect("JSON");
    let run = run["runId"].as_str().expect("run id");
    let (status, text) = send(
        &app,
        "GET",
        &format!("/api/v1/runs/{run}/requirements"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        json!({"connections": []})
    );
}

#[tokio::test]
async fn values_the_run_does_not_take_are_refused_by_name() {
    let home = tempfile::tempdir().expect("temp dir");
    let app = app(home.path());
    let cases = [
        // Not among the run's requirements.
        (
            submission(&["TRELLIS_TEST_UNSET_A"]),
            json!({"TRELLIS_TEST_UNSET_A": CANARY, "SOMETHING_ELSE": CANARY}),
            StatusCode::BAD_REQUEST,
            "connections.not_required",
            "SOMETHING_ELSE",
        ),
        // The runtime's own variable, even when a plan names it.
        (
            submission(&["TRELLIS_HOME"]),
            json!({"TRELLIS_HOME": CANARY}),
            StatusCode::BAD_REQUEST,
            "connections.reserved",
            "TRELLIS_HOME",
        ),
        (
            submission(&["TRELLIS_TEST_UNSET_A"]),
            json!({"not a name": CANARY}),
            StatusCode::BAD_REQUEST,
            "connections.invalid",
            "not a name",
        ),
        (
            submission(&["TRELLIS_TEST_UNSET_A"]),
            json!({"TRELLIS_TEST_UNSET_A": format!("{CANARY}\u{0}")}),
            StatusCode::BAD_REQUEST,
            "connections.invalid",
            "TRELLIS_TEST_UNSET_A",
        ),
        // Not an object of strings: refused without quoting what was sent.
        (
            submission(&["TRELLIS_TEST_UNSET_A"]),
            json!(CANARY),
            StatusCode::BAD_REQUEST,
            "request.invalid",
            "connections",
        ),
        // A required variable nobody supplies (the caller sent nothing): named.
        (
            submission(&["TRELLIS_TEST_UNSET_A"]),
            json!({}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "admission.missing_connection",
            "TRELLIS_TEST_UNSET_A",
        ),
    ];
    for (mut body, values, status, expected, named) in cases {
        body["connections"] = values;
        let (got, text) = send(&app, "POST", "/api/v1/runs", Some(body.to_string())).await;
        assert_eq!(got, status, "{text}");
        assert_eq!(code(&text), expected, "{text}");
        assert!(text.contains(named), "{text}");
    }
    // A refused submission left no workspace behind.
    let left = std::fs::read_dir(home.path().join("workspaces"))
        .expect("workspaces")
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(left, 0);
}
