//! The profile routes of the team API on a real runtime with runs driven in-process: save
//! (admitted first, revision-guarded), list, read, run by name through `POST /runs`, delete;
//! refusals as problems with their codes and details; the routes and their answers in the
//! OpenAPI document.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "trellis_canary_profiles_0f1e2d3c4b5a6978";

mod support;

use support::TeamServer as Server;

fn server() -> Server {
    Server::new(TOKEN)
}

/// Sends `method path` with a JSON body (or none): the status and the answer's JSON.
async fn call(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let request = support::request(method, path, TOKEN, body.map(|b| b.to_string()));
    let answer = support::exchange(&server.app, request).await;
    let text = answer.text;
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (answer.status, value)
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
fn doubling_graph(reads: &str) -> Value {
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
             "inputBindings": [{"target": ["value"], "value": {"source": "state", "path": [reads]}}],
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

fn definition(reads: &str) -> Value {
    let script = "import json,sys; r=json.load(sys.stdin); \
                  print(json.dumps({'output': {'result': r['input']['value'] * 2}}))";
    json!({
        "graph": doubling_graph(reads),
        "input": {"value": 21},
        "plan": {"uniform": {"kind": "command", "command": ["python3", "-c", script]}},
        "description": "doubles a number",
    })
}

async fn terminal_result(server: &Server, run: &Value) -> Value {
    let run = run["runId"].as_str().expect("run id");
    let (status, body) = call(server, "GET", &format!("/api/v1/runs/{run}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["status"]["terminalResult"].clone()
}

#[tokio::test]
async fn a_profile_is_saved_run_by_name_replaced_by_revision_and_deleted() {
    let server = server();
    let (status, saved) = call(
        &server,
        "POST",
        "/api/v1/profiles",
        Some(json!({"name": "double", "definition": definition("value")})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    assert_eq!(saved["revision"], 1);
    assert_eq!(saved["admission"]["valid"], true);
    assert!(
        server
            .home
            .path()
            .join("state/profiles/double.json")
            .is_file()
    );

    let (status, listed) = call(&server, "GET", "/api/v1/profiles", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["profiles"][0]["name"], "double");
    assert_eq!(listed["profiles"][0]["description"], "doubles a number");

    // Run by name, with its default input and with another one.
    let (status, run) = call(
        &server,
        "POST",
        "/api/v1/runs",
        Some(json!({"profile": "double"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    assert_eq!(
        terminal_result(&server, &run).await,
        json!({"status": "succeeded", "output": {"result": 42}})
    );
    let body = json!({"profile": "double", "input": {"value": 4}});
    let (_, run) = call(&server, "POST", "/api/v1/runs", Some(body)).await;
    assert_eq!(
        terminal_result(&server, &run).await["output"],
        json!({"result": 8})
    );
    let mixed = json!({"profile": "double", "graph": doubling_graph("value")});
    let (status, problem) = call(&server, "POST", "/api/v1/runs", Some(mixed)).await;
    assert_eq!(
        (status, problem["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("request.invalid"))
    );
    let (status, problem) = call(
        &server,
        "POST",
        "/api/v1/runs",
        Some(json!({"profile": "nope"})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].clone()),
        (StatusCode::NOT_FOUND, json!("profile.not_found"))
    );

    // Replacing needs the revision read; a stale one is refused naming both.
    let (status, taken) = call(
        &server,
        "POST",
        "/api/v1/profiles",
        Some(json!({"name": "double", "definition": definition("value")})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{taken}");
    let put = |revision: Value| json!({"definition": definition("value"), "revision": revision});
    let (status, second) = call(
        &server,
        "PUT",
        "/api/v1/profiles/double",
        Some(put(json!(1))),
    )
    .await;
    assert_eq!(
        (status, second["revision"].clone()),
        (StatusCode::OK, json!(2)),
        "{second}"
    );
    let (status, stale) = call(
        &server,
        "PUT",
        "/api/v1/profiles/double",
        Some(put(json!(1))),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{stale}");
    assert_eq!(stale["code"], "profile.revision_conflict");
    assert_eq!(
        stale["details"],
        json!({"currentRevision": 2, "expectedRevision": 1})
    );
    let message = stale["message"].as_str().expect("message");
    assert!(
        message.contains("revision 2") && message.contains("revision 1"),
        "{message}"
    );

    let (status, _) = call(
        &server,
        "DELETE",
        "/api/v1/profiles/double?revision=1",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, deleted) = call(
        &server,
        "DELETE",
        "/api/v1/profiles/double?revision=2",
        None,
    )
    .await;
    assert_eq!(
        (status, deleted),
        (StatusCode::OK, json!({"name": "double", "revision": 2}))
    );
    let (status, gone) = call(&server, "GET", "/api/v1/profiles/double", None).await;
    assert_eq!(
        (status, gone["code"].clone()),
        (StatusCode::NOT_FOUND, json!("profile.not_found"))
    );
}

#[tokio::test]
async fn invalid_profiles_and_names_are_refused_with_their_codes() {
    let server = server();
    let body = json!({"definition": definition("missing")});
    let (status, problem) = call(&server, "PUT", "/api/v1/profiles/broken", Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["code"], "admission.graph_rejected");
    assert!(
        problem["details"]["diagnostics"]
            .as_array()
            .is_some_and(|d| !d.is_empty()),
        "{problem}"
    );
    let (status, _) = call(&server, "GET", "/api/v1/profiles/broken", None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused profile is not saved"
    );

    let mut wrong_input = definition("value");
    wrong_input["input"] = json!({"value": "text"});
    let (status, problem) = call(
        &server,
        "PUT",
        "/api/v1/profiles/typed",
        Some(json!({"definition": wrong_input})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("admission.input_mismatch")
        )
    );

    let mut both = definition("value");
    both["template"] = json!({"name": "software-change"});
    let (status, problem) = call(
        &server,
        "PUT",
        "/api/v1/profiles/both",
        Some(json!({"definition": both})),
    )
    .await;
    assert_eq!(
        (status, problem["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("profile.invalid"))
    );

    for name in ["Upper", "a%20b", ".hidden", "-x"] {
        let body = json!({"definition": definition("value")});
        let (status, problem) = call(
            &server,
            "PUT",
            &format!("/api/v1/profiles/{name}"),
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {problem}");
        assert_eq!(problem["code"], "profile.invalid_name", "{name}");
    }
    let body = json!({"name": "../up", "definition": definition("value")});
    let (status, problem) = call(&server, "POST", "/api/v1/profiles", Some(body)).await;
    assert_eq!(
        (status, problem["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("profile.invalid_name"))
    );
    let (_, listed) = call(&server, "GET", "/api/v1/profiles", None).await;
    assert_eq!(listed["profiles"], json!([]));
}

/// The keys of `value` the schema `name` does not declare, and its required keys missing.
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
async fn the_profile_routes_are_in_the_openapi_document_as_they_answer() {
    let server = server();
    let request = Request::builder()
        .uri("/openapi.json")
        .body(Body::empty())
        .expect("request");
    let response = server
        .app
        .clone()
        .oneshot(request)
        .await
        .expect("infallible");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let document: Value = serde_json::from_slice(&bytes).expect("JSON");
    for (path, method) in [
        ("/api/v1/profiles", "get"),
        ("/api/v1/profiles", "post"),
        ("/api/v1/profiles/{name}", "get"),
        ("/api/v1/profiles/{name}", "put"),
        ("/api/v1/profiles/{name}", "delete"),
    ] {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    assert!(
        document["components"]["schemas"]["SubmitRequest"]["properties"]["profile"].is_object(),
        "a submission may name a profile"
    );
    let body = json!({"name": "double", "definition": definition("value")});
    let (_, saved) = call(&server, "POST", "/api/v1/profiles", Some(body)).await;
    let (_, listing) = call(&server, "GET", "/api/v1/profiles", None).await;
    let (_, profile) = call(&server, "GET", "/api/v1/profiles/double", None).await;
    let (_, deleted) = call(
        &server,
        "DELETE",
        "/api/v1/profiles/double?force=true",
        None,
    )
    .await;
    for (name, value) in [
        ("SavedProfile", &saved),
        ("ProfileListing", &listing),
        ("ProfileSummary", &listing["profiles"][0]),
        ("Profile", &profile),
        ("ProfileDefinition", &profile["definition"]),
        ("DeletedProfile", &deleted),
    ] {
        let (undeclared, missing) = schema_mismatch(&document, name, value);
        assert!(undeclared.is_empty(), "{name}: undeclared {undeclared:?}");
        assert!(
            missing.is_empty(),
            "{name}: required but absent {missing:?}"
        );
    }
}
