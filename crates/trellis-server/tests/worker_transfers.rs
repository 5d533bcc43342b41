//! The routes of worker hosts without the serving host's filesystem, refused when they must
//! be: without a bearer token, without exactly one numeric `Trellis-Claim`, for an execution
//! that claim does not hold (here: a SQLite ledger, which has no queue at all), and an empty
//! result. The PostgreSQL path that answers them is exercised end to end by
//! `trellis-cli/tests/remote_worker_host.rs`.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::Value;
use support::{Answer, TeamServer, exchange};

const TOKEN: &str = "trellis_worker_transfer_token_1a2b3c4d";
const WORKSPACE: &str = "/api/v1/runs/run-1/executions/1/workspace";
const RESULT: &str = "/api/v1/runs/run-1/executions/1/result";

fn code(answer: &Answer) -> String {
    let problem: Value = serde_json::from_str(&answer.text).expect("a JSON problem");
    problem["code"].as_str().unwrap_or_default().to_owned()
}

async fn call(
    server: &TeamServer,
    method: &str,
    path: &str,
    claims: &[&str],
    token: bool,
    body: &[u8],
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    if token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    }
    for claim in claims {
        request = request.header("trellis-claim", *claim);
    }
    let answer = exchange(
        &server.app,
        request.body(Body::from(body.to_vec())).expect("request"),
    )
    .await;
    assert!(!answer.text.contains(TOKEN), "the token leaked");
    answer
}

#[tokio::test]
async fn the_workspace_and_result_routes_answer_only_a_held_claim() {
    let server = TeamServer::new(TOKEN);
    let anonymous = call(&server, "GET", WORKSPACE, &["7"], false, b"").await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    for claims in [&[][..], &["seven"][..], &["7", "8"][..]] {
        let answer = call(&server, "GET", WORKSPACE, claims, true, b"").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{claims:?}");
        assert_eq!(code(&answer), "dispatch.claim_invalid", "{claims:?}");
    }
    let fetched = call(&server, "GET", WORKSPACE, &["7"], true, b"").await;
    assert_eq!(fetched.status, StatusCode::CONFLICT, "{}", fetched.text);
    assert_eq!(code(&fetched), "dispatch.not_claimed");

    let returned = call(&server, "PUT", RESULT, &["7"], true, b"# v2 git bundle\n").await;
    assert_eq!(returned.status, StatusCode::CONFLICT, "{}", returned.text);
    assert_eq!(code(&returned), "dispatch.not_claimed");
    let empty = call(&server, "PUT", RESULT, &["7"], true, b"").await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST);
    assert_eq!(code(&empty), "dispatch.result_invalid");
}
