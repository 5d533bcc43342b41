//! The fake GitHub's merge policy, job logs and merge queue as a raw HTTP client sees them:
//! GitHub's shapes for branch rules and protection (404/403), the logs endpoint's 302 to a
//! plain-text download that takes no credential, the merge refusals policy causes, and the
//! GraphQL merge queue — scripted through the JSON action format.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};
use trellis_testkit::github::FakeGitHub;

const TOKEN: &str = "ghs_policy_7d1f0a";
const BASE: &str = "1111111111111111111111111111111111111111";
const HEAD: &str = "2222222222222222222222222222222222222222";

/// One HTTP/1.1 exchange: status, lowercased head, body text (`Connection: close`, no chunks
/// expected for these small answers — chunked bodies are joined).
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
    http_as(addr, method, path, body, Some(TOKEN))
}

fn http_as(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, payload) = answer.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let head = head.to_ascii_lowercase();
    let payload = if head.contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut text = payload;
        while let Some((size, rest)) = text.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.push_str(&rest[..size]);
            text = &rest[size + 2..];
        }
        out
    } else {
        payload.to_owned()
    };
    (status, head, payload)
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn setup() -> (FakeGitHub, u64) {
    let fake = FakeGitHub::start_blocking(TOKEN).unwrap();
    fake.add_repository("acme/app", "main", BASE);
    fake.set_branch("acme/app", "feature", HEAD);
    let number = fake.add_pull("acme/app", "t", "b", "feature", "main");
    (fake, number)
}

#[test]
fn job_logs_redirect_to_a_plain_text_download_without_credentials() {
    let (fake, number) = setup();
    fake.set_check_run("acme/app", number, "build", Some("failure"));
    let answers = fake
        .apply_json(&json!([
            {"action": "setJobLog", "repository": "acme/app", "pull": number, "name": "build",
             "log": "2026-01-01T00:00:00.0000000Z \u{1b}[31mboom\u{1b}[0m\n"},
        ]))
        .unwrap();
    let id = answers[0]["id"].as_u64().unwrap();
    let (_, _, runs) = http(
        fake.addr(),
        "GET",
        &format!("/repos/acme/app/commits/{HEAD}/check-runs"),
        None,
    );
    let run = &json_of(&runs)["check_runs"][0];
    assert_eq!(run["app"]["slug"], "github-actions");
    assert_eq!(run["id"], id);

    let (status, head, _) = http(
        fake.addr(),
        "GET",
        &format!("/repos/acme/app/actions/jobs/{id}/logs"),
        None,
    );
    assert_eq!(status, 302);
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("location: "))
        .unwrap()
        .trim()
        .to_owned();
    let path = location
        .split_once("http://localhost:")
        .expect("the download is on another origin")
        .1;
    let path = &path[path.find('/').unwrap()..];
    let (status, head, text) = http_as(fake.addr(), "GET", path, None, None);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert!(text.contains("\u{1b}[31mboom"), "served raw: {text:?}");

    fake.apply_json(
        &json!({"action": "setJobLog", "repository": "acme/app", "pull": number,
        "name": "build", "log": "", "status": 410}),
    )
    .unwrap();
    let (status, _, _) = http(
        fake.addr(),
        "GET",
        &format!("/repos/acme/app/actions/jobs/{id}/logs"),
        None,
    );
    assert_eq!(status, 410);
    let (status, _, _) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/actions/jobs/999/logs",
        None,
    );
    assert_eq!(status, 404);
}

#[test]
fn rules_protection_and_methods_have_githubs_shapes_and_bind_the_merge() {
    let (fake, number) = setup();
    let (status, _, body) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/branches/main/protection",
        None,
    );
    assert_eq!(
        (status, json_of(&body)["message"].clone()),
        (404, json!("Branch not protected"))
    );
    let (_, _, rules) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/rules/branches/main",
        None,
    );
    assert_eq!(json_of(&rules), json!([]));

    fake.apply_json(&json!([
        {"action": "setMergeMethods", "repository": "acme/app", "allowMergeCommit": false,
         "allowSquashMerge": false},
        {"action": "setBranchProtection", "repository": "acme/app", "branch": "main",
         "requiredChecks": ["ci"], "strict": true},
        {"action": "setBranchRules", "repository": "acme/app", "branch": "main", "rules": [
            {"type": "required_linear_history"},
            {"type": "required_status_checks", "parameters": {
                "strict_required_status_checks_policy": false,
                "required_status_checks": [{"context": "test"}]}}]},
    ]))
    .unwrap();
    let (_, _, repo) = http(fake.addr(), "GET", "/repos/acme/app", None);
    let repo = json_of(&repo);
    assert_eq!(
        (
            &repo["allow_merge_commit"],
            &repo["allow_squash_merge"],
            &repo["allow_rebase_merge"]
        ),
        (&json!(false), &json!(false), &json!(true))
    );
    let (_, _, protection) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/branches/main/protection",
        None,
    );
    let protection = json_of(&protection);
    assert_eq!(
        protection["required_status_checks"]["contexts"],
        json!(["ci"])
    );
    assert_eq!(protection["required_status_checks"]["strict"], json!(true));
    assert_eq!(
        protection["required_linear_history"]["enabled"],
        json!(false)
    );
    let (_, _, rules) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/rules/branches/main",
        None,
    );
    let rules = json_of(&rules);
    assert_eq!(rules[0]["type"], "required_linear_history");
    assert_eq!(rules[1]["ruleset_source_type"], "Repository");
    assert_eq!(rules[1]["ruleset_source"], "acme/app");

    // Only the required checks block; the method must be allowed.
    fake.set_check_run("acme/app", number, "ci", Some("success"));
    fake.set_check_run("acme/app", number, "optional", Some("failure"));
    let merge = |method: &str| {
        let body = json!({"merge_method": method});
        let (status, _, text) = http(
            fake.addr(),
            "PUT",
            &format!("/repos/acme/app/pulls/{number}/merge"),
            Some(&body),
        );
        (
            status,
            json_of(&text)["message"].as_str().unwrap_or("").to_owned(),
        )
    };
    let (status, message) = merge("rebase");
    assert_eq!(status, 405);
    assert!(
        message.contains("Required status check \"test\" is expected."),
        "{message}"
    );
    fake.set_check_run("acme/app", number, "test", Some("success"));
    assert_eq!(
        merge("squash"),
        (
            405,
            "Squash merges are not allowed on this repository.".into()
        )
    );
    assert_eq!(merge("rebase").0, 200);
    assert!(fake.is_merged("acme/app", number));

    fake.set_branch_protection("acme/app", "main", &["ci"], false, false);
    let (status, _, _) = http(
        fake.addr(),
        "GET",
        "/repos/acme/app/branches/main/protection",
        None,
    );
    assert_eq!(status, 403);
}

#[test]
fn the_merge_queue_is_graphql_only_and_scripted_to_merge() {
    let (fake, number) = setup();
    fake.set_branch_rules(
        "acme/app",
        "main",
        vec![json!({"type": "merge_queue", "parameters": {"merge_method": "SQUASH"}})],
    );
    let (status, _, text) = http(
        fake.addr(),
        "PUT",
        &format!("/repos/acme/app/pulls/{number}/merge"),
        Some(&json!({})),
    );
    assert_eq!(status, 405);
    assert!(text.contains("merge queue"), "{text}");

    let query = json!({"query": "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { id mergeQueueEntry { state position } } } }",
        "variables": {"owner": "acme", "name": "app", "number": number}});
    let (_, _, text) = http(fake.addr(), "POST", "/graphql", Some(&query));
    let pull = json_of(&text)["data"]["repository"]["pullRequest"].clone();
    assert_eq!(pull["mergeQueueEntry"], Value::Null);
    let mutation = json!({"query": "mutation($id: ID!, $head: GitObjectID) { enqueuePullRequest(input: {pullRequestId: $id, expectedHeadOid: $head}) { mergeQueueEntry { state position } } }",
        "variables": {"id": pull["id"], "head": "0000000000000000000000000000000000000000"}});
    let (_, _, text) = http(fake.addr(), "POST", "/api/graphql", Some(&mutation));
    assert_eq!(
        json_of(&text)["errors"][0]["type"],
        "UNPROCESSABLE",
        "a stale head is refused"
    );
    let mutation =
        json!({"query": mutation["query"], "variables": {"id": pull["id"], "head": HEAD}});
    let (_, _, text) = http(fake.addr(), "POST", "/graphql", Some(&mutation));
    assert_eq!(
        json_of(&text)["data"]["enqueuePullRequest"]["mergeQueueEntry"]["position"],
        1
    );
    assert_eq!(fake.merge_queue("acme/app"), [number]);
    fake.complete_merge_queue("acme/app", number);
    assert!(fake.is_merged("acme/app", number));
    assert!(fake.merge_queue("acme/app").is_empty());
}
